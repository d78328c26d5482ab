"""The offline model: a deterministic agent, judge and improver that improve a prompt together."""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from cycle.errors import BadRequestError
from cycle.llm.base import GenerateConfig
from cycle.records import Message, ToolDef
from cycle.testing.offline import OfflineAPI, features, last_json_block

BARE = "You are a support agent. Answer the customer's question."
CRITERIA = [
    {"id": "tone", "description": "Polite, warm and empathetic."},
    {"id": "accuracy", "description": "Gives the correct resolution for the customer's order."},
    {"id": "actionable", "description": "Tells the customer what to do next."},
    {"id": "concise", "description": "Short and to the point, without filler."},
]
SIGN = "— The Support Team"
CASES: list[dict[str, Any]] = [
    {
        "id": "refund-late",
        "input": "Customer: Ann\nOrder: 1234\nQuestion: I returned the blender two weeks ago "
                 "and still have no refund.",
        "expected": f"Hi Ann,\nI'm sorry for the wait on order #1234. Your refund is approved and "
                    f"will be back on your card within 5 business days. Next step: keep an eye on "
                    f"the confirmation email.\n{SIGN}",
    },
    {
        "id": "parcel-missing",
        "input": "Customer: Ben\nOrder: 5521\nQuestion: My parcel was due on Monday and has not "
                 "arrived yet.",
        "expected": f"Hello Ben,\nSorry about the delay with order #5521. Your parcel is on its way "
                    f"and should arrive within 2 business days. Next step: follow it with the "
                    f"tracking link in your shipping email.\n{SIGN}",
    },
    {
        "id": "mug-cracked",
        "input": "Customer: Chloe\nOrder: 8830\nQuestion: The mug in my order arrived cracked.",
        "expected": f"Hi Chloe,\nI apologise that order #8830 arrived damaged. We will send you a "
                    f"free replacement. Next step: reply with a photo of the cracked mug.\n{SIGN}",
    },
    {
        "id": "locked-out",
        "input": "Customer: Dev\nQuestion: I can't log in, I forgot my password.",
        "expected": f"Hi Dev,\nSorry for the trouble. You can reset your password from the sign-in "
                    f"page with the 'Forgot password' link. Next step: open the reset link we "
                    f"email you.\n{SIGN}",
    },
    {
        "id": "wrong-size",
        "input": "Customer: Eve\nOrder: 7700\nQuestion: Please cancel my order, I picked the "
                 "wrong size.",
        # this reference does not sign off: the judge must not ask for a sign-off here
        "expected": "Hi Eve,\nI'm sorry for the mix-up with order #7700. Your order has been "
                    "cancelled and you will not be charged. Next step: look for the confirmation "
                    "in your inbox.",
    },
]


@pytest.fixture
def api() -> OfflineAPI:
    return OfflineAPI("default")


async def agent(api: OfflineAPI, system: str, user: str) -> str:
    out = await api.generate([Message.system(system), Message.user(user)], [], GenerateConfig())
    return out.text


def fenced(payload: dict[str, Any], intro: str = "Judge this reply.") -> str:
    return f"{intro}\n\n```json\n{json.dumps(payload, ensure_ascii=False, indent=2)}\n```\n"


async def judge(api: OfflineAPI, case: dict[str, Any], output: str,
                criteria: list[dict[str, str]] = CRITERIA) -> dict[str, dict[str, Any]]:
    block = {"input": case["input"], "output": output, "expected": case.get("expected"),
             "criteria": criteria}
    config = GenerateConfig(response_schema=JudgeAnswer.model_json_schema(),
                            response_schema_name="cycle_judge")
    out = await api.generate([Message.system("You are a strict judge."), Message.user(fenced(block))],
                             [], config)
    verdicts = JudgeAnswer.model_validate_json(out.text).verdicts
    return {cid: v.model_dump() for cid, v in verdicts.items()}


