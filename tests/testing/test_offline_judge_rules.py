"""The offline world's judge rules (cycle.testing.offline.judge_rules): the offline judge
applies a rule it is told, the offline improver proposes the rule people apply."""

from __future__ import annotations

import json

import msgspec
import pytest

from cycle import aio
from cycle.improve.improver import Improver, ImproverInput, LowCase
from cycle.judge.criteria import Criterion
from cycle.judge.llm_judge import JUDGE_PROMPT, LlmJudge
from cycle.llm.registry import get_model

INPUT = {"customer": "Ann", "order": "A-1042", "question": "Where is my parcel?"}
#: a reply with every quality of the offline world but the order number
NO_ORDER = ("Hi Ann,\nI'm sorry for the trouble. Your parcel is on its way and should arrive "
            "within 2 business days. Next step: follow it with the tracking link in your "
            "shipping email.\n— The Support Team")
#: one that does not apologise either
BARE = NO_ORDER.replace("I'm sorry for the trouble. ", "")
HELPFUL = Criterion(id="helpful", kind="llm", pass_mark=70,
                    description="The reply ends with one concrete next step the customer can take.")
RULE = "Rule: a reply that does not cite the order number fails, whatever else it does well."


def score(system_extra: str = "", criterion: Criterion = HELPFUL, output: str = NO_ORDER,
          *others: Criterion) -> dict[str, float]:
    prompt = JUDGE_PROMPT.model_copy(update={"system": JUDGE_PROMPT.system + system_extra})
    judge = LlmJudge(get_model("offline:default", role="judge"), prompt)
    got = aio.run(judge.score([criterion, *others], input=INPUT, output=output, expected=None))
    return {c: v.score for c, v in got.verdicts.items()}


def test_a_rule_in_the_judge_prompt_fails_a_reply_it_names() -> None:
    assert score()["helpful"] == 100  # the rubric asks for a next step only
    assert score(" " + RULE)["helpful"] == 20
    cited = NO_ORDER.replace("Your parcel", "Order #A-1042: your parcel")
    assert score(" " + RULE, HELPFUL, cited)["helpful"] == 100  # the rule holds


def test_a_rule_naming_a_criterion_applies_to_it_alone() -> None:
    tone = Criterion(id="greeting", kind="llm", pass_mark=70, description="Starts with a greeting.")
    got = score(" For 'helpful': a reply that does not cite the order number fails.",
                HELPFUL, NO_ORDER, tone)
    assert got == {"helpful": 20, "greeting": 100}
    in_rubric = msgspec.structs.replace(HELPFUL, description=HELPFUL.description + " " + RULE)
    assert score("", in_rubric)["helpful"] == 20


def low(case: str, *, judge_passed: bool, people_passed: bool, output: str = NO_ORDER,
        notes: tuple[str, ...] = ()) -> LowCase:
    return LowCase(id=case, input={"input": INPUT, "output": output, "reference": None,
                                   "criterion": "helpful"},
                   output=json.dumps({"score": 100 if judge_passed else 30,
                                      "passed": judge_passed, "reasoning": "."}),
                   expected={"score": 20, "passed": people_passed, "labels": 1, "notes": list(notes)},
                   score=10)


@pytest.mark.parametrize("system, cases, proposed", [
    ("", [low("a", judge_passed=True, people_passed=False)],
     "does not cite the order number"),
    (RULE, [low("a", judge_passed=True, people_passed=False)], None),  # it has the rule
    ("", [low("a", judge_passed=False, people_passed=True)], None),  # it never loosens
    # two qualities missing: the one people's notes name
    ("", [low("a", judge_passed=True, people_passed=False, output=BARE,
              notes=("No order number given.",))],
     "does not cite the order number"),
    ("", [low("a", judge_passed=True, people_passed=False, output=BARE)],
     "does not apologise for the trouble"),
])
def test_the_offline_improver_proposes_the_rule_people_apply(system, cases, proposed) -> None:
    """``proposed``: what the rule says a failing reply lacks (None: no rule)."""
    prompt = JUDGE_PROMPT.model_copy(update={"system": JUDGE_PROMPT.system + system})
    improver = Improver(get_model("offline:default", role="improver"))
    got = aio.run(improver.propose(ImproverInput(
        prompt=prompt, low_cases=cases, aggregates={"score": 60, "pass_threshold": 75})))
    assert [s.value for s in got] == ([
        f"For 'helpful': a reply that {proposed} fails, whatever else it does well."]
        if proposed else [])
    if proposed:
        assert got[0].type == "system_prompt" and got[0].current_value == ""


def test_a_rule_in_a_rubric_is_applied_as_a_rule_not_scored_as_a_quality() -> None:
    """The rule's words ('the order number') do not make the criterion score the order
    number as one more quality: the rubric's own keywords decide, the rule caps."""
    from cycle.testing.offline.judge_rules import without_rules

    in_rubric = msgspec.structs.replace(HELPFUL, description=HELPFUL.description + " " + RULE)
    assert without_rules(in_rubric.description).startswith(HELPFUL.description)
    assert "order" not in without_rules(in_rubric.description)
    no_step = NO_ORDER.replace("Next step: follow", "You can follow").replace(
        "Your parcel", "Order #A-1042: your parcel")
    assert score("", in_rubric, no_step) == score("", HELPFUL, no_step)
