"""Rubric edits (issue 35, item 5): the judge prompt carries its criteria's rubrics, an
improver may edit one like any other part of a prompt, the store keeps them on both
backends, a prompt file holds them, and a confirmed edit is written back to cycle.yaml
with its comments and layout kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cycle import aio
from cycle.assemble.config import load_config
from cycle.assemble.rubric_file import write_rubrics
from cycle.errors import ConfigError
from cycle.improve.apply import NotApplicable, apply_one, suggestion_diff
from cycle.improve.improver import (
    RUBRIC_RULES,
    Improver,
    ImproverInput,
    ImproverOutput,
    ImproverOutputWithRubrics,
    LowCase,
    answer_schema,
)
from cycle.judge.criteria import BUILTIN_CRITERIA
from cycle.judge.llm_judge import JUDGE_PROMPT
from cycle.llm.registry import get_model
from cycle.prompts.files import dump_prompt, parse_prompt
from cycle.records import Prompt, RejectedSuggestion, Suggestion
from cycle.store import Store

RUBRIC = "The reply ends with one concrete next step the customer can take."
RULE = "A reply that does not cite the order number fails, whatever else it does well."
#: a reply with every quality of the offline world but the order number
NO_ORDER = ("Hi Ann,\nI'm sorry for the trouble. Your parcel is on its way and should arrive "
            "within 2 business days. Next step: follow it with the tracking link in your "
            "shipping email.\n— The Support Team")
AGGREGATES = {"score": 60, "pass_threshold": 75}
JUDGE = JUDGE_PROMPT.model_copy(update={"rubrics": {"helpful": RUBRIC, "tone": "Polite."}})


def rubric(value: str, current: str = "", criterion: str = "helpful") -> Suggestion:
    return Suggestion(type="rubric", criterion=criterion, current_value=current,
                      suggested_value=value, decision="approved")


def test_a_rubric_edit_appends_a_sentence_or_replaces_what_it_quotes() -> None:
    appended = apply_one(JUDGE, rubric(RULE))
    assert appended.rubrics == {"helpful": f"{RUBRIC} {RULE}", "tone": "Polite."}
    assert appended.system == JUDGE.system and appended.content_hash != JUDGE.content_hash
    replaced = apply_one(JUDGE, rubric("one next step", current="one concrete next step"))
    assert replaced.rubrics["helpful"] == "The reply ends with one next step the customer can take."
    diff = suggestion_diff(JUDGE, rubric(RULE))
    assert "+++ suggested/rubrics" in diff and f"+  {RUBRIC} {RULE}" in diff
    assert "-  Polite." not in diff and "+  Polite." not in diff  # context only


@pytest.mark.parametrize("suggestion, why", [
    (rubric(RULE, criterion="accuracy"),
     "carries no rubric of a criterion 'accuracy' (rubrics: helpful, tone)"),
    (rubric("", current=RUBRIC), "the rubric of 'helpful' would be empty"),
    (rubric(RUBRIC, current=RUBRIC), "the suggestion changes nothing"),
    (rubric("x", current="not in the rubric at all"), "does not occur in the prompt"),
])
def test_a_rubric_edit_that_cannot_be_applied_says_why(suggestion, why) -> None:
    with pytest.raises(NotApplicable, match=why.replace("(", r"\(").replace(")", r"\)")):
        apply_one(JUDGE, suggestion)


def test_a_prompt_without_rubrics_keeps_its_hash_and_request() -> None:
    """Every version stored before rubrics existed keeps its identity, and every other
    cycle's improver request stays byte for byte what it was."""
    plain = Prompt(id="p", system="s")
    assert "rubrics" not in plain.canonical()
    assert plain.content_hash == Prompt(id="p", system="s", rubrics={}).content_hash
    rejected = [RejectedSuggestion(type="system_prompt", suggested_value="x", reason="r")]
    inp = ImproverInput(prompt=plain, rejected=rejected, aggregates=AGGREGATES)
    system, user = Improver(get_model("offline:default")).messages(inp)
    assert RUBRIC_RULES not in system.content and answer_schema(inp) is ImproverOutput
    block = json.loads(user.content.split("```json\n", 1)[1].rstrip("`\n"))
    assert "rubrics" not in block["prompt"] and "criterion" not in block["rejected"][0]