class Verdict(BaseModel):
    score: int
    reasoning: str


class JudgeAnswer(BaseModel):
    verdicts: dict[str, Verdict]


class SuggestionOut(BaseModel):
    type: Literal["system_prompt", "user_prompt", "parameters"]
    priority: Literal["high", "medium", "low"]
    current_value: str
    suggested_value: str
    reasoning: str
    expected_improvement: str
    target_cases: list[str]


class ImproverAnswer(BaseModel):
    suggestions: list[SuggestionOut]


async def improve(api: OfflineAPI, system: str, low_cases: list[dict[str, Any]],
                  rejected: list[dict[str, str]] | None = None) -> list[SuggestionOut]:
    block = {
        "prompt": {"system": system, "user_template": "{{ input }}", "params": {}},
        "aggregates": {"mean": 50},
        "low_cases": low_cases,
        "rejected": rejected or [],
    }
    config = GenerateConfig(response_schema=ImproverAnswer.model_json_schema(),
                            response_schema_name="cycle_improver")
    out = await api.generate([Message.user(fenced(block, "Improve this prompt."))], [], config)
    return ImproverAnswer.model_validate_json(out.text).suggestions


def apply(system: str, suggestion: SuggestionOut) -> str:
    if suggestion.current_value:
        assert system.count(suggestion.current_value) >= 1
        return system.replace(suggestion.current_value, suggestion.suggested_value, 1)
    return f"{system.rstrip()} {suggestion.suggested_value}".strip()


async def evaluate(api: OfflineAPI, system: str) -> tuple[float, list[dict[str, Any]]]:
    """Run and judge every case; the mean score and the cases as the improver sees them."""
    results = []
    for case in CASES:
        output = await agent(api, system, case["input"])
        verdicts = await judge(api, case, output)
        score = sum(v["score"] for v in verdicts.values()) / len(verdicts)
        results.append({
            "id": case["id"], "input": case["input"], "output": output,
            "expected": case["expected"], "score": score,
            "verdicts": [{"criterion": k, **v} for k, v in verdicts.items()],
        })
    return sum(r["score"] for r in results) / len(results), results


# -- the offline model is a model -------------------------------------------------------


async def test_it_says_it_is_offline_and_is_deterministic(api: OfflineAPI) -> None:
    assert api.offline and api.provider == "offline" and api.name == "offline:default"
    messages = [Message.system(BARE), Message.user(CASES[0]["input"])]
    a = await api.generate(messages, [], GenerateConfig())
    b = await OfflineAPI("default").generate(messages, [], GenerateConfig(seed=7))
    assert a.text == b.text and a.text
    assert a.raw_response is not None and a.raw_response["offline"] is True
    assert a.finish_reason == "stop"


async def test_usage_is_about_four_characters_a_token(api: OfflineAPI) -> None:
    user = CASES[1]["input"]
    out = await api.generate([Message.system(BARE), Message.user(user)], [], GenerateConfig())
    assert abs(out.usage.output_tokens - len(out.text) / 4) <= 1
    assert abs(out.usage.input_tokens - (len(BARE) + len(user)) / 4) <= 1


async def test_a_call_is_fast(api: OfflineAPI) -> None:
    # generous bound on a shared machine; the typical call takes tens of microseconds
    messages = [Message.system(BARE + " Greet the customer by name."), Message.user(CASES[2]["input"])]
    start = time.perf_counter()
    for _ in range(200):
        await api.generate(messages, [], GenerateConfig())
    assert (time.perf_counter() - start) / 200 < 0.005


async def test_max_tokens_and_stop_cut_the_reply(api: OfflineAPI) -> None:
    messages = [Message.system(BARE), Message.user(CASES[0]["input"])]
    full = await api.generate(messages, [], GenerateConfig())
    short = await api.generate(messages, [], GenerateConfig(max_tokens=10))
    assert short.finish_reason == "length" and len(short.text) <= 40
    assert full.text.startswith(short.text)
    stopped = await api.generate(messages, [], GenerateConfig(stop=(";",)))
    assert ";" not in stopped.text and full.text.startswith(stopped.text)


