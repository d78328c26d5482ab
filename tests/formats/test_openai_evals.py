"""`cycle import openai-evals` (issue 37): OpenAI Evals items and graders, written from the
documented examples (the hosted Evals' data source items and testing_criteria; the
openai/evals registry's chat items), become a project that runs offline, with every
grader it cannot convert listed."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml
from click.testing import CliRunner

from cycle.cli import cli

HOSTED_ITEMS = [
    {"item": {"id": "capital-fr", "input": "What is the capital of France?", "ideal": "Paris"}},
    {"item": {"id": "capital-jp", "input": "What is the capital of Japan?", "ideal": "Tokyo"}},
    {"item": {"input": [{"role": "developer", "content": "Answer in one word."},
                        {"role": "user", "content": "Largest planet?"}], "ideal": "Jupiter"}},
]
GRADERS = {"testing_criteria": [
    {"type": "string_check", "name": "Exact answer", "input": "{{sample.output_text}}",
     "reference": "{{item.ideal}}", "operation": "eq"},
    {"type": "string_check", "name": "mentions", "input": "{{sample.output_text}}",
     "reference": "{{item.ideal}}", "operation": "ilike"},
    {"type": "score_model", "name": "correct", "model": "gpt-4o-mini", "range": [0, 1],
     "pass_threshold": 0.7, "input": [
         {"role": "system", "content": "Score 1 if the answer matches {{item.ideal}}, else 0."},
         {"role": "user", "content": "Answer: {{sample.output_text}}"}]},
    {"type": "label_model", "name": "tone", "model": "gpt-4o-mini",
     "labels": ["polite", "rude"], "passing_labels": ["polite"],
     "input": [{"role": "user", "content": "Is {{sample.output_text}} polite?"}]},
    {"type": "text_similarity", "name": "close", "input": "{{sample.output_text}}",
     "reference": "{{item.ideal}}", "evaluation_metric": "fuzzy_match", "pass_threshold": 0.8},
    {"type": "string_check", "name": "differs", "input": "{{sample.output_text}}",
     "reference": "x", "operation": "ne"},
]}
REGISTRY_ITEMS = [  # openai/evals' Match eval: a system prompt, one user turn, ideal answers
    {"input": [{"role": "system", "content": "You are a helpful assistant."},
               {"role": "user", "content": "Spell 'cat' backwards."}], "ideal": ["tac", "TAC"]},
    {"input": [{"role": "system", "content": "You are a helpful assistant."},
               {"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "hi"},
               {"role": "user", "content": "Again."}], "ideal": "hi"},
]


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_hosted_items_and_graders_become_a_project_that_runs(tmp_path):
    items = write(tmp_path / "capitals.jsonl", HOSTED_ITEMS)
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps(GRADERS))
    out = tmp_path / "project"
    r = CliRunner().invoke(cli, ["import", "openai-evals", str(items), "--graders", str(graders),
                                 "--out", str(out), "--model", "offline:default"])
    assert r.exit_code == 0, r.output
    assert "wrote" in r.output and "3 cases, 4 criteria" in r.output
    assert "grader close: type 'text_similarity' is not converted" in r.output
    assert "grader differs: string_check operation 'ne'" in r.output
    config = yaml.safe_load((out / "cycle.yaml").read_text())
    by_id = {c["id"]: c for c in config["criteria"]}
    assert by_id["Exact_answer"]["check"] == {"type": "exact", "value": "{{ ideal }}"}
    assert by_id["mentions"]["check"]["case_sensitive"] is False
    assert by_id["correct"]["pass_mark"] == 70 and "the case's ideal" in by_id["correct"]["rubric"]
    assert "passes when the label is one of: polite" in by_id["tone"]["rubric"]
    prompt = yaml.safe_load((out / "prompts" / "capitals.yaml").read_text())
    assert prompt["system"] == "{{ system }}"  # it varies: one item has a developer message
    cases = yaml.safe_load((out / "cases" / "capitals.yaml").read_text())
    assert [c["id"] for c in cases] == ["capital-fr", "capital-jp", "item-0003"]
    assert cases[0]["expected"] == "Paris" and cases[0]["input"]["question"].startswith("What")
    run = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                   str(out / "cycle.yaml"), "-n", "1", "--json", "--no-reports"])
    assert run.exit_code in (0, 1), run.output
    summary = json.loads(run.output)["summary"]
    assert summary["errors"] == 0 and summary["score"] is not None  # every case judged


def test_registry_items_without_graders_are_judged_by_match(tmp_path):
    items = write(tmp_path / "reverse.jsonl", REGISTRY_ITEMS)
    out = tmp_path / "project"
    r = CliRunner().invoke(cli, ["import", "openai-evals", str(items), "--out", str(out),
                                 "--model", "offline:default"])
    assert r.exit_code == 0, r.output
    assert "1 items have earlier turns" in r.output
    config = yaml.safe_load((out / "cycle.yaml").read_text())
    assert config["criteria"][0]["id"] == "match"
    assert yaml.safe_load((out / "prompts" / "reverse.yaml").read_text())["system"] == (
        "You are a helpful assistant.")
    assert "# not converted:" in (out / "cycle.yaml").read_text()
    r = CliRunner().invoke(cli, ["import", "openai-evals", str(items), "--out", str(out)])
    assert r.exit_code == 2 and "cycle does not overwrite a project" in r.output


def test_a_bad_items_line_is_named(tmp_path):
    items = tmp_path / "bad.jsonl"
    items.write_text(json.dumps({"input": "ok", "ideal": "x"}) + "\n{not json\n")
    r = CliRunner().invoke(cli, ["import", "openai-evals", str(items), "--out", str(tmp_path / "p")])
    assert r.exit_code == 2 and "bad.jsonl:2" in r.output and "not JSON" in r.output
    items.write_text(json.dumps({"ideal": "x"}) + "\n")
    r = CliRunner().invoke(cli, ["import", "openai-evals", str(items), "--out", str(tmp_path / "p")])
    assert r.exit_code == 2 and "bad.jsonl:1 (input): the item has no input" in r.output


@pytest.mark.parametrize(("grader", "field", "says"), [
    ({"range": 5}, "testing_criteria[0].range", "two numbers, the lowest score first"),
    ({"range": [1, "x"]}, "testing_criteria[0].range", "two numbers"),
    ({"pass_threshold": "high"}, "testing_criteria[0].pass_threshold", "expected a number"),
    ({"input": 5}, "testing_criteria[0].input", "a list of messages"),
    ({"type": "label_model", "labels": "polite"}, "testing_criteria[0].labels", "a list of labels"),
])
def test_a_model_grader_of_the_wrong_shape_is_named(tmp_path, grader, field, says):
    """A score_model's range or pass_threshold, or a model grader's messages or labels, of
    the wrong type was an internal error ('int' object is not subscriptable), exit 4."""
    items = write(tmp_path / "i.jsonl", HOSTED_ITEMS)
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps({"testing_criteria": [{**GRADERS["testing_criteria"][2],
                                                         **grader}]}))
    r = CliRunner().invoke(cli, ["import", "openai-evals", str(items), "--graders", str(graders),
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {graders} ({field}): expected") and says in r.output
    assert not (tmp_path / "o").exists()


def test_an_items_line_nested_too_deep_is_named(tmp_path):
    """A line nested 100,000 deep was an internal error: RecursionError, exit 4."""
    items = tmp_path / "deep.jsonl"
    items.write_text(json.dumps(HOSTED_ITEMS[0]) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    r = CliRunner().invoke(cli, ["import", "openai-evals", str(items), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {items}:2: the JSON is nested deeper than cycle reads")


# openai/evals 3.0.1 (evals/api.py record_and_check_match, elsuite/basic/includes.py):
# Match passes when the sampled answer *starts with* any ideal answer, Includes when it
# contains any (rfind, lowered under ignore_case). These registry files are the shape of
# the package's registry/evals/*.yaml.
def registry_eval(name: str, cls: str, samples: str, *, version: str = "dev.v0",
                  **args: object) -> str:
    """An eval as openai/evals' registry/evals/*.yaml writes one: its name, pointing at
    ``name.version``, which names the class and its args."""
    return yaml.safe_dump({name: {"id": f"{name}.{version}", "metrics": ["accuracy"]},
                           f"{name}.{version}": {"class": cls, "args": {
                               "samples_jsonl": samples, **args}}}, sort_keys=False)


MATCH_YAML = registry_eval("reverse", "evals.elsuite.basic.match:Match", "reverse/samples.jsonl")
INCLUDES_YAML = registry_eval("korean", "evals.elsuite.basic.includes:Includes",
                              "korean/samples.jsonl", ignore_case=True)
JSON_MATCH_YAML = MATCH_YAML.replace("basic.match:Match", "basic.json_match:JsonMatch")
SAMPLES = [
    {"input": [{"role": "system", "content": "Answer."},
               {"role": "user", "content": "Spell 'cat' backwards."}], "ideal": ["tac", "T.A.C"]},
    {"input": [{"role": "system", "content": "Answer."},
               {"role": "user", "content": "Capital of France?"}], "ideal": "Paris"},
]


def judged(tmp_path, spec: str | None, answers: dict[str, str]) -> dict[str, float]:
    """The samples imported (with the registry YAML ``spec``), each case's check applied to
    the answer given for its question: {case id: score}."""
    from cycle.cases import load_cases
    from cycle.judge.criteria import CriterionConfig, merge

    tmp_path.mkdir(exist_ok=True)
    items = write(tmp_path / "s.jsonl", SAMPLES)
    args = ["import", "openai-evals", str(items), "--out", str(tmp_path / "p"),
            "--model", "offline:default"]
    if spec is not None:
        (tmp_path / "e.yaml").write_text(spec)
        args += ["--graders", str(tmp_path / "e.yaml")]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    config = yaml.safe_load((tmp_path / "p" / "cycle.yaml").read_text())
    suite = [CriterionConfig.model_validate(c) for c in config["criteria"]]
    scores = {}
    for case in load_cases([str(tmp_path / "p" / "cases" / "s.yaml")], criteria=suite):
        [criterion] = merge(suite, case.criteria)
        scores[case.id] = score_of(criterion, case, answers[case.input["question"]])
    return scores


def score_of(criterion, case, output: str) -> float:
    """The criterion's check on ``output``, with what a check reads of the case."""

    from types import SimpleNamespace

    ctx = SimpleNamespace(case_id=case.id, expected=case.expected, structured=None,
                          output=output, variables={**case.input, "expected": case.expected})
    return criterion.check.evaluate(ctx).score


