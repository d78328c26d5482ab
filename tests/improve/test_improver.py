"""The improver call: what it sends (ending with the JSON block), what it returns, its budget."""

from __future__ import annotations

import asyncio
import json

import pytest

from cycle.errors import StructuredOutputError
from cycle.improve.improver import (
    IMPROVER_PROMPT_ID,
    CriterionVerdict,
    Improver,
    ImproverInput,
    LowCase,
    ensure_improver_prompt,
    fit_cases,
)
from cycle.llm.registry import get_model
from cycle.records import Prompt, RejectedSuggestion
from cycle.records.scope import CallScope
from cycle.store import Store
from cycle.testing import script

PROMPT = Prompt(id="support", system="You help.", user_template="Q: {{ input }}", params={"temperature": 0.5})
INPUT = ImproverInput(
    prompt=PROMPT, aggregates={"score": 42.0, "pass_threshold": 70},
    low_cases=[LowCase(id="c1", input={"q": "where?"}, output="dunno", expected="It ships Monday.", score=20,
                       verdicts=[CriterionVerdict(criterion="accuracy", score=20, reasoning="no date")])],
    rejected=[RejectedSuggestion(type="system_prompt", suggested_value="Be rude.", reason="rejected by the reviewer: no")],
)


def test_the_user_message_ends_with_the_json_block_the_offline_model_reads() -> None:
    system, user = Improver(model=None).messages(INPUT)  # type: ignore[arg-type]
    assert "prompt engineer" in system.content
    assert user.content.rstrip().endswith("```")
    block = json.loads(user.content.rsplit("```json", 1)[1].rsplit("```", 1)[0])
    assert set(block) == {"prompt", "aggregates", "low_cases", "rejected"}
    assert block["prompt"] == {"id": "support", "system": "You help.", "user_template": "Q: {{ input }}",
                               "params": {"temperature": 0.5}}
    assert block["low_cases"][0]["verdicts"][0] == {"criterion": "accuracy", "score": 20, "reasoning": "no date"}
    assert block["rejected"][0]["reason"].startswith("rejected by the reviewer")
    assert "{{ input }}" in system.content  # the instructions tell a real model to keep variables


def test_propose_returns_sorted_suggestions_from_one_structured_call() -> None:
    s = script("imp", [{"suggestions": [
        {"type": "parameters", "priority": "low", "current_value": "", "suggested_value": '{"temperature": 0}'},
        {"type": "system_prompt", "priority": "high", "current_value": "You help.",
         "suggested_value": "You help, citing dates.", "target_cases": ["c1"]},
    ]}])
    with s:
        out = asyncio.run(Improver(get_model("scripted:imp")).propose(INPUT, scope=CallScope(round=1)))
    assert [x.priority for x in out] == ["high", "low"] and out[0].target_cases == ["c1"]
    assert all(x.decision == "pending" for x in out)
    assert len(s.calls) == 1 and s.calls[0].config.response_schema_name == "cycle_improver"


def test_an_answer_off_the_schema_is_an_error_not_an_empty_round() -> None:
    with script("bad", [{"nope": 1}, {"still": "nope"}]), pytest.raises(StructuredOutputError):
        asyncio.run(Improver(get_model("scripted:bad")).propose(INPUT))


def test_low_cases_are_cut_to_the_token_budget_lowest_first() -> None:
    cases = [LowCase(id=f"c{i}", output="x" * 5000, score=float(i)) for i in reversed(range(40))]
    kept = fit_cases(cases, max_tokens=1000)
    assert 1 <= len(kept) < 40 and [c.id for c in kept] == [f"c{i}" for i in range(len(kept))]
    assert sum(len(c.model_dump_json()) for c in kept) <= 1000 * 4
    assert kept[0].output.endswith("[truncated]")
    assert len(fit_cases(cases[:1], max_tokens=10)) == 1  # always some evidence