# -- agent -------------------------------------------------------------------------------


async def test_the_bare_agent_answers_the_question_with_filler(api: OfflineAPI) -> None:
    text = await agent(api, BARE, CASES[0]["input"])
    assert "refund" in text and "Thank you for contacting" in text
    assert "Ann" not in text and "1234" not in text and "Next step" not in text


@pytest.mark.parametrize(
    ("directive", "shows"),
    [
        ("Greet the customer by name.", "Hi Ann,"),
        ("Always address the customer by their first name.", "Hi Ann,"),
        ("Apologise for the trouble.", "I'm sorry for the trouble."),
        ("Show empathy for the customer's situation.", "I'm sorry"),
        ("Mention the order number.", "order #1234"),
        ("Make every reply actionable.", "Next step:"),
        ("Be brief.", None),
        ("Sign off with the team's name.", SIGN),
    ],
)
async def test_the_agent_follows_directives_in_the_system_prompt(
    api: OfflineAPI, directive: str, shows: str | None
) -> None:
    bare = await agent(api, BARE, CASES[0]["input"])
    told = await agent(api, f"{BARE} {directive}", CASES[0]["input"])
    assert told != bare
    if shows is None:  # concise: the filler goes
        assert "Thank you for contacting" not in told and len(told) < len(bare)
    else:
        assert shows in told and shows not in bare


async def test_a_negated_directive_is_not_followed(api: OfflineAPI) -> None:
    bare = await agent(api, BARE, CASES[0]["input"])
    assert await agent(api, f"{BARE} Never apologise.", CASES[0]["input"]) == bare


async def test_the_agent_calls_a_matching_tool_then_answers(api: OfflineAPI) -> None:
    tools = [
        ToolDef(name="reset_password", description="Send a reset link"),
        ToolDef(name="lookup_order", description="Find an order",
                parameters={"type": "object", "properties": {"order_id": {"type": "string"}},
                            "required": ["order_id"]}),
    ]
    user = Message.user("Customer: Ann\nOrder: 1234\nQuestion: Where is my order?")
    first = await api.generate([Message.system(BARE), user], tools, GenerateConfig())
    assert first.finish_reason == "tool_calls"
    (call,) = first.tool_calls
    assert call.name == "lookup_order" and call.arguments == {"order_id": "1234"}
    answered = [Message.system(BARE), user, Message.assistant("", (call,)),
                Message.tool('{"status": "shipped"}', tool_call_id=call.id, name=call.name)]
    second = await api.generate(answered, tools, GenerateConfig())
    assert not second.tool_calls and second.text


# -- judge -------------------------------------------------------------------------------


async def test_the_judge_scores_more_wanted_features_higher(api: OfflineAPI) -> None:
    case = CASES[0]
    bare = await agent(api, BARE, case["input"])
    polite = await agent(api, f"{BARE} Greet the customer by name. Apologise for the trouble.",
                         case["input"])
    all_in = await agent(api, " ".join([BARE, *(f.directive for f in features())]), case["input"])
    scores = []
    for output in (bare, polite, all_in):
        verdicts = await judge(api, case, output)
        assert set(verdicts) == {c["id"] for c in CRITERIA}
        scores.append(sum(v["score"] for v in verdicts.values()) / len(verdicts))
    assert scores[0] < scores[1] < scores[2]
    assert scores[0] < 60 and scores[2] >= 90


async def test_the_judge_names_what_is_missing(api: OfflineAPI) -> None:
    case = CASES[0]
    output = await agent(api, f"{BARE} Apologise for the trouble.", case["input"])
    verdicts = await judge(api, case, output)
    verdicts = {k: {**v, "reasoning": v["reasoning"].lower()} for k, v in verdicts.items()}
    assert "does not greet the customer by name" in verdicts["tone"]["reasoning"]
    assert "does not sign off" in verdicts["tone"]["reasoning"]
    assert "apologises" in verdicts["tone"]["reasoning"]
    assert "order number" in verdicts["accuracy"]["reasoning"]
    assert "next step" in verdicts["actionable"]["reasoning"]