def test_a_registry_match_eval_passes_an_answer_that_starts_with_any_ideal(tmp_path):
    answers = {"Spell 'cat' backwards.": "T.A.C is cat backwards",
               "Capital of France?": "Paris."}
    for spec in (None, MATCH_YAML):  # no graders: Match, openai/evals' default
        assert set(judged(tmp_path / str(spec is None), spec, answers).values()) == {100.0}
    wrong = {"Spell 'cat' backwards.": "It is tac", "Capital of France?": "paris"}
    assert set(judged(tmp_path / "wrong", MATCH_YAML, wrong).values()) == {0.0}


def test_a_registry_includes_eval_passes_an_answer_that_contains_any_ideal(tmp_path):
    answers = {"Spell 'cat' backwards.": "It is t.a.c, I think",
               "Capital of France?": "The capital is PARIS."}
    assert set(judged(tmp_path, INCLUDES_YAML, answers).values()) == {100.0}


def test_a_registry_eval_of_another_class_is_listed(tmp_path):
    items = write(tmp_path / "s.jsonl", SAMPLES)
    (tmp_path / "e.yaml").write_text(JSON_MATCH_YAML)
    r = CliRunner().invoke(cli, ["import", "openai-evals", str(items), "--graders",
                                 str(tmp_path / "e.yaml"), "--out", str(tmp_path / "p"),
                                 "--model", "offline:default"])
    assert r.exit_code == 0, r.output
    assert ("eval reverse.dev.v0: class evals.elsuite.basic.json_match:JsonMatch is not "
            "converted (cycle has no JsonMatch check)") in r.output


