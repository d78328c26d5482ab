"""`cycle import openai-evals` of registry evals judged by FuzzyMatch (a python check of
cycle's that normalizes as openai/evals does) and by ModelBasedClassify (an LLM criterion
carrying the modelgraded spec's prompt and choice scores, or a refusal naming the eval, the
reason and the fix). The registry files are laid out as in an openai/evals checkout:
registry/evals/NAME.yaml, registry/modelgraded/SPEC.yaml, registry/data/NAME/samples.jsonl."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cycle.cli import cli
from cycle.formats.openai_evals_checks import fuzzy, fuzzy_match, normalized
from cycle.testing.checks import check_context
from tests.formats.test_openai_evals import registry_eval

SAMPLES = [
    {"input": [{"role": "system", "content": "Answer briefly."},
               {"role": "user", "content": "Who wrote Hamlet?"}],
     "ideal": ["William Shakespeare", "Shakespeare"]},
    {"input": [{"role": "system", "content": "Answer briefly."},
               {"role": "user", "content": "What is the largest ocean?"}],
     "ideal": "The Pacific Ocean"},
]
FUZZY = registry_eval("trivia", "evals.elsuite.basic.fuzzy_match:FuzzyMatch",
                      "trivia/samples.jsonl")


def graded(spec: str) -> str:
    """A ModelBasedClassify eval of the registry, graded by the modelgraded ``spec``."""
    return registry_eval(
        "abstract2title", "evals.elsuite.modelgraded.classify:ModelBasedClassify",
        "trivia/samples.jsonl", version="test.v1", modelgraded_spec=spec,
        modelgraded_spec_args={"criteria": "conciseness: Does the title properly describe "
                               "the provided content?"})


CLOSEDQA = """\
closedqa:
  prompt: |-
    You are assessing a submitted answer on a given task based on a criterion. Here is the data:
    [BEGIN DATA]
    ***
    [Task]: {input}
    ***
    [Submission]: {completion}
    ***
    [Criterion]: {criteria}
    ***
    [END DATA]
    Does the submission meet the criterion? Then print only the single character "Y" or "N".
  eval_type: cot_classify
  choice_scores:
    "Y": 1.0
    "N": 0.0
  choice_strings: 'YN'
  input_outputs:
    input: "completion"
"""
FACT = """\
fact:
  prompt: |-
    [Question]: {input}
    [Expert]: {ideal}
    [Submission]: {completion}
    (A) subset (B) superset (C) same (D) disagreement (E) immaterial
  choice_strings: ABCDE
  input_outputs:
    input: completion
"""
LIKERT = """\
humor_likert:
  prompt: |-
    Is this funny? {completion} Rate it 1 to 5; braces stay: {{x}}.
  choice_strings: "12345"
  choice_scores: from_strings
  input_outputs:
    input: completion
"""
BATTLE = """\
battle:
  prompt: |-
    [Instruction 1] {input1} [Response 1] {completion1}
    [Instruction 2] {input2} [Response 2] {completion2}
  choice_strings: ["Yes", "No"]
  choice_scores: {"Yes": 1.0, "No": 0.0}
  input_outputs:
    input1: completion1
    input2: completion2