async def test_the_judge_asks_only_for_what_the_reference_shows(api: OfflineAPI) -> None:
    # the wrong-size reference has no sign-off: a reply without one loses nothing for it
    case = CASES[4]
    system = " ".join([BARE, *(f.directive for f in features() if f.name != "sign_off")])
    output = await agent(api, system, case["input"])
    verdicts = await judge(api, case, output)
    assert verdicts["tone"]["score"] == 100
    unsigned = await judge(api, CASES[0], output.replace("7700", "1234").replace("Eve", "Ann"))
    assert unsigned["tone"]["score"] < 100 and "does not sign off" in unsigned["tone"]["reasoning"].lower()


async def test_the_judge_scores_built_in_and_unknown_criteria(api: OfflineAPI) -> None:
    criteria = [{"id": i, "description": ""} for i in
                ("accuracy", "relevance", "consistency", "step_by_step", "overall_quality")]
    case = CASES[1]
    bare = await judge(api, case, await agent(api, BARE, case["input"]), criteria)
    full = await judge(api, case, await agent(
        api, " ".join([BARE, *(f.directive for f in features())]), case["input"]), criteria)
    assert list(bare) == [c["id"] for c in criteria]
    for cid in ("accuracy", "relevance", "step_by_step", "overall_quality"):
        assert bare[cid]["score"] < full[cid]["score"], cid
    wrong = await judge(api, case, "Hi Zoe, order #9999 is on its way.", criteria)
    assert wrong["consistency"]["score"] < 50 and "Zoe" in wrong["consistency"]["reasoning"]
    empty = await judge(api, case, "", criteria)
    assert all(v["score"] == 0 for v in empty.values())


@pytest.mark.parametrize("form", ["properties", "array"])
async def test_the_judge_answers_the_schema_it_is_given(api: OfflineAPI, form: str) -> None:
    item = {"type": "object", "properties": {"rating": {"type": "number"},
                                             "why": {"type": "string"},
                                             "passed": {"type": "boolean"}},
            "required": ["rating", "why", "passed"]}
    if form == "properties":
        verdicts = {"type": "object", "properties": {c["id"]: {"$ref": "#/$defs/V"} for c in CRITERIA},
                    "required": [c["id"] for c in CRITERIA]}
    else:
        item["properties"]["criterion_id"] = {"type": "string"}
        verdicts = {"type": "array", "items": {"$ref": "#/$defs/V"}}
    schema = {"type": "object", "properties": {"verdicts": verdicts}, "required": ["verdicts"],
              "$defs": {"V": item}}
    block = {"input": CASES[0]["input"], "output": "Hi Ann, sorry!", "expected": None,
             "criteria": CRITERIA}
    out = await api.generate([Message.user(fenced(block))], [],
                             GenerateConfig(response_schema=schema, response_schema_name="cycle_judge"))
    got = json.loads(out.text)["verdicts"]
    rows = list(got.values()) if form == "properties" else got
    assert len(rows) == len(CRITERIA)
    assert all(set(r) >= {"rating", "why", "passed"} for r in rows)
    if form == "array":
        assert [r["criterion_id"] for r in rows] == [c["id"] for c in CRITERIA]


async def test_the_judge_reads_the_last_block_even_with_fences_in_the_reply(api: OfflineAPI) -> None:
    decoy = {"input": "x", "output": "decoy", "criteria": [{"id": "decoy"}]}
    real = {"input": CASES[0]["input"], "output": "Here:\n```json\n{\"a\": 1}\n```",
            "expected": None, "criteria": [{"id": "tone"}]}
    text = fenced(decoy) + "\nNow the real one:\n" + fenced(real)
    assert last_json_block(text) == real
    with pytest.raises(BadRequestError, match="json block"):
        await api.generate([Message.user("no block here")], [],
                           GenerateConfig(response_schema={"type": "object"},
                                          response_schema_name="cycle_judge"))