def test_the_improver_is_told_of_rubrics_and_may_answer_with_an_edit_of_one() -> None:
    rejected = [RejectedSuggestion(type="rubric", criterion="tone", suggested_value="x",
                                   reason="r")]
    inp = ImproverInput(prompt=JUDGE, rejected=rejected, aggregates=AGGREGATES)
    system, user = Improver(get_model("offline:default")).messages(inp)
    assert system.content.endswith(RUBRIC_RULES)
    block = json.loads(user.content.split("```json\n", 1)[1].rstrip("`\n"))
    assert block["prompt"]["rubrics"] == JUDGE.rubrics
    assert block["rejected"][0]["criterion"] == "tone"
    assert answer_schema(inp) is ImproverOutputWithRubrics
    got = ImproverOutputWithRubrics.model_validate({"suggestions": [
        {"type": "rubric", "criterion": "helpful", "suggested_value": RULE}]})
    assert Suggestion(**got.suggestions[0].model_dump()).criterion == "helpful"


def test_the_offline_improver_puts_a_rule_of_one_criterion_into_its_rubric() -> None:
    """With the rubric carried, the rule people apply goes into it, naming no criterion;
    a rule already there is not proposed again."""
    case = LowCase(id="a", input={"input": {"customer": "Ann", "order": "A-1042",
                                            "question": "Where is my parcel?"},
                                  "output": NO_ORDER, "criterion": "helpful"},
                   output=json.dumps({"score": 90, "passed": True}),
                   expected={"score": 20, "passed": False, "labels": 1, "notes": []}, score=10)
    improver = Improver(get_model("offline:default", role="improver"))
    got = aio.run(improver.propose(ImproverInput(prompt=JUDGE, low_cases=[case], aggregates=AGGREGATES)))
    assert [(s.type, s.criterion, s.current_value, s.value) for s in got] == [
        ("rubric", "helpful", "", RULE)]
    learnt = JUDGE.model_copy(update={"rubrics": {**JUDGE.rubrics, "helpful": f"{RUBRIC} {RULE}"}})
    assert aio.run(improver.propose(ImproverInput(prompt=learnt, low_cases=[case], aggregates=AGGREGATES))) == []


def test_the_store_keeps_rubrics_and_the_criterion_an_edit_names(store_target) -> None:
    with Store.open(store_target) as s:
        v = s.save_version(JUDGE, source="manual")
        assert s.get_version(JUDGE.id, v.version).prompt.rubrics == JUDGE.rubrics
        assert s.get_version(JUDGE.id, v.version).prompt.content_hash == JUDGE.content_hash
        s.cycles.save_suggestions("c1", 1, [rubric(RULE).model_copy(
            update={"decision": "rejected", "reason": "too strict"})])
        stored = s.cycles.get_suggestions("c1")
        assert [(x.type, x.criterion) for x in stored] == [("rubric", "helpful")]
        diff = s.diff(JUDGE.id, v.version, s.save_version(apply_one(JUDGE, rubric(RULE)),
                                                          source="improver").version)
        assert diff.field("rubrics").changed and not diff.field("system").changed


def test_a_prompt_file_holds_the_rubrics_and_reads_back_the_same_prompt() -> None:
    text = dump_prompt(JUDGE, "1.0.3")
    assert "rubrics:\n  helpful: The reply ends" in text
    assert parse_prompt(text).prompt.content_hash == JUDGE.content_hash
    with pytest.raises(ConfigError, match="rubrics"):
        parse_prompt(text.replace("tone: Polite.", "tone: [1, 2]"))


# -- written back to cycle.yaml ---------------------------------------------------

CONFIG = """\
# the support bot's suite
prompt: prompts/support.yaml
criteria:   # what every reply is judged on
    -   id: helpful
        rubric: 'The reply ends with one concrete next step the customer can take.'
        weight: 2   # counts double
    -   id: accuracy
    -   id: relevance
        description: Stays on the customer's question.
run:
    iterations: 1
"""