"""


def registry(tmp_path: Path, eval_yaml: str, specs: dict[str, str] | None = None) -> Path:
    root = tmp_path / "evals" / "registry"
    (root / "evals").mkdir(parents=True)
    (root / "data" / "trivia").mkdir(parents=True)
    (root / "evals" / "trivia.yaml").write_text(eval_yaml)
    (root / "data" / "trivia" / "samples.jsonl").write_text(
        "".join(json.dumps(s) + "\n" for s in SAMPLES))
    if specs is not None:
        (root / "modelgraded").mkdir()
        for name, text in specs.items():
            (root / "modelgraded" / name).write_text(text)
    return root


def imported(root: Path, out: Path):
    return CliRunner().invoke(cli, [
        "import", "openai-evals", str(root / "data" / "trivia" / "samples.jsonl"), "--graders",
        str(root / "evals" / "trivia.yaml"), "--out", str(out), "--model", "offline:default"])


@pytest.mark.parametrize(("answer", "ideal", "matches"), [
    ("Shakespeare.", "William Shakespeare", True),  # the ideal contains the answer
    ("It was William Shakespeare!", "Shakespeare", True),  # the answer contains the ideal
    ("the Pacific", "The Pacific Ocean", True),  # articles and case go
    ("Atlantic", "The Pacific Ocean", False),
    ("", "Paris", False), ("...", "!", True),  # both empty once normalized
    ("U.S.A", "usa", True), ("an apple", "apple", True), ("théâtre", "THÉÂTRE", True),
])
def test_fuzzy_match_normalizes_as_openai_evals_does(answer, ideal, matches):
    assert fuzzy(answer, ideal) is matches
    assert normalized("  The  U.S.A., an   Answer! ") == "usa answer"


def test_a_fuzzy_match_eval_becomes_a_python_check_over_every_ideal_answer(tmp_path):
    root = registry(tmp_path, FUZZY)
    out = tmp_path / "p"
    r = imported(root, out)
    assert r.exit_code == 0, r.output
    config = yaml.safe_load((out / "cycle.yaml").read_text())
    assert config["criteria"] == [{
        "id": "fuzzy_match", "description": "The answer and an ideal answer, normalized, "
        "contain one another (OpenAI evals' FuzzyMatch)",
        "check": {"type": "python", "function": "cycle.formats.openai_evals_checks:fuzzy_match"}}]
    cases = yaml.safe_load((out / "cases" / "samples.yaml").read_text())
    assert cases[0]["input"]["ideals"] == ["William Shakespeare", "Shakespeare"]
    hamlet = cases[0]["input"]
    assert fuzzy_match(check_context("shakespeare", input=hamlet))[0] == 100
    assert fuzzy_match(check_context("Marlowe", input=hamlet))[0] == 0
    # a case written by hand: its expected answer
    assert fuzzy_match(check_context("Pacific", input={}, expected="Pacific Ocean"))[0] == 100
    run = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                   str(out / "cycle.yaml"), "-n", "1", "--json", "--no-reports"])
    assert run.exit_code in (0, 1), run.output
    assert json.loads(run.output)["summary"]["errors"] == 0


def test_a_model_graded_eval_is_a_criterion_with_the_specs_prompt_and_scores(tmp_path):
    root = registry(tmp_path, graded("closedqa"), {"closedqa.yaml": CLOSEDQA})
    out = tmp_path / "p"
    r = imported(root, out)
    assert r.exit_code == 0, r.output
    [criterion] = yaml.safe_load((out / "cycle.yaml").read_text())["criteria"]
    assert criterion["id"] == "closedqa" and criterion["pass_mark"] == 100
    rubric = criterion["rubric"]
    assert "[Task]: [the task: the case's input]" in rubric
    assert "[Submission]: [the answer being judged]" in rubric
    assert "[Criterion]: conciseness: Does the title properly describe" in rubric
    assert rubric.endswith('Choose one of "Y", "N". Score the answer by the choice: Y = 100, '
                           "N = 0 (nothing between). If no choice fits, score it as the lowest.")
    # the project loads: a run offline judges it (the offline judge's scores)
    run = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                   str(out / "cycle.yaml"), "-n", "1", "--json", "--no-reports"])
    assert run.exit_code in (0, 1), run.output


def test_a_spec_among_others_in_a_file_and_scores_from_strings(tmp_path):
    # registry 3.0.1's keywords.yaml repeats a key: openai/evals (PyYAML) reads it anyway
    root = registry(tmp_path, graded("humor_likert"),
                    {"humor.yaml": "humor: {prompt: x, choice_strings: YN, input_outputs: "
                     "{input: completion}}\n" + LIKERT,
                     "keywords.yaml": "seo_keywords:\n  input_outputs:\n    input: a\n"
                     "    input: b\n"})
    out = tmp_path / "p"
    r = imported(root, out)
    assert r.exit_code == 0, r.output
    [criterion] = yaml.safe_load((out / "cycle.yaml").read_text())["criteria"]
    assert "1 = 0, 2 = 25, 3 = 50, 4 = 75, 5 = 100" in criterion["rubric"]
    assert "braces stay: {x}." in criterion["rubric"]  # str.format's {{x}} is {x}
    assert criterion["description"].endswith("passes on 5")


def test_a_model_graded_eval_whose_spec_is_missing_is_refused(tmp_path):
    """The spec cannot be read: the import's error, naming the eval and where to copy the
    spec (then import again), and no project written."""
    root = registry(tmp_path, graded("fact"))
    out = tmp_path / "p"
    r = imported(root, out)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and not (out / "cycle.yaml").exists()
    assert "trivia.yaml" in r.output
    assert "eval abstract2title.test.v1 (ModelBasedClassify, modelgraded_spec fact)" in r.output
    assert ("its spec is not here: openai/evals defines it in "
            "evals/registry/modelgraded/*.yaml (fact: ...)") in r.output
    assert "modelgraded/ (beside registry/evals/)" in r.output


@pytest.mark.parametrize(("spec", "files", "says", "fix"), [
    ("fact", {"fact.yaml": FACT}, ("its spec has no choice_scores: openai/evals only counts "
                                   "which choice the grader picks"),
     "Add choice_scores to fact (a score for each of A, B, C, D, E)"),
    ("battle", {"battle.yaml": BATTLE}, "it grades several completions together",
     "pairwise: true"),
])
def test_a_model_graded_eval_cycle_cannot_grade_faithfully_is_listed_and_the_rest_imported(
        tmp_path, spec, files, says, fix):
    """As promptfoo's import lists what it cannot check: the eval's grader is not converted
    (said on the console and at cycle.yaml's top, with the reason and the fix), its cases and
    prompt are, and the project says it has no criterion yet rather than judging with a
    made-up one."""
    root = registry(tmp_path, graded(spec), files)
    out = tmp_path / "p"
    r = imported(root, out)
    assert r.exit_code == 0, r.output
    said = f"eval abstract2title.test.v1 (ModelBasedClassify, modelgraded_spec {spec}): "
    (line,) = [x for x in r.output.splitlines() if said in x]
    assert line.startswith("not converted: ") and says in line and fix in line, r.output
    written = (out / "cycle.yaml").read_text()
    assert said in written and "no criterion could be made" in written
    assert yaml.safe_load(written)["criteria"] == []
    assert "0 criteria (prompt samples); add a criterion to its criteria, then run it" \
        in r.output.replace("\n", " ")
    cases = yaml.safe_load(next((out / "cases").glob("*.yaml")).read_text())
    assert [c["input"]["question"] for c in cases] == ["Who wrote Hamlet?",
                                                      "What is the largest ocean?"]


def test_the_refusal_of_a_missing_spec_names_the_folder_to_copy_it_to(tmp_path):
    root = registry(tmp_path, graded("fact"))
    r = imported(root, tmp_path / "p")
    assert str(root.resolve() / "modelgraded") in textwrap.dedent(r.output).replace("\n", "")
