"""The case screen's chat names the agent of each answer when the trace says which (an
ADK workflow's steps), and shows each answer once: in its bubble."""

from __future__ import annotations

from rich.console import Console

from cycle.records import IterationResult, ToolCall, TraceEvent
from cycle.tui.screens.case import _chat


def _shown(result: IterationResult) -> str:
    console = Console(width=100, record=True, color_system=None)
    console.print(_chat(result))
    return console.export_text()


def test_each_answer_bubble_names_its_agent_and_its_tool_calls_too():
    trace = (TraceEvent(kind="user", text="Refund A-1"),
             TraceEvent(kind="model", agent="researcher", tool_calls=(
                 ToolCall(id="1", name="lookup_order", arguments={"order": "A-1"}),)),
             TraceEvent(kind="tool_result", tool="lookup_order", call_id="1",
                        result={"status": "shipped"}),
             TraceEvent(kind="model", agent="writer", text="A-1 has shipped."))
    shown = _shown(IterationResult(case_id="c", iteration=0, status="passed", score=100.0,
                                   passed=True, trace=trace))
    assert "assistant · writer" in shown, shown
    assert "assistant [researcher] -> lookup_order(order=A-1)" in shown
    assert shown.count("A-1 has shipped.") == 1  # the bubble, not a line under it too
