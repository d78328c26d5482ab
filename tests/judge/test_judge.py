"""The judge: weighted scores, required criteria, one LLM call per case, malformed verdicts."""

import json

import pytest

from cycle.cases import TestCase
from cycle.errors import ConfigError, JudgeError
from cycle.judge import Judge
from cycle.judge.criteria import CriterionConfig
from cycle.llm.registry import get_model
from cycle.records import AgentResult
from cycle.testing import script


def crit(**kw) -> CriterionConfig:
    return CriterionConfig.model_validate(kw)


CASE = TestCase(id="c1", input={"order": "A-1"}, expected="Hi, order A-1")


def verdicts_for(scores: dict[str, int]):
    """A scripted judge that reads the requested schema and answers every criterion."""

    def answer(messages, tools, config):
        ids = config.response_schema["properties"]["verdicts"]["required"]
        return {"verdicts": {i: {"reasoning": f"scored {i}", "score": scores[i]} for i in ids}}

    return answer


async def test_checks_only_weighted_mean_and_required():
    judge = Judge([
        crit(id="order", check={"type": "contains", "values": ["{{ order }}"]}, weight=3, required=True),
        crit(id="polite", check={"type": "contains", "values": ["please"]}, weight=1),
    ], threshold=70)
    ok = await judge.judge(CASE, AgentResult(output="order A-1"))
    assert ok.score == pytest.approx(75.0) and ok.passed  # (100*3 + 0*1) / 4
    missing = await judge.judge(CASE, AgentResult(output="please wait"))
    assert missing.score == pytest.approx(25.0) and not missing.passed
    assert missing.failed_required == ["order"]


async def test_required_criterion_fails_the_case_whatever_the_mean():
    judge = Judge([
        crit(id="order", check={"type": "contains", "values": ["{{ order }}"]}, required=True),
        crit(id="a", check={"type": "contains", "values": ["x"]}, weight=10),
    ], threshold=70)
    r = await judge.judge(CASE, AgentResult(output="x"))
    assert r.score > 90 and not r.passed


async def test_fractional_check_pass_mark():
    judge = Judge([crit(id="words", check={"type": "contains", "values": ["a", "b"]}, pass_mark=50,
                        required=True)], threshold=40)
    r = await judge.judge(CASE, AgentResult(output="a only"))
    assert r.verdicts[0].score == 50 and r.verdicts[0].passed and r.passed


async def test_llm_criteria_scored_in_one_call_with_every_id_required():
    with script("j1", verdicts_for({"accuracy": 90, "tone": 40})) as s:
        judge = Judge([crit(id="accuracy", weight=3), crit(id="tone", rubric="Warm and polite.")],
                      model=get_model("scripted:j1", role="judge"), threshold=70)
        r = await judge.judge(CASE, AgentResult(output="Hi, order A-1"))
    assert len(s.calls) == 1
    call = s.calls[0]
    assert call.config.response_schema_name == "cycle_judge"
    assert call.config.response_schema["properties"]["verdicts"]["required"] == ["accuracy", "tone"]
    user = call.messages[-1].content
    # instructions for a real model come first; the message ends with the fenced JSON block
    assert user.index("0 to 100") < user.index("```json")
    assert user.rstrip().endswith("```")
    # the criteria a line each under "Criteria:", then a blank line: the text the judge
    # has always been sent (its answers cached before stay valid)
    listed = user.split("\nCriteria:\n", 1)[1].split("\n\nThe case (", 1)[0].split("\n")
    assert [line.split(":")[0] for line in listed] == ["- accuracy", "- tone"]
    assert listed[1] == "- tone: Warm and polite."
    block = json.loads(user.rsplit("```json", 1)[1].rsplit("```", 1)[0])
    assert block["output"] == "Hi, order A-1" and block["expected"] == "Hi, order A-1"
    assert [c["id"] for c in block["criteria"]] == ["accuracy", "tone"]
    assert "Warm and polite." in block["criteria"][1]["description"]
    assert r.score == pytest.approx((90 * 3 + 40) / 4) and r.passed
    assert {v.criterion_id: v.reasoning for v in r.verdicts}["tone"] == "scored tone"


