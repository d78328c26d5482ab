"""`cycle import promptfoo` of code assertions: python (inline and file://) becomes a cycle
python check with promptfoo's verdicts; javascript converts only where cycle checks the
same thing exactly; similar, and the javascript it cannot check, are listed as not
converted, naming the file, the test, the assertion and the fix."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from pydantic import TypeAdapter

from cycle.cli import cli
from cycle.formats.promptfoo_checks import verdict
from cycle.judge.criteria import CheckSpec
from cycle.testing.checks import check_context

CONFIG = """\
# a support bot's promptfoo config, as promptfoo's python-assert example writes them
prompts: ['Reply to {{name}}: {{message}}']
defaultTest:
  assert:
    - type: python
      value: len(output) < 200
    - type: javascript
      value: output.length < 120
tests:
  - description: greets by name
    vars: {name: Ann, message: Hello}
    assert:
      - type: python
        value: "output.lower().startswith('hi')"
      - type: python
        value: |
          words = output.split()
          if context['vars']['name'] in output:
              return {'pass': True, 'score': 1.0, 'reason': 'names them'}
          return {'pass': False, 'score': len(words) / 100, 'reason': 'no name'}
      - type: python
        value: file://checks/tone.py
        threshold: 0.5
      - type: python
        value: file://checks/tone.py:no_shouting
      - type: not-python
        value: "'refund' in output"
  - description: thanks politely
    vars: {name: Bo, message: Thanks}
    assert:
      - {type: javascript, value: "output.includes('welcome')"}
      - {type: javascript, value: "!output.includes(\\"sorry\\")"}
      - {type: javascript, value: "output.toLowerCase().includes('bo')"}
      - {type: javascript, value: "output.startsWith('You')"}
      - {type: javascript, value: "output.endsWith('!');"}
      - {type: javascript, value: "!output.startsWith('Sorry')"}
      - {type: not-javascript, value: "output.endsWith('?')"}
"""
TONE = """\
import string


def get_assert(output, context):
    # a score: promptfoo passes it at the assertion's threshold
    return sum(c in string.ascii_letters for c in output) / max(len(output), 1)


def no_shouting(output, context):
    return "true" if not output.isupper() else "false"
