"""A rejected key stops the run at once instead of erroring every case."""

import json

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import Fault, LoopbackServer


def test_auth_failure_stops_scheduling_and_says_why(tmp_path):
    (tmp_path / "p.yaml").write_text('id: p\nsystem: s\nuser_template: "{{ q }}"\n')
    (tmp_path / "cases.yaml").write_text(
        "".join(f"- id: c{i}\n  input: {{q: question {i}}}\n" for i in range(40)))
    with LoopbackServer() as srv:
        (tmp_path / "cycle.yaml").write_text(
            "prompt: p.yaml\nagent: openai:gpt-4o-mini\ncases: [cases.yaml]\n"
            "criteria: [{id: any, check: {type: regex, pattern: '.*'}}]\n"
            "run: {iterations: 1, concurrency: 2}\n"
            f"providers: {{openai: {{base_url: '{srv.openai_base_url}'}}}}\n")
        for _ in range(40):
            srv.enqueue(Fault.status(401, message="invalid key"))
        r = CliRunner().invoke(cli, ["run", str(tmp_path / "cycle.yaml"), "--json", "--no-reports"])
        requests = srv.request_count
    assert r.exit_code == 3
    assert requests <= 2  # the two in flight; nothing scheduled after the first 401
    data = json.loads(r.output)
    assert data["status"] == "interrupted"
    assert "cannot authenticate" in data["summary"]["stop_reason"]
