"""The judge and the improver see what the agent did, and the improver may edit a tool's
description like any other part of the prompt."""

from __future__ import annotations

import json
import re

from cycle.agents import PromptAgent
from cycle.cases import TestCase
from cycle.evals.runner import Runner
from cycle.improve.apply import apply_suggestions, suggestion_diff
from cycle.improve.improver import ImproverInput, fit_cases, low_cases
from cycle.judge import Judge
from cycle.judge.criteria import CriterionConfig
from cycle.llm.base import ModelOutput
from cycle.llm.registry import get_model
from cycle.mocks import MockSpec
from cycle.records import Prompt, Suggestion, ToolCall, ToolDef
from cycle.testing import clear_scripts, script

LOOKUP = ToolDef(name="lookup", description="Look an order up.", parameters={
    "type": "object", "properties": {"order": {"type": "string"}}})
PROMPT = Prompt(id="p", system="Help.", tools=(LOOKUP,))
BLOCK = re.compile(r"```json\s*(.*?)```", re.DOTALL)


def agent(messages, tools, config):
    if not any(m.role == "tool" for m in messages):
        return ModelOutput(tool_calls=(ToolCall(id="1", name="lookup", arguments={"order": "A-1"}),))
    return "It shipped."


async def test_the_judge_reads_the_transcript_and_the_improver_gets_it():
    seen: list[dict] = []

    def judge(messages, tools, config):
        seen.append(json.loads(BLOCK.findall(messages[-1].content)[-1]))
        return {"verdicts": {"behaviour": {"score": 40, "reasoning": "it never apologised"}}}

    script("agent", agent)
    script("judge", judge)
    try:
        runner = Runner(
            agent=PromptAgent(PROMPT, get_model("scripted:agent"),
                              mocks={"lookup": MockSpec(value={"status": "shipped"})}),
            judge=Judge([CriterionConfig(id="behaviour", rubric="Looks the order up first.")],
                        model=get_model("scripted:judge", role="judge")),
            cases=[TestCase(id="c", input="Where is A-1?")])
        result = await runner.run()
    finally:
        clear_scripts()
    assert seen[0]["transcript"] == [
        "user: Where is A-1?", 'assistant -> lookup(order=A-1)',
        'tool lookup -> {"status": "shipped"}', "assistant: It shipped."]
    [low] = low_cases(result, below=70)
    assert low.transcript == seen[0]["transcript"]
    data = ImproverInput(prompt=PROMPT, low_cases=fit_cases([low], max_tokens=2000)).data()
    assert data["prompt"]["tools"][0]["description"] == "Look an order up."
    assert data["low_cases"][0]["transcript"][1] == "assistant -> lookup(order=A-1)"


def test_a_long_transcript_is_cut_in_the_middle_for_the_improver():
    from cycle.improve.improver import LowCase

    lines = [f"tool lookup -> {'x' * 300} ({i})" for i in range(200)]
    [fitted] = fit_cases([LowCase(id="c", transcript=lines)], max_tokens=600)
    assert fitted.transcript[0].startswith("tool lookup") and "(199)" in fitted.transcript[-1]
    assert any("events left out" in line for line in fitted.transcript)
    assert sum(len(x) for x in fitted.transcript) < sum(len(x) for x in lines) / 5


def test_a_tool_description_suggestion_is_applied_previewed_and_refused_when_wrong():
    edit = Suggestion(type="tool_description", tool="lookup", current_value="Look an order up.",
                      suggested_value="Look an order up. Call it before any refund.",
                      decision="approved")
    result = apply_suggestions(PROMPT, [edit])
    assert result.prompt.tool("lookup").description == "Look an order up. Call it before any refund."
    assert result.prompt.content_hash != PROMPT.content_hash
    assert "+  description: Look an order up. Call it before any refund." in suggestion_diff(
        PROMPT, edit)
    wrong = edit.model_copy(update={"tool": "refund"})
    [skipped] = apply_suggestions(PROMPT, [wrong]).skipped
    assert "no tool named 'refund' (tools: lookup)" in skipped.reason