def project(tmp_path: Path, text: str = CONFIG) -> Path:
    path = tmp_path / "cycle.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_learnt_rubric_replaces_only_its_value_in_cycle_yaml(tmp_path) -> None:
    """Comments, quotes, key order and a four-space layout stay; a built-in used by id
    alone gains a rubric after its id; a built-in with a description has that replaced."""
    path = project(tmp_path)
    accuracy = BUILTIN_CRITERIA["accuracy"]
    got = write_rubrics(path, {"helpful": (RUBRIC, f"{RUBRIC} {RULE}"),
                               "accuracy": (accuracy, f"{accuracy} Cite the order."),
                               "relevance": ("Stays on the customer's question.",
                                             "Stays on the question.\nNo upselling.")})
    assert [(w.criterion, w.field, w.written, w.line) for w in got] == [
        ("helpful", "rubric", True, 5), ("accuracy", "rubric", True, 8),
        ("relevance", "description", True, 10)]
    assert path.read_text() == CONFIG.replace(RUBRIC, f"{RUBRIC} {RULE}").replace(
        "    -   id: accuracy\n",
        # quoted: the built-in's text holds ": "
        f"    -   id: accuracy\n        rubric: '{accuracy} Cite the order.'\n").replace(
        "        description: Stays on the customer's question.\n",
        "        description: |-\n            Stays on the question.\n            No upselling.\n")
    criteria = {c.id: c for c in load_config(path).config.criteria}
    assert criteria["helpful"].rubric == f"{RUBRIC} {RULE}" and criteria["helpful"].weight == 2
    assert criteria["relevance"].description == "Stays on the question.\nNo upselling."


def test_a_rubric_a_person_changed_meanwhile_is_left_as_they_wrote_it(tmp_path) -> None:
    edited = CONFIG.replace("one concrete next step", "one next step")
    path = project(tmp_path, edited)
    got = write_rubrics(path, {"helpful": (RUBRIC, f"{RUBRIC} {RULE}"),
                               "gone": ("x", "y")})
    assert [(w.criterion, w.written) for w in got] == [("helpful", False), ("gone", False)]
    assert "was changed since the cycle started" in got[0].why
    assert "has no criterion 'gone' any more" in got[1].why
    assert path.read_text() == edited  # not touched
    assert not list(tmp_path.glob(".cycle.yaml.*"))  # no temporary file left behind


def test_a_cycle_yaml_that_no_longer_loads_is_a_clear_error_and_stays(tmp_path) -> None:
    broken = CONFIG.replace("weight: 2", "weight: -2")
    path = project(tmp_path, broken)
    with pytest.raises(ConfigError, match="weight"):
        write_rubrics(path, {"helpful": (RUBRIC, RULE)})
    assert path.read_text() == broken


def test_the_judge_cycle_judges_with_the_carried_rubric_where_the_case_takes_cycle_yamls(
        ) -> None:
    """A case that sets its own rubric keeps it; one that only reweighs the criterion, or
    does not name it, is judged with the rubric the judge prompt under improvement carries."""
    from cycle.assemble.judge_cycle import _rubric_config
    from cycle.cases import TestCase
    from cycle.judge.criteria import CriterionConfig, resolve
    from cycle.judge.judge_agent import JudgeAgent, JudgedOutput

    suite = CriterionConfig(id="helpful", rubric=RUBRIC)
    cases = {"plain": TestCase(id="plain", input="x"),
             "reweighed": TestCase(id="reweighed", input="x",
                                   criteria=[CriterionConfig(id="helpful", weight=3)]),
             "own": TestCase(id="own", input="x",
                             criteria=[CriterionConfig(id="helpful", rubric=RUBRIC)])}
    facts = {"customer": "Ann", "order": "A-1042", "question": "Where is my parcel?"}
    outputs = {k: JudgedOutput(criterion=resolve(suite, threshold=70), input=facts,
                               output=NO_ORDER, config=_rubric_config(suite, case))
               for k, case in cases.items()}
    learnt = JUDGE.model_copy(update={"rubrics": {"helpful": f"{RUBRIC} {RULE}"}})
    agent = JudgeAgent(learnt, get_model("offline:default", role="judge"), outputs)
    scores = {k: aio.run(agent.run(case, iteration=0)).structured["score"]
              for k, case in cases.items()}
    assert scores == {"plain": 20, "reweighed": 20, "own": 100}