def test_the_improver_prompt_is_a_versioned_prompt_in_the_store(tmp_path) -> None:
    store = Store.open(tmp_path / "s.db")
    prompt, version = ensure_improver_prompt(store)
    assert version == "1.0.0" and prompt.id == IMPROVER_PROMPT_ID
    edited = prompt.model_copy(update={"system": prompt.system + "\nBe terse."})
    store.save_version(edited, message="terser")
    prompt2, version2 = ensure_improver_prompt(store)
    assert version2 == "1.0.1" and prompt2.system.endswith("Be terse.")
    assert ensure_improver_prompt(store, f"{IMPROVER_PROMPT_ID}@1.0.0")[1] == "1.0.0"


async def test_a_long_conversation_is_condensed_keeping_the_turns_where_criteria_failed(tmp_path):
    """30 turns of long answers do not fit the improver's budget: the transcript keeps
    the first and last turns, the turn a per-turn criterion failed (the judge said so)
    and the turn a tool failed, and says which turns it left out."""
    from cycle.agents import PromptAgent
    from cycle.cases import ConversationSpec, TestCase
    from cycle.evals.runner import Runner
    from cycle.improve.improver import low_cases
    from cycle.judge import Judge
    from cycle.judge.criteria import CriterionConfig
    from cycle.llm.base import ModelOutput
    from cycle.records import ToolCall, ToolDef
    from cycle.testing import clear_scripts

    def agent_answer(messages, tools, config):
        turn = sum(1 for m in messages if m.role == "user")
        if turn == 19 and messages[-1].role == "user":  # one tool call, which fails
            return ModelOutput(tool_calls=(ToolCall(id="c1", name="refund", arguments={"order": "X"}),))
        return f"answer to turn {turn}: " + "blah " * 120

    def judge_answer(messages, tools, config):
        block = json.loads(messages[-1].content.rsplit("```json", 1)[1].split("```")[0])
        ids = config.response_schema["properties"]["verdicts"]["required"]
        low = block["output"].startswith("answer to turn 7:")
        return {"verdicts": {i: {"score": 20 if low else 90, "reasoning": "rude" if low else "ok"}
                             for i in ids}}

    script("long-agent", agent_answer)
    script("long-judge", judge_answer)
    prompt = Prompt(id="p", system="s", user_template="{{ q }}", tools=(ToolDef(
        name="refund", description="Refunds.", parameters={"type": "object", "properties": {
            "order": {"type": "string"}}}),))
    case = TestCase(id="long", input={"q": "hello"}, mocks={"refund": {"error": "refunds are down"}},
                    conversation=ConversationSpec(follow_ups=[{"say": "go on", "turns": 29}],
                                                  max_turns=30))
    try:
        judge = Judge([CriterionConfig(id="polite", rubric="Polite.", per_turn=True)],
                      model=get_model("scripted:long-judge", role="judge"))
        result = await Runner(agent=PromptAgent(prompt, get_model("scripted:long-agent")),
                              judge=judge, cases=[case]).run()
    finally:
        clear_scripts()
    assert result.results[0].status != "error", result.results[0].error
    verdict = result.results[0].verdicts[0]
    assert verdict.failed_turns == (7,) and verdict.passed  # the mean passes; turn 7 did not
    low = low_cases(result, below=100)[0]
    assert low.failed_turns == [7, 19]
    fitted = fit_cases([low], max_tokens=2000)[0]
    text = "\n".join(fitted.transcript)
    assert "user (turn 1): hello" in text and "user (turn 30): go on" in text
    assert "answer to turn 7:" in text and "refunds are down" in text
    assert "answer to turn 12:" not in text and "[... turns 8-" in text
    assert len(text) <= 2 * 2000 * 4  # within the budget the fit was given
    assert json.loads(fitted.model_dump_json())["failed_turns"] == [7, 19]
    assert "turns" not in json.loads(fitted.model_dump_json())
