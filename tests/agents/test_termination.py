"""How a conversation ends: every end condition, composed, and what its holding means;
the state query language, its operators and its errors."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from cycle.agents import PromptAgent
from cycle.cases import ConversationSpec, EndCondition, TestCase
from cycle.cli import cli
from cycle.evals.runner import Runner
from cycle.judge import Judge
from cycle.judge.criteria import CriterionConfig
from cycle.llm.base import ModelOutput
from cycle.llm.registry import get_model
from cycle.mocks import MockSpec
from cycle.query import check_query, matches
from cycle.records import Prompt, ToolCall, ToolDef
from cycle.testing import clear_scripts, script

STATE = {"session": {"refunded": True, "amount": 20, "reason": "broken heel"},
         "user": {"tier": "gold", "tags": ["vip"]}}


@pytest.mark.parametrize(("query", "expected"), [
    ({"session.refunded": True}, True),
    ({"session.refunded": False}, False),
    ({"session.amount": {"$gte": 20, "$lt": 30}}, True),
    ({"session.amount": {"$gt": 20}}, False),
    ({"session.amount": {"$eq": 20}}, True),
    ({"session.amount": {"$ne": 20}}, False),
    ({"user.tier": {"$in": ["gold", "silver"]}}, True),
    ({"user.tier": {"$nin": ["gold"]}}, False),
    ({"session.missing": {"$exists": False}}, True),
    ({"session.reason": {"$exists": True, "$regex": "^broken"}}, True),
    ({"session.reason": {"$not": {"$regex": "heel"}}}, False),
    ({"$or": [{"user.tier": "silver"}, {"session.amount": 20}]}, True),
    ({"$and": [{"user.tier": "gold"}, {"session.amount": {"$lt": 10}}]}, False),
    ({"$not": {"user.tier": "silver"}}, True),
    ({"session.reason": {"$gt": 3}}, False),  # a text against a number: no match
])
def test_the_state_query_language(query, expected):
    check_query(query)
    assert matches(STATE, query) is expected


@pytest.mark.parametrize(("query", "message"), [
    ({}, "non-empty mapping"),
    ({"$xor": []}, "unknown operator '$xor' at the top"),
    ({"a": {"$gtt": 1}}, "unknown operator '$gtt'"),
    ({"a": {"$in": 3}}, "a list of values"),
    ({"a": {"$regex": "("}}, "not a regular expression"),
    ({"$or": []}, "a non-empty list of queries"),
])
def test_a_malformed_query_is_refused_with_what_is_wrong(query, message):
    with pytest.raises(ValueError, match=message.replace("$", r"\$").replace("(", r"\(")):
        check_query(query)
    with pytest.raises(ValidationError):
        EndCondition.model_validate({"state_matches": query})


REFUND = ToolDef(name="refund", description="Refund.", parameters={"type": "object",
                                                                     "properties": {}})
PROMPT = Prompt(id="p", system="Help.", user_template="{{ q }}", tools=(REFUND,))


def agent_answer(messages, tools, config):
    """Refunds on the third user turn, says so, and answers JSON with a status."""
    users = sum(1 for m in messages if m.role == "user")
    if users == 3 and not any(m.role == "tool" for m in messages):
        return ModelOutput(tool_calls=(ToolCall(id="r", name="refund", arguments={}),))
    status = "refunded" if users >= 3 else "open"
    return f'{{"status": "{status}", "note": "Your refund was approved" }}' if users >= 3 \
        else '{"status": "open"}'


async def run_case(end_when, *, on_met="judged", turns=6):
    script("agent", agent_answer)
    try:
        agent = PromptAgent(PROMPT, get_model("scripted:agent"), mocks={
            "refund": MockSpec(value="ok", state={"session.refunded": True})})
        case = TestCase(id="c", input={"q": "refund please"}, conversation=ConversationSpec(
            follow_ups=[{"say": "still waiting", "turns": 9}], max_turns=turns,
            end_when=EndCondition.model_validate(end_when), on_condition_met=on_met))
        judge = Judge([CriterionConfig(id="t", check={"type": "turn_count", "max": 99})])
        return (await Runner(agent=agent, judge=judge, cases=[case]).run()).results[0]
    finally:
        clear_scripts()


def users(r) -> int:
    return sum(1 for e in r.trace if e.kind == "user")


@pytest.mark.parametrize(("end_when", "turns"), [
    ({"state_matches": {"session.refunded": True}}, 3),
    ({"field_set": "note"}, 3),
    ({"field_value": {"field": "status", "equals": "refunded"}}, 3),
    ({"custom": "tests.agents.test_termination:after_two"}, 2),
    ({"any": [{"field_set": "nothing"}, {"custom": "tests.agents.test_termination:after_two"}]}, 2),
    ({"all": [{"field_set": "note"}, {"custom": "tests.agents.test_termination:after_two"}]}, 3),
    ({"not": {"field_value": {"field": "status", "equals": "open"}}}, 3),
])
async def test_each_end_condition_ends_the_conversation_when_it_holds(end_when, turns):
    r = await run_case(end_when)
    assert users(r) == turns, r.trace
    assert r.status == "passed"
    assert r.trace[-1].kind == "final"


def after_two(now):
    return now.turn >= 2


async def test_what_the_condition_holding_means():
    assert (await run_case({"field_set": "note"}, on_met="fail")).status == "failed"
    # seed 003: max_turns reached means fail by default, the judge's scores kept
    never = await run_case({"field_set": "nothing"}, turns=4)
    assert never.status == "failed" and users(never) == 4
    assert "max_turns reached" in never.verdicts[-1].reasoning
    assert never.trace[-1].reason.startswith("max_turns reached: 4 user turns")


async def test_a_natural_language_condition_asks_a_model_offline():
    script("agent", lambda m, t, c: "Your refund has been approved and is on its way."
           if sum(1 for x in m if x.role == "user") >= 2 else "Let me check.")
    try:
        agent = PromptAgent(Prompt(id="p", user_template="{{ q }}"), get_model("scripted:agent"))
        case = TestCase(id="c", input={"q": "refund?"}, conversation=ConversationSpec(
            follow_ups=["any news?", "and now?"], end_when=EndCondition.model_validate(
                {"natural_language": {"condition": "the refund has been approved",
                                      "model": "offline:default"}})))
        r = await agent.run(case, iteration=0)
        await agent.aclose()
    finally:
        clear_scripts()
    assert sum(1 for e in r.trace if e.kind == "user") == 2
    assert "the end condition held after turn 2" in r.note


def test_bad_end_conditions_are_refused_before_any_call(tmp_path):
    (tmp_path / "p.yaml").write_text("id: p\nuser_template: '{{ q }}'\n"
                                     "params: {model: 'offline:default'}\n")
    (tmp_path / "cycle.yaml").write_text("prompt: p.yaml\ncriteria: [{id: x, check: "
                                         "{type: contains, values: [a]}}]\ncases: [cases.yaml]\n")
    for end_when, message in [
        ("{state_matches: {a: {$gtt: 1}}}", "unknown operator '$gtt'"),
        ("{custom: 'nowhere:fn'}", "cannot import module 'nowhere'"),
        ("{bogus: 1}", "bogus"),
        ("{natural_language: {condition: done, model: 'nosuch:m'}}", "nosuch"),
    ]:
        (tmp_path / "cases.yaml").write_text(textwrap.dedent(f"""\
            - id: c
              input: {{q: hi}}
              conversation:
                follow_ups: [more]
                end_when: {end_when}
            """))
        r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                     str(tmp_path / "cycle.yaml")])
        assert r.exit_code == 2, (end_when, r.output)
        assert message in r.output and "cases.yaml" in r.output, (end_when, r.output)
        assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize(("nested", "dotted"), [
    ({"session": {"refunded": True}}, {"session.refunded": True}),
    ({"session": {"escalation": {"$exists": True}}}, {"session.escalation": {"$exists": True}}),
    ({"session": {"amount": {"$gte": 20}}, "user": {"tier": "gold"}},
     {"session.amount": {"$gte": 20}, "user.tier": "gold"}),
    ({"$or": [{"user": {"tier": "silver"}}, {"session": {"reason": {"$regex": "heel"}}}]},
     {"$or": [{"user.tier": "silver"}, {"session.reason": {"$regex": "heel"}}]}),
])
def test_the_nested_state_matches_form_equals_the_dotted_one(nested, dotted):
    """Issue 31: seed 000's nested stateMatches form was accepted and never matched."""
    check_query(nested)
    for state in (STATE, {"session": {"escalation": 1, "refunded": True, "amount": 5}}, {}):
        assert matches(state, nested) is matches(state, dotted)
    assert matches(STATE, nested) is matches(STATE, dotted)


async def test_any_asks_a_paid_condition_only_when_the_free_ones_do_not_decide():
    """Issue 31: `any:` ran its natural-language check every turn even when a free
    condition already held."""
    from cycle.agents.termination import ConversationState, holds

    asked: list[str] = []

    class Counting:
        async def generate_structured(self, *args, **kwargs):
            asked.append("model")
            raise AssertionError("a free condition already decided")

    cond = EndCondition.model_validate({"any": [
        {"natural_language": {"condition": "the user is happy"}},
        {"state_matches": {"session": {"refunded": True}}}]})
    now = ConversationState("c", 1, "ok", STATE, ())
    assert await holds(cond, now, model=lambda name: Counting(), iteration=0)
    both = EndCondition.model_validate({"all": [
        {"natural_language": {"condition": "the user is happy"}},
        {"state_matches": {"session.refunded": False}}]})
    assert not await holds(both, now, model=lambda name: Counting(), iteration=0)
    assert asked == []