"""


def imported(folder: Path, out: Path, *flags: str):
    return CliRunner().invoke(cli, ["import", "promptfoo", str(folder / "promptfooconfig.yaml"),
                                    "--out", str(out), *flags])


def project(tmp_path: Path, config: str = CONFIG) -> tuple[Path, object]:
    (tmp_path / "promptfooconfig.yaml").write_text(config)
    (tmp_path / "checks").mkdir(exist_ok=True)
    (tmp_path / "checks" / "tone.py").write_text(TONE)
    out = tmp_path / "project"
    return out, imported(tmp_path, out, "--model", "offline:default", "--name", "bot")


def load_checks(out: Path):
    spec = importlib.util.spec_from_file_location(f"pf_{abs(hash(out))}", out / "promptfoo_checks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def criteria(out: Path) -> dict[str, dict]:
    config = yaml.safe_load((out / "cycle.yaml").read_text())
    cases = yaml.safe_load((out / "cases" / "bot.yaml").read_text())
    return {c["id"]: c for c in [*config["criteria"], *(c for k in cases
                                                          for c in k.get("criteria", []))]}


def test_python_assertions_become_python_checks_with_promptfoos_verdicts(tmp_path):
    out, r = project(tmp_path)
    assert r.exit_code == 0, r.output
    assert "cycle runs that code, with your permissions" in r.output
    crit = criteria(out)
    assert crit["default_1"]["check"] == {"type": "python", "function": "promptfoo_checks:default_1"}
    assert crit["test_1_3"]["check"]["function"] == "promptfoo_checks:test_1_3"
    checks = load_checks(out)
    hi_ann = check_context("Hi Ann, how can I help?", input={"name": "Ann", "message": "Hello"})
    shout = check_context("HELLO, REFUND DENIED", input={"name": "Ann", "message": "Hello"})
    assert checks.test_1_1(hi_ann)[0] == 100 and checks.test_1_1(shout)[0] == 0
    # the multi-line body: a GradingResult as it says, reading context['vars']
    assert checks.test_1_2(hi_ann) == (100.0, "passed: score 1.0: names them")
    assert checks.test_1_2(shout)[0] == 0
    # file://checks/tone.py: get_assert's score against the threshold 0.5
    assert checks.test_1_3(hi_ann)[0] == 100
    assert checks.test_1_3(check_context("1234 5678 !!"))[0] == 0
    # file://checks/tone.py:no_shouting returns the string "false": it fails
    assert checks.test_1_4(hi_ann)[0] == 100 and checks.test_1_4(shout)[0] == 0
    # not-python inverts
    assert checks.test_1_5(hi_ann)[0] == 100
    assert checks.test_1_5(check_context("Your refund is on its way"))[0] == 0
    assert checks.default_1(check_context("x" * 250))[0] == 0


@pytest.mark.parametrize(("result", "threshold", "passed"), [
    (True, None, True), (False, None, False), (0.3, None, True), (0, None, False),
    (0.3, 0.5, False), (0.5, 0.5, True), ("TRUE", None, True), ("0.7 points", 0.5, True),
    ('{"pass": true, "score": 0.2, "reason": "ok"}', None, True),
    ({"pass": True, "score": 0.2, "reason": "ok"}, 0.5, False),
    ({"pass": True, "score": 1}, None, False),  # no reason: not a GradingResult, it fails
    (None, None, False), ("maybe", None, False), ([1], None, False),
])
def test_results_are_read_as_promptfoo_reads_them(result, threshold, passed):
    assert verdict(result, threshold=threshold, inverse=False)[0] is passed
    assert verdict(result, threshold=threshold, inverse=True)[0] is (not passed)


def test_code_that_raises_fails_the_assertion_not_the_case(tmp_path):
    out, r = project(tmp_path, CONFIG.replace("len(output) < 200", "output.nope()"))
    assert r.exit_code == 0, r.output
    score, reason = load_checks(out).default_1(check_context("hi"))
    assert score == 0 and "Python code execution failed: AttributeError" in reason


def test_javascript_converts_exactly_where_cycle_checks_the_same(tmp_path):
    out, r = project(tmp_path)
    assert r.exit_code == 0, r.output
    crit = criteria(out)
    assert crit["test_2_1"]["check"] == {"type": "contains", "values": ["welcome"],
                                         "case_sensitive": True}
    assert crit["test_2_2"]["check"] == {"type": "not_contains", "values": ["sorry"],
                                         "case_sensitive": True}
    assert crit["test_2_4"]["check"] == {"type": "regex", "pattern": r"\AYou"}
    assert crit["test_2_5"]["check"] == {"type": "regex", "pattern": r"!\Z"}
    checks = load_checks(out)
    # JavaScript's length counts UTF-16 units: 60 emoji are 120, not below 120
    assert checks.default_2(check_context("😀" * 60))[0] == 0
    assert checks.default_2(check_context("😀" * 59))[0] == 100
    # toLowerCase, not a case fold: 'ß' stays 'ß' (a fold would make it 'ss')
    lower = checks.test_2_3
    assert lower(check_context("Welcome, BO!"))[0] == 100
    assert lower(check_context("Welcome!"))[0] == 0
    adapter = TypeAdapter(CheckSpec)
    assert adapter.validate_python(crit["test_2_5"]["check"]).evaluate(
        check_context("You are welcome!")).score == 100
    assert adapter.validate_python(crit["test_2_4"]["check"]).evaluate(
        check_context("Thank you")).score == 0
    assert crit["test_2_6"]["check"] == {"type": "regex", "pattern": r"\A(?!Sorry)"}
    assert crit["test_2_7"]["check"] == {"type": "regex", "pattern": r"(?<!\?)\Z"}
    for output, six, seven in (("Sorry, no", 0, 100), ("You asked?", 100, 0), ("", 100, 100)):
        assert adapter.validate_python(crit["test_2_6"]["check"]).evaluate(
            check_context(output)).score == six
        assert adapter.validate_python(crit["test_2_7"]["check"]).evaluate(
            check_context(output)).score == seven


def test_the_imported_suite_runs_its_code_checks_offline(tmp_path):
    out, r = project(tmp_path)
    assert r.exit_code == 0, r.output
    run = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                   str(out / "cycle.yaml"), "-n", "1", "--json", "--no-reports"])
    assert run.exit_code in (0, 1), run.output
    assert json.loads(run.output)["summary"]["errors"] == 0


@pytest.mark.parametrize(("assertion", "says"), [
    ("{type: python, value: file://checks/missing.py}", "cannot read"),
    ("{type: python, value: 'file://checks/tone.py:nope'}", "tone.py defines no function nope"),
])
def test_code_an_assertion_names_but_cycle_cannot_read_is_refused(tmp_path, assertion, says):
    config = CONFIG.replace("      - {type: javascript, value: \"output.includes('welcome')\"}",
                            "      - " + assertion)
    out, r = project(tmp_path, config)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and not (out / "cycle.yaml").exists()
    assert "promptfooconfig.yaml" in r.output and says in r.output
    assert "test 2 ('thanks politely'), assertion 1" in r.output
    assert "Then import again" in r.output


@pytest.mark.parametrize(("assertion", "says"), [
    ("{type: similar, value: 'Hello Ann', threshold: 0.8}",
     "cycle has no embedding similarity check"),
    ("{type: javascript, value: \"output.split(' ').length > 3\"}", "cycle runs no JavaScript"),
    ("{type: javascript, value: file://checks/len.js}", "a JavaScript file"),
])
def test_what_cannot_be_checked_as_promptfoo_does_is_listed_not_converted(tmp_path, assertion,
                                                                            says):
    """As a transform is: the rest of the config imported, and the assertion named (file,
    test, number) with the fix, on the console and at cycle.yaml's top; never approximated."""
    config = CONFIG.replace("      - {type: javascript, value: \"output.includes('welcome')\"}",
                            "      - " + assertion)
    out, r = project(tmp_path, config)
    assert r.exit_code == 0, r.output
    listed = [line for line in r.output.splitlines() if line.startswith("not converted: ")]
    assert any("promptfooconfig.yaml: test 2 ('thanks politely'), assertion 1" in line
               and says in line for line in listed), r.output
    head = (out / "cycle.yaml").read_text().split("\nprompt:")[0]
    assert says in head and "test 2 ('thanks politely'), assertion 1" in head