def test_the_tui_case_screen_shows_what_the_agent_did():
    from rich.console import Console

    from cycle.records import IterationResult, TraceEvent
    from cycle.tui.screens.case import render_case

    trace = (
        TraceEvent(kind="user", text="Refund A-1"),
        TraceEvent(kind="model", tool_calls=(ToolCall(id="1", name="refund",
                                                      arguments={"order": "A-1"}),)),
        TraceEvent(kind="tool_error", tool="refund", call_id="1", error="bank down"),
        TraceEvent(kind="state", changes={"session.tries": 1}),
        TraceEvent(kind="model", text="Sorry, try later."),
        TraceEvent(kind="final", text="Sorry, try later."),
    )
    r = IterationResult(case_id="c", iteration=0, status="terminated", score=None, passed=None,
                        error="terminated: the step limit was reached", input="Refund A-1",
                        output="", trace=trace)
    console = Console(width=100, record=True)
    console.print(render_case("c", [r]))
    shown = console.export_text()
    assert "terminated" in shown and "Conversation · 1 turn · terminated" in shown
    assert "assistant -> refund(order=A-1)" in shown
    # a chat: the user's bubble, then what the assistant did, then its answer's bubble
    assert shown.index("user · turn 1") < shown.index("refund(order=A-1)") \
        < shown.index("Sorry, try later.")
    assert "─ assistant ─╮" in shown  # its answer, in a bubble on the right
    assert "tool refund FAILED: bank down" in shown and "state: session.tries = 1" in shown


async def test_a_python_agent_reports_its_tool_calls_and_the_trajectory_checks_read_them():
    from cycle.agents import CallableAgent

    def answer(inp):
        return {"response": "Refunded.", "tool_calls": [
            {"name": "lookup_order", "arguments": {"order": "A-1"}},
            {"name": "refund", "arguments": '{"order": "A-1"}'}]}

    result = await CallableAgent(answer).run(TestCase(id="c", input={"order": "A-1"}),
                                             iteration=0)
    assert [e.kind for e in result.trace] == ["user", "model", "final"]
    judge = Judge([CriterionConfig(id="order", check={
        "type": "tool_order", "tools": ["lookup_order", "refund"]}),
        CriterionConfig(id="args", check={"type": "tool_use", "tool": "refund",
                                          "args": {"order": "A-1"}})])
    verdict = await judge.judge(TestCase(id="c", input={"order": "A-1"}), result)
    assert [v.passed for v in verdict.verdicts] == [True, True]


REFUND = ToolDef(name="refund", description="Refund.", parameters={
    "type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]})


async def python_agent(inp, tools):
    status = await tools.acall("lookup", order=inp["order"])
    await tools.acall("refund", {"order": inp["order"]})
    return f"Order {inp['order']} was {status['status']}; refunded."


def sync_python_agent(inp, tools):
    status = tools.call("lookup", order=inp["order"])
    try:
        tools.call("refund", order=42)  # breaks the schema: a tool error it can catch
    except Exception as e:  # noqa: BLE001
        return f"{status['status']}, but {type(e).__name__}: {e}"
    return "?"


def agent_mocks() -> dict:
    return {"lookup": MockSpec(value={"status": "shipped"}),
            "refund": MockSpec(value={"ok": True}, state={"session.refunded": True})}


async def test_a_python_agent_handed_the_tools_goes_through_the_mocks():
    from cycle.agents import CallableAgent

    case = TestCase(id="c", input={"order": "A-1"})
    agent = CallableAgent(python_agent, tools=[LOOKUP, REFUND], mocks=agent_mocks())
    result = await agent.run(case, iteration=0)
    assert result.output == "Order A-1 was shipped; refunded."
    assert [e.kind for e in result.trace] == [
        "user", "model", "tool_result", "tool_result", "state", "model", "final"]
    assert result.state == {"session": {"refunded": True}}
    judge = Judge([CriterionConfig(id="order", check={
        "type": "tool_order", "tools": ["lookup", "refund"], "mode": "exact"})])
    assert (await judge.judge(case, result)).passed

    sync = CallableAgent(sync_python_agent, tools=[LOOKUP, REFUND], mocks=agent_mocks())
    out = await sync.run(case, iteration=0)
    assert out.output.startswith("shipped, but ToolError: the arguments do not match")
    assert [e.kind for e in out.trace if e.kind.startswith("tool")] == ["tool_result", "tool_error"]


async def test_a_python_agent_cannot_reach_an_unmocked_tool():
    from cycle.agents import CallableAgent
    from cycle.errors import EvalError

    agent = CallableAgent(python_agent, tools=[LOOKUP, REFUND],
                          mocks={"lookup": MockSpec(value={"status": "shipped"})})
    try:
        await agent.run(TestCase(id="c", input={"order": "A-1"}), iteration=0)
    except EvalError as e:
        assert "called tool 'refund', which has no mock" in str(e)
        assert "refund: {value: ...}" in (e.hint or "")
    else:
        raise AssertionError("an unmocked tool must be an error of the iteration")
