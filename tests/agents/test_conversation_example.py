"""examples/conversation, offline through the real CLI: a simulated customer, a tool that
asks the customer, and a cycle that teaches the assistant to ask for what it needs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from cycle.records import Message, ToolDef
from cycle.store import Store
from cycle.testing.offline import OfflineAPI
from cycle.testing.offline.tools import COLLECT_DIRECTIVE

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "conversation"


def test_the_cycle_teaches_the_assistant_to_ask_for_the_details_before_refunding(tmp_path):
    project = tmp_path / "conversation"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".cycle", "reports"))
    store = tmp_path / "cycle.db"
    r = CliRunner().invoke(cli, ["--store", str(store), "improve", str(project / "cycle.yaml"),
                                 "--headless", "--yes", "-q"])
    assert r.exit_code == 0, r.output
    with Store.open(store) as s:
        cycle = s.cycles.recent(limit=1)[0]
        rounds = s.cycles.get_rounds(cycle.id)
        base = s.runs.load_results(rounds[0].baseline_run_id)
        last = s.runs.load_results(rounds[-1].candidate_run_id)
        head = s.resolve("returns-assistant@head").prompt

    def passed(result, criterion) -> bool:
        return next(v for v in result.verdicts if v.criterion_id == criterion).passed

    # at first: a refund with empty details, refused, and no approval asked
    assert not any(passed(x, "complete_refund") or passed(x, "approval_first") for x in base)
    assert base[0].trace[2].kind == "tool_error" and "refund refused" in base[0].trace[2].error
    # at the end: every conversation collects the details, asks for approval, refunds
    assert all(x.passed and passed(x, "complete_refund") for x in last)
    dana = next(x for x in last if x.case_id == "broken-shoes")
    said = [e.text for e in dana.trace if e.kind == "user"]
    assert said[1:3] == ["My order number is D-4501.", "My reason is the sole was torn."]
    assert [c.name for c in dana.tool_calls] == ["request_approval", "refund"]
    asked = next(e for e in dana.trace if e.kind == "tool_result" and e.tool == "request_approval")
    assert asked.result == {"approved": True}  # the user agent answered the ask
    assert dana.state == {"session": {"refunded": True}}
    assert COLLECT_DIRECTIVE in head.system
    assert rounds[-1].accepted and cycle.stop_reason.startswith("target_score")
    # the cycle report says how the conversations went
    report = json.loads(next((project / "reports").glob("c-*.json")).read_text())
    assert report["final"]["score"] >= 95


async def test_asking_for_the_details_takes_the_directive_and_a_missing_required_argument():
    refund = ToolDef(name="refund", description="Refunds an order.", parameters={
        "type": "object", "properties": {"order": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["order", "reason"]})
    api = OfflineAPI("default")

    async def reply(system: str, *users: str):
        from cycle.llm.base import GenerateConfig

        messages = [Message.system(system)]
        for u in users:
            messages += [Message.user(u), Message.assistant("ok")]
        return await api.generate(messages[:-1], [refund], GenerateConfig())

    first = "Customer: Ann\nI want a refund."
    out = await reply("Help.", first)
    assert out.tool_calls[0].arguments == {"order": "", "reason": ""}  # calls with nothing
    out = await reply(f"Help. {COLLECT_DIRECTIVE}", first)
    assert not out.tool_calls and out.text == "Could you give me the order and the reason, please?"
    out = await reply(f"Help. {COLLECT_DIRECTIVE}", first, "My order number is A-1042.",
                      "My reason is it broke.")
    assert out.tool_calls[0].arguments == {"order": "A-1042", "reason": "it broke"}
    out = await reply("Help. Never ask for details before a refund.", first)
    assert out.tool_calls  # a negated ask does not count