async def test_bad_judge_json_twice_is_a_judge_error_not_a_zero():
    with script("j2", ["not json at all", '{"verdicts": {}}']) as s:
        judge = Judge([crit(id="accuracy")], model=get_model("scripted:j2", role="judge"))
        with pytest.raises(JudgeError, match="malformed"):
            await judge.judge(CASE, AgentResult(output="x"))
    assert len(s.calls) == 2  # the answer, then one repair


async def test_repaired_verdict_is_accepted():
    with script("j3", ["{oops", {"verdicts": {"accuracy": {"reasoning": "ok", "score": 80}}}]):
        judge = Judge([crit(id="accuracy")], model=get_model("scripted:j3", role="judge"))
        r = await judge.judge(CASE, AgentResult(output="x"))
    assert r.score == 80


async def test_case_overrides_criteria_by_id_and_adds_new_ones():
    case = TestCase(id="c2", input="hi", criteria=[crit(id="order", weight=5),
                                                   crit(id="short", check={"type": "max_tokens", "tokens": 5})])
    judge = Judge([crit(id="order", check={"type": "contains", "values": ["A-1"]})], threshold=50)
    resolved = judge.criteria_for(case)
    assert [(c.id, c.weight, c.kind) for c in resolved] == [("order", 5, "check"), ("short", 1, "check")]


def test_llm_criteria_without_a_judge_model_is_a_config_error():
    with pytest.raises(ConfigError, match="judge model"):
        Judge([crit(id="accuracy")])
    with pytest.raises(ConfigError, match="neither a check nor an LLM criterion"):
        Judge([crit(id="mystery")])


async def test_an_llm_criterion_on_a_0_to_10_scale_passes_at_7():
    seen = []
    given = {"helpful": 7, "tone": 60}

    def answer(messages, tools, config):
        props = config.response_schema["properties"]["verdicts"]["properties"]
        seen.append({k: v["properties"]["score"]["maximum"] for k, v in props.items()})
        return {"verdicts": {k: {"reasoning": "r", "score": v} for k, v in given.items()}}

    with script("judge", answer):
        judge = Judge([crit(id="helpful", rubric="Helps.", scale=10),
                       crit(id="tone", rubric="Kind.")],
                      model=get_model("scripted:judge", role="judge"), threshold=70)
        r = await judge.judge(CASE, AgentResult(output="x"))
        assert seen[0] == {"helpful": 10, "tone": 100}
        helpful, tone = r.verdicts
        assert (helpful.score, helpful.passed) == (70.0, True)  # 7 of 10, reported 0-100
        assert (tone.score, tone.passed) == (60.0, False)
        given["helpful"] = 6
        assert not (await judge.judge(CASE, AgentResult(output="x"))).verdicts[0].passed
        # 11 of 10 breaks the schema: repaired once, then an error (never a score)
        given["helpful"] = 11
        with pytest.raises(JudgeError):
            await judge.judge(CASE, AgentResult(output="x"))


def test_scale_is_for_llm_criteria_only():
    with pytest.raises(ConfigError, match="'scale' is for LLM criteria"):
        Judge([crit(id="c", check={"type": "contains", "values": ["a"]}, scale=10)])


async def test_the_offline_judge_answers_a_0_to_10_criterion_on_that_scale():
    judge = Judge([crit(id="tone", rubric="Polite: greets by name.", scale=10)],
                  model=get_model("offline:default", role="judge"))
    r = await judge.judge(CASE, AgentResult(output="Hi Ann, sorry. — The Support Team"))
    assert r.verdicts[0].score % 10 == 0 and 0 <= r.verdicts[0].score <= 100
