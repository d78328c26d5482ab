"""`cycle run` with several --agent / --prompt-version: every combination on the same
cases, side by side, each paired with the first; real openai SDK on loopback."""

import json
import re

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import LoopbackServer, Reply
from tests.cli.test_run_cli import project

CRITERIA = """
    criteria:
      - id: cites_order
        check: {type: contains, values: ["{{ order }}"]}
    run: {iterations: 2}
"""


def invoke(tmp_path, *args):
    return CliRunner().invoke(cli, ["--store", str(tmp_path / "store.db"), *args])


def by_model(request):
    """'good' cites the order, 'bad' never does, 'half' only for Ann."""
    order = re.search(r"Order: (\S+)", request.last_user).group(1)
    cites = {"good": True, "bad": False, "half": "Ann" in request.last_user}[request.model]
    return Reply(text=f"About order {order}." if cites else "We are looking into it.")


def test_two_models_side_by_side_paired_against_the_first(tmp_path):
    with LoopbackServer(responder=by_model) as srv:
        cfg = project(tmp_path, CRITERIA, f"providers:\n  openai: {{base_url: '{srv.openai_base_url}'}}\n")
        r = invoke(tmp_path, "run", cfg, "--agent", "openai:bad", "--agent", "openai:good",
                   "--agent", "openai:half", "--json")
        assert {q.model for q in srv.requests} == {"bad", "good", "half"}
    assert r.exit_code == 1, r.output  # some cell failed some case
    data = json.loads(r.stdout)
    cells = data["cells"]
    assert [c["label"] for c in cells] == ["openai:bad", "openai:good", "openai:half"]
    assert [c["score"] for c in cells] == [0.0, 100.0, 50.0]
    assert cells[0]["vs_first"] is None
    assert cells[1]["vs_first"]["delta"] == 100.0 and cells[1]["vs_first"]["pairs"] == 2
    assert data["cases"] == {"late": [0.0, 100.0, 100.0], "refund": [0.0, 100.0, 0.0]}
    runs = json.loads(invoke(tmp_path, "runs", "--json").output)
    assert len(runs) == 3 and {row["id"] for row in runs} == {c["run_id"] for c in cells}
    md = (tmp_path / "reports" / f"{data['matrix_id']}.md").read_text()
    assert "| case | openai:bad | openai:good | openai:half |" in md


def test_prompt_versions_times_agents(tmp_path):
    cfg = project(tmp_path, CRITERIA)
    prompt = tmp_path / "prompts" / "support.yaml"
    assert invoke(tmp_path, "prompt", "import", str(prompt)).exit_code == 0
    prompt.write_text(prompt.read_text().replace(
        "Answer the customer's question.", "Answer the customer's question. Cite the order number."))
    assert invoke(tmp_path, "prompt", "import", str(prompt)).exit_code == 0
    r = invoke(tmp_path, "run", cfg, "--prompt-version", "1.0.0", "--prompt-version", "head",
               "--agent", "offline:a", "--agent", "offline:b")
    assert r.exit_code in (0, 1), r.output
    lines = r.stdout.splitlines()
    assert "4 of 4 cells run" in lines[0] and "[offline model]" in lines[1]
    table = [line for line in lines if re.match(r"^\d  ", line)]
    assert [line.split("  ")[1] for line in table] == [
        "v1.0.0 · offline:a", "v1.0.0 · offline:b", "v1.0.1 · offline:a", "v1.0.1 · offline:b"]
    assert "baseline" in table[0] and "*" in table[2]  # citing the order: a significant gain
    assert "cell 3 of 4: v1.0.1 · offline:a" in r.stderr


def test_bad_matrices_are_refused_before_any_call(tmp_path):
    cfg = project(tmp_path, CRITERIA)
    r = invoke(tmp_path, "run", cfg, "--agent", "offline:a", "--agent", "offline:a")
    assert r.exit_code == 2 and "the same combination is asked for twice" in r.output
    r = invoke(tmp_path, "run", cfg, "--agent", "offline:a", "--agent", "nope:x")
    assert r.exit_code == 2 and "--agent: unknown model provider 'nope'" in r.output
    r = invoke(tmp_path, "run", cfg, "--agent", "offline:a", "--agent", "offline:b", "--resume", "x")
    assert r.exit_code == 2 and "cannot go with --resume" in r.output
    assert not (tmp_path / "store.db").exists()  # refused before the store was made
    r = invoke(tmp_path, "run", cfg, "--prompt-version", "7.0.0")
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert not (tmp_path / "store.db").exists()
    invoke(tmp_path, "prompt", "import", str(tmp_path / "prompts" / "support.yaml"))
    r = invoke(tmp_path, "run", cfg, "--prompt-version", "7.0.0")
    assert r.exit_code == 2 and "no version 7.0.0" in r.output
    assert json.loads(invoke(tmp_path, "runs", "--json").output) == []