async def test_the_judge_reads_facts_from_a_structured_input(api: OfflineAPI) -> None:
    case = {"input": {"customer": "Ann", "order": "1234", "question": "Where is my refund?"},
            "expected": None}
    verdicts = await judge(api, case, "Hi Ann, your refund for order #1234 is on its way.",
                           [{"id": "accuracy", "description": ""}])
    assert verdicts["accuracy"]["score"] == 100


async def test_offline_default_through_the_registry() -> None:
    from cycle.llm.registry import get_model

    model = get_model("offline:default", role="judge")
    try:
        assert model.offline
        block = {"input": CASES[0]["input"], "output": "Hi Ann", "expected": None,
                 "criteria": CRITERIA}
        out = await model.generate_structured([Message.user(fenced(block))], JudgeAnswer,
                                              name="cycle_judge")
        assert set(out.parsed.verdicts) == {c["id"] for c in CRITERIA}
        assert out.raw_response["offline"] is True
    finally:
        await model.aclose()


# -- improver ----------------------------------------------------------------------------


async def test_the_improver_proposes_the_most_often_missing_feature_first(api: OfflineAPI) -> None:
    system = f"{BARE} Greet the customer by name."
    _, results = await evaluate(api, system)
    suggestions = await improve(api, system, results)
    assert len(suggestions) == 2
    first = suggestions[0]
    # greet is asked for already; apologise is missing in all five cases
    assert first.type == "system_prompt" and first.priority == "high"
    assert "Apologise for the trouble" in first.suggested_value
    assert first.current_value == "Greet the customer by name."
    assert sorted(first.target_cases) == sorted(c["id"] for c in CASES)
    assert "does not apologise" in first.reasoning and "tone" in first.expected_improvement
    # order is missing in four cases only (locked-out has no order): ranked below the five-case ones
    assert all("order number" not in s.suggested_value for s in suggestions)


async def test_the_improver_never_repeats_a_rejected_suggestion(api: OfflineAPI) -> None:
    _, results = await evaluate(api, BARE)
    first = await improve(api, BARE, results)
    rejected = [{"type": s.type, "suggested_value": s.suggested_value, "reason": "no"} for s in first]
    again = await improve(api, BARE, results, rejected)
    assert again
    assert not {s.suggested_value for s in again} & {s.suggested_value for s in first}


async def test_the_improver_proposes_nothing_once_everything_is_asked_for(api: OfflineAPI) -> None:
    system = " ".join([BARE, *(f.directive for f in features())])
    _, results = await evaluate(api, system)
    assert await improve(api, system, results) == []
    assert await improve(api, BARE, []) == []


def test_every_directive_triggers_its_own_feature_only() -> None:
    from cycle.testing.offline.world import requested

    assert requested(BARE) == []
    for f in features():
        assert [g.name for g in requested(f.directive)] == [f.name]


# -- the three roles together ------------------------------------------------------------


async def test_improvement_rounds_raise_the_score_to_85(api: OfflineAPI) -> None:
    """The quickstart's promise: from a bare prompt the cycle visibly improves it."""
    system = BARE
    mean, results = await evaluate(api, system)
    history = [mean]
    assert mean < 60
    for _ in range(4):
        low = [r for r in results if r["score"] < 90]
        suggestions = await improve(api, system, low)
        if not suggestions:
            break
        for s in suggestions:
            system = apply(system, s)
        mean, results = await evaluate(api, system)
        assert mean > history[-1], (history, mean, system)
        history.append(mean)
    assert history[-1] >= 85, history
    assert system.startswith(BARE)
