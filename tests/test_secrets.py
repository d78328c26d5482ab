"""Keys come from the environment or .env and never reach the store, a report,
the event log or an error message, even when the provider echoes them back."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import Fault, LoopbackServer, Reply

SECRET = "sk-test-S3CRET-0123456789abcdefABCDEF"


def _project(tmp_path: Path, base_url: str) -> Path:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "cases").mkdir()
    (tmp_path / "prompts" / "p.yaml").write_text(textwrap.dedent("""\
        id: p
        system: You are terse.
        user_template: "{{ question }}"
        params: {model: openai:gpt-4o-mini}
    """))
    (tmp_path / "cases" / "c.yaml").write_text(textwrap.dedent("""\
        - id: one
          input: {question: What is 2+2?}
          expected: "4"
        - id: two
          input: {question: What is 3+3?}
          expected: "6"
    """))
    cfg = tmp_path / "cycle.yaml"
    cfg.write_text(textwrap.dedent(f"""\
        prompt: prompts/p.yaml
        agent: openai:gpt-4o-mini
        judge: openai:gpt-4o-mini
        improver: openai:gpt-4o-mini
        criteria:
          - id: accuracy
        run: {{iterations: 1}}
        providers:
          openai: {{base_url: '{base_url}'}}
        improve:
          stop: {{max_rounds: 1}}
    """))
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={SECRET}\n")
    return cfg


def _every_byte_written(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != ".env")


def _responder(request):
    if request.schema_name == "cycle_judge":
        block = json.loads(request.last_user.rsplit("```json", 1)[1].rsplit("```", 1)[0])
        return Reply(json={"verdicts": {c["id"]: {"score": 40, "reasoning": "too short"}
                                        for c in block["criteria"]}})
    if request.schema_name == "cycle_improver":
        return Reply(json={"suggestions": [{
            "type": "system_prompt", "priority": "high", "current_value": "You are terse.",
            "suggested_value": "You are terse. Show your working.", "reasoning": "r",
            "expected_improvement": "e", "target_cases": ["one"]}]})
    return Reply(text="4")


def test_key_from_dotenv_is_used_and_never_written(tmp_path):
    with LoopbackServer(responder=_responder) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        events = tmp_path / "events.jsonl"
        result = CliRunner().invoke(cli, ["improve", str(cfg), "--headless", "--yes",
                                          "--events", str(events)])
        auth = {r.headers.get("authorization") for r in srv.requests}
    assert result.exit_code == 0, result.output
    assert auth == {f"Bearer {SECRET}"}  # .env beside cycle.yaml was read
    assert events.stat().st_size > 0 and (tmp_path / ".cycle" / "cycle.db").exists()
    written = _every_byte_written(tmp_path)
    assert SECRET.encode() not in written
    assert SECRET not in result.output


def test_a_provider_echoing_the_key_in_an_error_does_not_leak_it(tmp_path):
    with LoopbackServer(responder=_responder) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        for _ in range(4):
            srv.enqueue(Fault.status(401, message=f"Incorrect API key provided: {SECRET}"))
        result = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
    assert result.exit_code in (2, 3), result.output
    assert SECRET not in result.output
    assert "Traceback" not in result.output
    assert SECRET.encode() not in _every_byte_written(tmp_path)