def test_few_shot_examples_named_in_system_messages_keep_their_speaker(tmp_path):
    """openai/evals' registry gives few-shot examples as system messages named example_user
    and example_assistant (a line of registry/data/convert-hex-hsl-lightness, shortened):
    they were joined into the system as bare lines, the speakers lost, and not listed."""
    line = {"input": [
        {"role": "system", "content": "You are a concise color conversion bot."},
        {"role": "system", "content": "Lightness of #721cb6?", "name": "example_user"},
        {"role": "system", "content": "41%.", "name": "example_assistant"},
        {"role": "user", "content": "Lightness of #ffffff?"}], "ideal": "100%"}
    items = write(tmp_path / "hsl.jsonl", [line])
    out = tmp_path / "p"
    r = CliRunner().invoke(cli, ["import", "openai-evals", str(items), "--out", str(out),
                                 "--model", "offline:default"])
    assert r.exit_code == 0, r.output
    assert "1 items give few-shot examples as system messages named example_user" in r.output
    system = yaml.safe_load((out / "prompts" / "hsl.yaml").read_text())["system"]
    assert system == ("You are a concise color conversion bot.\n\nUser: Lightness of #721cb6?"
                      "\n\nAssistant: 41%.")


def test_a_system_only_input_is_asked_and_the_eval_of_the_items_file_is_chosen(tmp_path):
    """Registry evals whose input is one system message (logic, sql, qa: 30 of the Match and
    Includes evals of openai/evals 3.0.1) were refused ('no user message'), which evals
    runs as they are; a registry YAML defining several evals gave its first, whatever the
    items file."""
    (tmp_path / "logic").mkdir()
    items = write(tmp_path / "logic" / "samples.jsonl", [
        {"input": [{"role": "system", "content": "Solve: Anna is taller than Bob. Who is "
                    "shorter? Answer with the name."}], "ideal": "Bob"}])
    (tmp_path / "logic.yaml").write_text(textwrap.dedent("""\
        logic-fact:
          id: logic-fact.dev.v0
        logic-fact.dev.v0:
          class: evals.elsuite.modelgraded.classify:ModelBasedClassify
          args: {samples_jsonl: other/samples.jsonl, modelgraded_spec: fact}
        logic-includes:
          id: logic-includes.dev.v0
        logic-includes.dev.v0:
          class: evals.elsuite.basic.includes:Includes
          args: {samples_jsonl: logic/samples.jsonl}
        """))
    out = tmp_path / "p"
    r = CliRunner().invoke(cli, ["import", "openai-evals", str(items), "--graders",
                                 str(tmp_path / "logic.yaml"), "--out", str(out),
                                 "--model", "offline:default"])
    assert r.exit_code == 0, r.output
    assert "1 items have no user message: their last system message is asked" in r.output
    [case] = yaml.safe_load((out / "cases" / "samples.yaml").read_text())
    assert case["input"]["question"].startswith("Solve: Anna")
    assert yaml.safe_load((out / "prompts" / "samples.yaml").read_text())["system"] == ""
    assert case["criteria"][0]["check"]["type"] == "contains_any"  # Includes, its own eval


def test_graders_of_one_name_make_two_criteria(tmp_path):
    """Two graders named alike made a cycle.yaml that did not load (an id used twice)."""
    items = write(tmp_path / "i.jsonl", HOSTED_ITEMS[:1])
    graders = tmp_path / "g.json"
    check = {"type": "string_check", "name": "answer", "input": "{{sample.output_text}}",
             "reference": "{{item.ideal}}"}
    graders.write_text(json.dumps([{**check, "operation": "eq"}, {**check, "operation": "ilike"}]))
    out = tmp_path / "p"
    r = CliRunner().invoke(cli, ["import", "openai-evals", str(items), "--graders", str(graders),
                                 "--out", str(out), "--model", "offline:default"])
    assert r.exit_code == 0, r.output
    config = yaml.safe_load((out / "cycle.yaml").read_text())
    assert [c["id"] for c in config["criteria"]] == ["answer", "answer_2"]
    run = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", str(out / "cycle.yaml"),
                                   "-n", "1", "--json", "--no-reports"])
    assert run.exit_code in (0, 1), run.output
