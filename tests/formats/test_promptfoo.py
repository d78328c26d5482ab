"""`cycle import promptfoo` (issue 37): configs written from promptfoo's documented examples
become projects that run offline; every assertion, prompt or provider not converted is
listed."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cycle.cli import cli

TRANSLATION = """\
# promptfoo's getting-started example, as its configuration guide writes it
prompts:
  - 'Convert this English to {{language}}: {{input}}'
  - 'Translate to {{language}}: {{input}}'
providers:
  - openai:chat:gpt-4o-mini
  - vertex:gemini-2.0-flash-exp
defaultTest:
  assert:
    - type: llm-rubric
      value: does not describe itself as an AI, model, or chatbot
    - type: javascript
      value: output.length < 500
tests:
  - vars: {language: French, input: Hello world}
    assert:
      - type: contains-json
  - description: German greeting
    vars: {language: German, input: How's it going?}
    assert:
      - type: icontains
        value: wie
      - type: starts-with
        value: Wie
"""
FILES = """\
prompts: [file://prompt.txt]
providers: [echo]
defaultTest:
  vars: {customer: Ann}
  assert:
    - {type: not-icontains, value: guarantee}
    - {type: latency, threshold: 5000}
    - {type: cost, threshold: 0.01}
tests: file://tests.yaml
"""
TESTS = """\
- vars: {order: A-1042, question: "Where is my parcel?"}
  assert:
    - {type: icontains-any, value: [order, parcel]}
    - {type: regex, value: "\\\\w+"}
    - {type: starts-with, value: Hi}
    - {type: llm-rubric, value: Polite and helpful, threshold: 0.7, metric: tone}
    - {type: is-json}
- vars: {order: B-2210, question: "When do I get my refund?"}
"""


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def imported(folder: Path, out: Path, *flags: str):
    """``cycle import promptfoo`` of ``folder``'s promptfooconfig.yaml into ``out``."""
    return invoke("import", "promptfoo", str(folder / "promptfooconfig.yaml"), "--out", str(out),
                  *flags)


def test_the_getting_started_example_converts_with_its_gaps_listed(tmp_path):
    (tmp_path / "promptfooconfig.yaml").write_text(TRANSLATION)
    out = tmp_path / "project"
    r = imported(tmp_path, out)
    assert r.exit_code == 0, r.output
    assert "2 cases, 2 criteria (prompt" in r.output
    for gap in ("1 other prompt(s)", "1 other provider(s)", ("test 1: assertion "
                "'contains-json' is not converted")):
        assert gap in r.output, gap
    config = yaml.safe_load((out / "cycle.yaml").read_text())
    # output.length < 500, as JavaScript counts it (promptfoo_checks.py beside cycle.yaml)
    assert config["criteria"][1]["check"] == {"type": "python",
                                              "function": "promptfoo_checks:default_2"}
    assert "pf.js_length('<', 500.0" in (out / "promptfoo_checks.py").read_text()
    assert config["agent"] == "openai:gpt-4o-mini"  # openai:chat:gpt-4o-mini, cycle's name
    assert config["criteria"][0]["rubric"].startswith("does not describe itself")
    prompt = yaml.safe_load(next((out / "prompts").glob("*.yaml")).read_text())
    assert prompt["user_template"] == "Convert this English to {{language}}: {{input}}"
    cases = yaml.safe_load(next((out / "cases").glob("*.yaml")).read_text())
    assert cases[1]["name"] == "German greeting" and cases[1]["input"]["language"] == "German"
    assert cases[1]["criteria"][0]["check"] == {"type": "contains", "values": ["wie"],
                                                "case_sensitive": False}
    r = imported(tmp_path, out, "--prompt", "2")
    assert r.exit_code == 2 and "cycle does not overwrite a project" in r.output


def test_files_and_every_check_convert_and_the_project_runs_offline(tmp_path):
    (tmp_path / "promptfooconfig.yaml").write_text(FILES)
    (tmp_path / "prompt.txt").write_text("Customer: {{customer}}\nOrder: {{order}}\n"
                                         "Question: {{question}}\n")
    (tmp_path / "tests.yaml").write_text(TESTS)
    out = tmp_path / "project"
    r = imported(tmp_path, out, "--model", "offline:default", "--name", "support")
    assert r.exit_code == 0, r.output
    assert "provider 'echo': not one cycle has" in r.output
    config = yaml.safe_load((out / "cycle.yaml").read_text())
    assert config["agent"] == "offline:default"
    checks = [c["check"] for c in config["criteria"]]
    assert {"type": "max_latency", "seconds": 5.0} in checks
    assert {"type": "cost_within", "usd": 0.01} in checks
    cases = yaml.safe_load((out / "cases" / "support.yaml").read_text())
    assert cases[0]["input"] == {"customer": "Ann", "order": "A-1042",
                                 "question": "Where is my parcel?"}
    own = {c["id"]: c for c in cases[0]["criteria"]}
    assert own["tone"]["pass_mark"] == 70 and own["test_1_3"]["check"]["pattern"] == "^Hi"
    assert own["test_1_5"]["check"] == {"type": "json_schema", "schema": {}}
    (tmp_path / "tests.yaml").write_text("- vars: {a: [1,\n")
    r = imported(tmp_path, tmp_path / "other")
    assert r.exit_code == 2 and "tests.yaml:" in r.output and "not valid YAML" in r.output
    run = invoke("--store", str(tmp_path / "s.db"), "run", str(out / "cycle.yaml"), "-n", "1",
                 "--json", "--no-reports")
    assert run.exit_code in (0, 1), run.output
    summary = json.loads(run.output)["summary"]
    assert summary["errors"] == 0 and summary["score"] is not None


def test_a_prompt_that_is_not_text_is_refused_with_the_fix(tmp_path):
    (tmp_path / "promptfooconfig.yaml").write_text(textwrap.dedent("""\
        prompts:
          - file://chat.json
          - 'Answer: {{question}}'
        tests: [{vars: {question: hi}}]
    """))
    r = imported(tmp_path, tmp_path / "p")
    assert r.exit_code == 2, r.output
    assert "promptfooconfig.yaml:1 (prompts): prompt 1 ('file://chat.json') is not text" in r.output
    assert "--prompt N" in r.output
    r = imported(tmp_path, tmp_path / "p", "--prompt", "2")
    assert r.exit_code == 0, r.output


def test_one_case_and_two_criteria_are_counted_in_words(tmp_path):
    # found running interop.md's importers: "wrote DIR: 1 cases, 1 criteria"
    (tmp_path / "promptfooconfig.yaml").write_text(
        "prompts: ['Answer {{name}}']\nproviders: [openai:gpt-4o-mini]\n"
        "defaultTest: {assert: [{type: icontains, value: '{{name}}'}, "
        "{type: llm-rubric, value: Polite.}]}\ntests: [{vars: {name: Ann}}]\n")
    r = imported(tmp_path, tmp_path / "p")
    assert r.exit_code == 0 and ": 1 case, 2 criteria (prompt" in r.output, r.output


@pytest.mark.parametrize(("change", "field"), [
    ({"providers": 5}, "providers"),
    ({"defaultTest": [1]}, "defaultTest"),
    ({"defaultTest": {"assert": 5}}, "defaultTest.assert"),
    ({"defaultTest": {"vars": "x"}}, "defaultTest.vars"),
    ({"tests": 7}, "tests"),
    ({"tests": [{"vars": "language=French"}]}, "tests[0].vars"),
    ({"tests": [{"vars": {}, "assert": {"type": "equals"}}]}, "tests[0].assert"),
])
def test_a_section_of_the_wrong_shape_is_named(tmp_path, change, field):
    """A section of the wrong type (providers: 5, vars: a string, assert: a mapping) was an
    internal error ('int' object is not subscriptable, ... is not a mapping), exit 4."""
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(yaml.safe_dump({**yaml.safe_load(FILES.replace("file://tests.yaml", "[]")),
                                      **change}))
    (tmp_path / "prompt.txt").write_text("Hi {{customer}}")
    r = invoke("import", "promptfoo", str(config), "--out", str(tmp_path / "o"))
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {config} ({field}): expected "), r.output
    assert not (tmp_path / "o").exists()


# What promptfoo 0.121.20 itself made of this config (`promptfoo eval` with its echo
# provider, benchmarks/interop/check_promptfoo.sh): four tests, the file var read, the list
# var one test per value, the CSV's `__expected` cells an icontains and an equals.
AS_PROMPTFOO_READS_IT = """\
prompts: ['Q: {{question}} L: {{lang}} D: {{data}}']
providers: [echo]
tests:
  - vars:
      question: file://q2.txt
      lang: [fr, de]
      data: file://data.json
    assert:
      - type: icontains
        value: return
  - file://tests.csv
"""
CSV = """\
question,lang,__expected,__description
Hi there,fr,icontains: hi,greeting
Bye,de,Bye,
Hm,de,javascript: output.length < 9,
"""


def test_file_vars_list_vars_and_csv_tests_are_read_as_promptfoo_reads_them(tmp_path):
    (tmp_path / "promptfooconfig.yaml").write_text(AS_PROMPTFOO_READS_IT)
    (tmp_path / "q2.txt").write_text("What is your return policy?\n")
    (tmp_path / "data.json").write_text('{"a": 1}\n')
    (tmp_path / "tests.csv").write_text(CSV)
    out = tmp_path / "project"
    r = imported(tmp_path, out, "--model", "offline:default", "--name", "pf")
    assert r.exit_code == 0, r.output
    cases = yaml.safe_load((out / "cases" / "pf.yaml").read_text())
    assert [c["input"] for c in cases[:2]] == [
        {"question": "What is your return policy?", "lang": lang, "data": '{"a": 1}'}
        for lang in ("fr", "de")]
    assert cases[2]["input"] == {"question": "Hi there", "lang": "fr"}
    assert cases[2]["name"] == "greeting"
    assert cases[2]["criteria"][0]["check"] == {"type": "contains", "values": ["hi"],
                                                "case_sensitive": False}
    assert cases[3]["criteria"][0]["check"] == {"type": "exact", "value": "Bye"}
    assert cases[4]["criteria"][0]["check"] == {"type": "python",
                                                "function": "promptfoo_checks:test_4_1"}


def test_what_changes_the_checked_output_is_listed_not_dropped(tmp_path):
    (tmp_path / "promptfooconfig.yaml").write_text(textwrap.dedent("""\
        prompts: ['Say {{x}}']
        defaultTest:
          options: {transform: output.trim(), provider: openai:gpt-4o}
        scenarios:
          - config: [{vars: {x: a}}]
            tests: [{vars: {y: b}}]
        tests:
          - vars: {x: hi, picture: file://cat.png}
          - vars: {x: yo}
            options: {prefix: 'Answer: '}
            assert:
              - {type: contains, value: YO, transform: output.toUpperCase()}
              - {type: contains, value: yo}
              - {type: llm-rubric, value: polite, provider: openai:gpt-4o, rubricPrompt: Grade}
        """))
    out = tmp_path / "project"
    r = imported(tmp_path, out, "--model", "offline:default", "--name", "pf")
    assert r.exit_code == 0, r.output
    assert "defaultTest: options (transform, provider) not converted" in r.output
    assert "scenarios: not converted" in r.output
    assert "test 1: var picture is file://cat.png, not a text file" in r.output
    assert "test 2: options (prefix) not converted" in r.output
    assert "test 2: assertion 'contains' has a transform (output.toUpperCase())" in r.output
    assert "test 2: assertion 'llm-rubric': its provider not converted" in r.output
    assert "test 2: assertion 'llm-rubric': its rubricPrompt not converted" in r.output
    [case] = yaml.safe_load((out / "cases" / "pf.yaml").read_text())
    assert case["input"] == {"x": "yo"} and len(case["criteria"]) == 2


def test_prompts_are_numbered_as_promptfoo_lists_them(tmp_path):
    """promptfoo 0.121.20 splits a .txt prompt file at its `---` lines (processTxtFile) and
    takes a mapping of prompt to label: the file was one prompt holding the `---`, the
    mapping 'no prompts in the config'."""
    (tmp_path / "prompts.txt").write_text("First: {{q}}\n---\nSecond: {{q}}\n")
    for n, prompts in enumerate(("file://prompts.txt", "{file://prompts.txt: mine}",
                                 "[file://*.txt]")):
        (tmp_path / "promptfooconfig.yaml").write_text(
            f"prompts: {prompts}\ntests: [{{vars: {{q: hi}}}}]\n")
        out = tmp_path / f"p{n}"
        r = imported(tmp_path, out, "--model", "offline:default", "--name", "pf", "--prompt", "2")
        assert r.exit_code == 0, r.output
        assert "1 other prompt(s)" in r.output
        prompt = yaml.safe_load((out / "prompts" / "pf.yaml").read_text())
        assert prompt["user_template"] == "Second: {{q}}"


def test_assertions_promptfoo_reads_otherwise_than_as_text(tmp_path):
    """`equals` an object compares JSON (it was the Python repr "{'a': 1}"); a templated
    `starts-with` and a test's `threshold` are listed (they were dropped or escaped)."""
    (tmp_path / "promptfooconfig.yaml").write_text(textwrap.dedent("""\
        prompts: ['Say {{q}}']
        tests:
          - vars: {q: hi}
            threshold: 0.5
            assert:
              - {type: equals, value: {a: 1}}
              - {type: starts-with, value: '{{q}}'}
        """))
    out = tmp_path / "p"
    r = imported(tmp_path, out, "--model", "offline:default", "--name", "pf")
    assert r.exit_code == 0, r.output
    assert "test 1: threshold 0.5" in r.output
    assert "test 1: assertion 'starts-with' with a template ({{q}}) is not converted" in r.output
    [case] = yaml.safe_load((out / "cases" / "pf.yaml").read_text())
    assert [c["check"] for c in case["criteria"]] == [
        {"type": "json_schema", "schema": {"const": {"a": 1}}}]


def test_json_and_jsonl_test_files_are_read(tmp_path):
    """promptfoo 0.121.20 runs three tests from `tests: [file://t.jsonl, file://t.json]`; they
    were listed as not read."""
    (tmp_path / "t.jsonl").write_text('{"vars": {"q": "a"}, "assert": [{"type": "contains", '
                                      '"value": "a"}]}\n\n{"vars": {"q": "b"}}\n')
    (tmp_path / "t.json").write_text('[{"vars": {"q": "c"}}]')
    (tmp_path / "promptfooconfig.yaml").write_text(
        "prompts: ['Say {{q}}']\ntests: [file://t.jsonl, file://t.json]\n")
    out = tmp_path / "p"
    r = imported(tmp_path, out, "--model", "offline:default", "--name", "pf")
    assert r.exit_code == 0, r.output
    cases = yaml.safe_load((out / "cases" / "pf.yaml").read_text())
    assert [c["input"]["q"] for c in cases] == ["a", "b", "c"]
    (tmp_path / "t.jsonl").write_text('{"vars": {"q": "a"}}\n{oops\n')
    r = imported(tmp_path, tmp_path / "q", "--model", "offline:default")
    assert r.exit_code == 2 and "t.jsonl:2" in r.output and "not JSON" in r.output


def test_a_metric_several_assertions_share_makes_one_criterion_each(tmp_path):
    """promptfoo's `metric` names a score several assertions add to; as the criterion's id,
    two in defaultTest made a cycle.yaml that does not load ('criterion id used twice'),
    and a test's one of a suite's id would have replaced the suite's criterion."""
    (tmp_path / "promptfooconfig.yaml").write_text(textwrap.dedent("""\
        prompts: ['Say {{q}}']
        defaultTest:
          assert:
            - {type: icontains, value: say, metric: style}
            - {type: not-icontains, value: sorry, metric: style}
        tests:
          - vars: {q: hi}
            assert:
              - {type: contains, value: hi, metric: style}
              - {type: contains, value: Say, metric: style}
        """))
    out = tmp_path / "p"
    r = imported(tmp_path, out, "--model", "offline:default", "--name", "pf")
    assert r.exit_code == 0, r.output
    config = yaml.safe_load((out / "cycle.yaml").read_text())
    assert [c["id"] for c in config["criteria"]] == ["style", "style_2"]
    [case] = yaml.safe_load((out / "cases" / "pf.yaml").read_text())
    assert [c["id"] for c in case["criteria"]] == ["style_3", "style_4"]
    run = invoke("--store", str(tmp_path / "s.db"), "run", str(out / "cycle.yaml"), "-n", "1",
                 "--json", "--no-reports")
    assert run.exit_code in (0, 1), run.output
    assert json.loads(run.output)["summary"]["errors"] == 0


def test_a_config_of_per_test_assertions_and_nunjucks_filters_runs(tmp_path):
    """Assertions only in the tests (no defaultTest) made a cycle.yaml with no criterion,
    which does not load; Nunjucks' `dump` filter (promptfoo 0.121.20 renders
    `{{ data | dump }}` as `{"a":1}`) made a prompt that does not compile in Jinja."""
    (tmp_path / "promptfooconfig.yaml").write_text(textwrap.dedent("""\
        prompts: ['Data: {{ data | dump }} for {{ name | upper }}']
        tests:
          - vars: {data: {a: 1}, name: ann}
            assert: [{type: contains, value: '{{ name|dump }}'}]
        """))
    out = tmp_path / "p"
    r = imported(tmp_path, out, "--model", "offline:default", "--name", "pf")
    assert r.exit_code == 0, r.output
    assert "no defaultTest assertion: cycle.yaml's one criterion is 'answered'" in r.output
    prompt = yaml.safe_load((out / "prompts" / "pf.yaml").read_text())
    assert prompt["user_template"] == "Data: {{ data | tojson }} for {{ name | upper }}"
    [case] = yaml.safe_load((out / "cases" / "pf.yaml").read_text())
    assert case["criteria"][0]["check"]["values"] == ["{{ name| tojson }}"]
    run = invoke("--store", str(tmp_path / "s.db"), "run", str(out / "cycle.yaml"), "-n", "1",
                 "--json", "--no-reports")
    assert run.exit_code in (0, 1), run.output
    assert json.loads(run.output)["summary"]["errors"] == 0