def test_an_assertion_left_out_of_a_tests_file_names_that_file(tmp_path):
    (tmp_path / "tests.yaml").write_text(textwrap.dedent("""\
        - description: shortness
          vars: {name: Cy, message: Hi}
          assert: [{type: javascript, value: 'output.trim() === "Hi"'}]
        """))
    _, r = project(tmp_path, "prompts: ['Reply to {{name}}: {{message}}']\n"
                     "tests: file://tests.yaml\n")
    assert r.exit_code == 0, r.output
    assert "not converted: tests.yaml: test 1 ('shortness'), assertion 1" in r.output
    assert "Rewrite it as a python assertion" in r.output


ASYNC_CONFIG = """\
prompts: ['Reply to {{name}}']
tests:
  - vars: {name: Ann}
    assert:
      - {type: python, value: file://checks/slow.py}
      - {type: python, value: "file://checks/slow.py:raising"}
      - {type: python, value: "file://checks/slow.py:unawaited"}
"""
SLOW = """\
import asyncio


async def get_assert(output, context):
    await asyncio.sleep(0)
    named = context["vars"]["name"] in output
    return {"pass": named, "score": 1.0 if named else 0.0, "reason": "awaited"}


async def raising(output, context):
    await asyncio.sleep(0)
    raise ValueError("upstream grader down")


async def _graded(output):
    return True


def unawaited(output, context):
    return _graded(output)
"""


