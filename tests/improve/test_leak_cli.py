"""Issue 32: an improver edit that makes the prompt read the case's expected answer scored
0 -> 100, was confirmed on fresh samples and moved head. Through the CLI, with the real
openai SDK on the loopback server: the edit is refused before review and head stays."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import LoopbackServer, Reply

LEAK = "{{ question }} (Reference for quality: {{ expected }})"


def _responder(request):
    if request.schema_name == "cycle_judge":
        block = json.loads(request.last_user.rsplit("```json", 1)[1].rsplit("```", 1)[0])
        good = "Reference for quality" in json.dumps(block)
        return Reply(json={"verdicts": {c["id"]: {"score": 100 if good else 0, "reasoning": "r"}
                                        for c in block["criteria"]}})
    if request.schema_name == "cycle_improver":
        return Reply(json={"suggestions": [{
            "type": "user_prompt", "priority": "high", "current_value": "{{ question }}",
            "suggested_value": LEAK, "reasoning": "quote the reference",
            "expected_improvement": "+100", "target_cases": ["c0"]}]})
    return Reply(text=request.last_user)


def test_a_cycle_refuses_an_edit_that_reads_expected_and_head_stays(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text(textwrap.dedent("""\
        id: p
        system: You answer.
        user_template: "{{ question }}"
        params: {model: openai:gpt-4o-mini}
    """))
    (tmp_path / "cases.yaml").write_text("".join(
        f"- id: c{i}\n  input: {{question: q{i}}}\n  expected: answer {i}\n" for i in range(4)))
    with LoopbackServer(responder=_responder) as srv:
        (tmp_path / "cycle.yaml").write_text(textwrap.dedent(f"""\
            prompt: p.yaml
            criteria: [{{id: quality, rubric: Is it good?}}]
            cases: [cases.yaml]
            run: {{iterations: 1}}
            providers: {{openai: {{base_url: '{srv.openai_base_url}'}}}}
            improve: {{stop: {{max_rounds: 2}}}}
        """))
        result = CliRunner().invoke(cli, ["improve", "cycle.yaml", "--headless", "--yes"])
    assert result.exit_code in (0, 1), result.output
    assert "production inputs do not have" in result.output or "rejected" in result.output
    with sqlite3.connect(tmp_path / ".cycle" / "cycle.db") as conn:
        versions = {v for (v,) in conn.execute("SELECT version FROM versions WHERE prompt_id='p'")}
        reasons = [r for (r,) in conn.execute("SELECT reason FROM suggestions")]
    assert versions == {"1.0.0"}  # no candidate was ever made of it, head did not move
    assert reasons and all("{{ expected }}" in r for r in reasons)
