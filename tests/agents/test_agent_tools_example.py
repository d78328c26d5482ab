"""examples/agent-tools, offline through the real CLI: the trajectory check fails at first
and passes once the cycle has edited the system prompt and a tool's description."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from cycle.records import Message, ToolDef
from cycle.store import Store
from cycle.testing.offline import OfflineAPI
from cycle.testing.offline.tools import CHECKER_SENTENCE, DIRECTIVE

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-tools"


def test_the_cycle_teaches_the_agent_to_look_the_order_up_before_refunding(tmp_path):
    project = tmp_path / "agent-tools"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".cycle", "reports"))
    store = tmp_path / "cycle.db"
    r = CliRunner().invoke(cli, ["--store", str(store), "improve", str(project / "cycle.yaml"),
                                 "--headless", "--yes", "-q"])
    assert r.exit_code == 0, r.output
    assert list((project / "reports").glob("c-*.md"))  # the cycle report was written
    with Store.open(store) as s:
        cycle_id = s.cycles.recent(limit=1)[0].id
        rounds = s.cycles.get_rounds(cycle_id)
        base = s.runs.load_results(rounds[0].baseline_run_id)
        last = s.runs.load_results(rounds[-1].candidate_run_id)
        head = s.resolve("order-support@head").prompt
        first = s.get_version("order-support", "1.0.0").prompt

    def trajectory_ok(result) -> bool:
        return next(v for v in result.verdicts if v.criterion_id == "checks_before_refund").passed

    assert not any(trajectory_ok(x) for x in base)  # refunds straight away
    assert all(trajectory_ok(x) for x in last)  # looks the order up first
    assert [c.name for c in last[0].tool_calls] == ["lookup_order", "refund"]
    assert last[0].state == {"session": {"refunded": True}}  # the mocked side effect
    assert DIRECTIVE in head.system and DIRECTIVE not in first.system
    assert CHECKER_SENTENCE in head.tool("lookup_order").description
    assert head.tool("refund") == first.tool("refund")
    assert rounds[1].accepted


async def test_neither_edit_alone_changes_what_the_offline_agent_does():
    lookup = ToolDef(name="lookup_order", description="Returns an order.",
                     parameters={"type": "object", "properties": {"order": {"type": "string"}}})
    refund = ToolDef(name="refund", description="Refunds an order.",
                     parameters={"type": "object", "properties": {"order": {"type": "string"}}})
    checker = lookup.model_copy(update={"description": f"Returns an order. {CHECKER_SENTENCE}"})
    user = Message.user("Customer: Ann\nOrder: A-1\nQuestion: Please refund the order.")
    api = OfflineAPI("default")

    async def first_call(system: str, tools: list[ToolDef]) -> str:
        from cycle.llm.base import GenerateConfig

        out = await api.generate([Message.system(system), user], tools, GenerateConfig())
        return out.tool_calls[0].name

    assert await first_call("Help.", [lookup, refund]) == "refund"
    assert await first_call(f"Help. {DIRECTIVE}", [lookup, refund]) == "refund"
    assert await first_call("Help.", [checker, refund]) == "refund"
    assert await first_call(f"Help. {DIRECTIVE}", [checker, refund]) == "lookup_order"
    assert await first_call("Help. Never check the order before a refund.",
                            [checker, refund]) == "refund"