def test_an_async_python_assertion_is_awaited_as_promptfoo_awaits_it(tmp_path, monkeypatch):
    """promptfoo awaits an ``async def get_assert``; cycle called it and read the coroutine
    it returned as a result of no known kind: the assertion failed, and Python warned
    "coroutine ... was never awaited". A plain function returning a coroutine still fails
    (promptfoo does not await it either), without that warning."""
    import asyncio
    import gc
    import sys
    import warnings

    # another test's project, run in this process, left its promptfoo_checks imported
    monkeypatch.delitem(sys.modules, "promptfoo_checks", raising=False)

    (tmp_path / "promptfooconfig.yaml").write_text(ASYNC_CONFIG)
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "slow.py").write_text(SLOW)
    out = tmp_path / "project"
    r = imported(tmp_path, out, "--model", "offline:default", "--name", "bot")
    assert r.exit_code == 0, r.output
    checks = load_checks(out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ann = check_context("Hi Ann", input={"name": "Ann"})
        assert asyncio.run(checks.test_1_1(ann)) == (100.0, "passed: score 1.0: awaited")
        assert asyncio.run(checks.test_1_1(check_context("Hi", input={"name": "Ann"})))[0] == 0
        assert asyncio.run(checks.test_1_2(ann)) == (
            0.0, "failed: Python code execution failed: ValueError: upstream grader down")
        score, reason = checks.test_1_3(ann)
        assert score == 0 and "returned a coroutine" in reason
        run = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                       str(out / "cycle.yaml"), "-n", "1", "--json"])
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], \
        [str(w.message) for w in caught]
    assert run.exit_code in (0, 1), run.output
    assert json.loads(run.output)["summary"]["errors"] == 0
    report = json.loads(Path(json.loads(run.output)["reports"]["json"]).read_text())
    said = {v["criterion"]: v["reasoning"] for v in report["cases"][0]["results"][0]["verdicts"]}
    assert said["test_1_1"].endswith(": awaited"), said  # the offline answer names no one
    assert said["test_1_2"].endswith("ValueError: upstream grader down"), said
    assert "returned a coroutine" in said["test_1_3"], said


SAYS = """\
prompts: ['Reply to {{name}}']
defaultTest:
  assert:
    - {type: python, value: '%s'}
tests:
  - vars: {name: Ann}
    assert:
      - {type: python, value: '%s'}
"""


def test_two_imported_projects_in_one_process_each_run_their_own_checks(tmp_path):
    """Each imported project's code assertions are a ``promptfoo_checks.py`` beside its
    cycle.yaml, which was imported by that name through ``sys.path``: the second project
    run in one process (a pytest session running both, a Python API user) ran the first
    one's checks and gave their verdicts. Now each project runs its own."""
    summaries = {}
    for says in ("True", "False", "True"):  # and the first again, after the second
        folder = tmp_path / f"{says}-{len(summaries)}"
        folder.mkdir()
        out, r = project(folder, SAYS % (says, says))
        assert r.exit_code == 0, r.output
        run = CliRunner().invoke(cli, ["--store", str(folder / "s.db"), "run",
                                       str(out / "cycle.yaml"), "-n", "1", "--json",
                                       "--no-reports"])
        assert run.exit_code in (0, 1), run.output
        summaries[folder.name] = json.loads(run.output)["summary"]
    assert [(s["passed"], s["failed"]) for s in summaries.values()] == [(1, 0), (0, 1), (1, 0)]
