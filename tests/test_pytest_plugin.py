"""The pytest plugin, driven by pytester: `pytest --cycle cycle.yaml` makes each case a test,
runs the suite once, reports failures with their criteria and errors as pytest errors, works
with -k, -x and JUnit XML, gates the session, and collects tool-forge eval files too."""

from __future__ import annotations

import json
import textwrap

import pytest

from cycle.testing.endpoint import AgentEndpoint

PROMPT = """
id: support
system: You are a support agent.
user_template: "{{ question }}"
params: {model: "offline:default"}
"""
CASES = """
- id: greets
  input: {question: Hello there}
- id: refund
  input: {question: Where is my refund?}
  criteria:
    - id: names_policy
      check: {type: contains, values: [30-day policy]}
      required: true
- id: broken
  input: {question: Anything}
  criteria:
    - id: custom
      check: {type: python, function: "checks:explode"}
"""


def run(pytester, *args):
    """A pytest of its own, as a user would start it (the plugin loads by entry point)."""
    return pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")


@pytest.fixture
def project(pytester):
    pytester.makefile(".yaml", **{"prompts/support": PROMPT, "cases/all": CASES})
    pytester.makepyfile(checks="def explode(ctx):\n    raise RuntimeError('the check crashed')\n")
    pytester.makefile(".yaml", cycle=textwrap.dedent("""
        prompt: prompts/support.yaml
        criteria:
          - id: answers
            check: {type: regex, pattern: "."}
        run: {iterations: 2}
    """))
    pytester.syspathinsert()
    return pytester


def test_each_case_is_a_test_passed_failed_or_errored(project):
    result = run(project, "--cycle", "cycle.yaml")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    out = result.stdout.str()
    # the failure names the criterion that failed and its reasoning
    assert "names_policy (required): 0 - missing: '30-day policy'" in out
    # an infrastructure error is a pytest error, with the cause
    assert "ERROR cycle.yaml::broken" in out and "the check crashed" in out
    assert "[offline model]" in out and "1 passed, 1 failed, 1 errored" in out


def test_k_runs_only_the_selected_cases_and_x_stops(project):
    result = run(project, "--cycle", "cycle.yaml", "-k", "greets")
    result.assert_outcomes(passed=1, deselected=2)
    # the suite ran for the selected case only
    assert "1 passed, 0 failed, 0 errored" in result.stdout.str()
    stopped = run(project, "--cycle", "cycle.yaml", "-x", "-k", "not broken")
    assert stopped.ret == 1
    outcomes = stopped.parseoutcomes()
    assert outcomes.get("failed") == 1 and outcomes.get("passed", 0) <= 1


def test_junit_xml_has_a_testcase_per_case(project):
    result = run(project, "--cycle", "cycle.yaml", "--junitxml=out.xml")
    assert result.ret == 1
    xml = (project.path / "out.xml").read_text()
    assert xml.count("<testcase") == 3
    assert xml.count("<failure") == 1 and xml.count("<error") == 1
    assert 'name="refund"' in xml


def test_score_and_pass_rate_gates_fail_a_session_whose_tests_passed(project):
    project.makefile(".yaml", cycle=textwrap.dedent("""
        prompt: prompts/support.yaml
        pass_threshold: 40
        criteria:
          - id: half
            check: {type: contains, values: [support, "zzz-never"]}
            pass_mark: 50
        cases: [cases/ok.yaml]
        run: {iterations: 1}
    """))
    project.makefile(".yaml", **{"cases/ok": "- id: a\n  input: {question: Hi}\n"})
    ok = run(project, "--cycle", "cycle.yaml")
    ok.assert_outcomes(passed=1)
    assert ok.ret == 0
    gated = run(project, "--cycle", "cycle.yaml", "--cycle-min-score", "90",
                              "--cycle-min-pass-rate", "100")
    gated.assert_outcomes(passed=1)
    assert gated.ret == 1
    assert "cycle gate FAILED: suite score 50.0 is below --cycle-min-score 90" in gated.stdout.str()


def test_a_bad_config_is_a_collection_error_naming_the_file(project):
    project.makefile(".yaml", cycle="prompt: prompts/support.yaml\ncriteria: [{id: x, chek: 1}]\n")
    result = run(project, "--cycle", "cycle.yaml")
    assert result.ret == 2
    assert "cycle.yaml:2" in result.stdout.str() and "unknown key 'chek'" in result.stdout.str()


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--cycle-iterations", "0", "--cycle-iterations: 0 is not a whole number >= 1"),
    ("--cycle-min-score", "nan", "--cycle-min-score: nan is not a number from 0 to 100"),
    ("--cycle-min-pass-rate", "150", "--cycle-min-pass-rate: 150.0 is not a number from 0"),
])
def test_a_flag_out_of_range_is_a_usage_error_before_any_test(project, flag, value, says):
    """--cycle-iterations 0 made every test an error (ValueError: iterations must be >= 1),
    and --cycle-min-score nan a gate that could never fail."""
    result = run(project, "--cycle", "cycle.yaml", flag, value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str()


def test_tool_forge_eval_files_collect_the_same_way(pytester):
    def agent(body):
        return {"response": f"You said: {body['message']}", "toolCalls": []}

    evals = {"cases": [
        {"id": "echo", "input": {"message": "hi"}, "expect": {"responseContains": ["hi"]}},
        {"id": "tool", "input": {"message": "weather"},
         "expect": {"toolsCalled": ["get_weather"]}}]}
    (pytester.path / "weather.golden.json").write_text(json.dumps(evals))
    with AgentEndpoint(agent) as endpoint:
        result = run(pytester, "--cycle", "weather.golden.json", "--cycle-agent-endpoint",
                                    endpoint.url)
    result.assert_outcomes(passed=1, failed=1)
    assert "toolsCalled: expected [get_weather] but got []" in result.stdout.str()
    assert list((pytester.path / "evals" / "results").glob("*.json"))


def test_without_cycle_the_plugin_does_nothing(pytester):
    pytester.makepyfile(test_x="def test_x():\n    assert True\n")
    result = run(pytester)
    result.assert_outcomes(passed=1)


def test_suites_named_in_the_ini_file_collect_without_flags(project):
    project.makeini("[pytest]\ncycle = cycle.yaml\n")
    result = run(project, "-k", "greets or refund")
    result.assert_outcomes(passed=1, failed=1, deselected=1)


def test_the_cycle_suite_fixture_and_marker_run_a_suite_once_and_hand_over_its_result(project):
    project.makepyfile(test_gate=textwrap.dedent("""
        import pytest

        @pytest.mark.cycle_suite("cycle.yaml", iterations=1)
        def test_marked(cycle_suite):
            run = cycle_suite()
            assert run.suite.cases == 3 and run.suite.iterations == 3
            assert run.cases["greets"].status == "passed"
            assert run.cases["refund"].status == "failed"
            assert run.cases["broken"].status == "error"

        def test_by_path_is_the_same_run(cycle_suite):
            first = cycle_suite("cycle.yaml", iterations=1)
            assert cycle_suite("cycle.yaml", iterations=1) is first  # once per session
            assert first.suite.iterations == 3

        def test_a_gate_that_fails(cycle_suite):
            assert cycle_suite("cycle.yaml").suite.pass_rate >= 0.9

        def test_a_bad_path_fails_with_the_message(cycle_suite):
            cycle_suite("nope.yaml")

        def test_no_path_and_no_marker(cycle_suite):
            cycle_suite()
    """))
    result = run(project, "test_gate.py", "-v")
    result.assert_outcomes(passed=2, failed=3)
    out = result.stdout.str()
    assert "nope.yaml: file not found" in out
    # an assertion on a run shows it in a line, not every result's trace
    assert "= RunResult('run-" in out and "1 passed, 1 failed, 1 errored)" in out
    assert "cycle_suite() needs a path" in out
    assert "Traceback" not in out.split("short test summary")[0].split("test_a_bad_path")[-1]
    # two suites were run (iterations 1 and the config's 2), each stored like any `cycle run`
    import sqlite3

    with sqlite3.connect(project.path / ".cycle" / "cycle.db") as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 2


def test_a_providers_error_and_a_judges_reasoning_reach_the_terminal_as_visible_escapes(
        pytester, monkeypatch):
    """pytest prints a test's failure as it is given: a provider's error (or a judge's
    reasoning) holding an OSC 52 clipboard write, a title or ESC[2J acted on the terminal."""
    from cycle.testing import Fault, LoopbackServer, Reply

    evil = "\x1b]52;c;ZXZpbA==\x07\x1b]0;owned\x07\x1b[2J\rFAKE"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    with LoopbackServer() as srv:
        pytester.makefile(".yaml", **{
            "prompts/support": PROMPT.replace("offline:default", "openai:gpt-4o-mini"),
            "cases/all": "- id: a\n  input: {question: q}\n- id: b\n  input: {question: q}\n"})
        pytester.makefile(".yaml", cycle=textwrap.dedent(f"""
            prompt: prompts/support.yaml
            criteria:
              - id: short
                check: {{type: regex, pattern: "^.{{0,5}}$"}}
            run: {{iterations: 1, concurrency: 1}}
            providers: {{openai: {{base_url: '{srv.openai_base_url}'}}}}
        """))
        srv.enqueue(Fault.status(400, message=f"bad request {evil}"))
        srv.responder = lambda request: Reply(text=f"a long answer {evil}")
        result = run(pytester, "--cycle", "cycle.yaml")
    result.assert_outcomes(failed=1, errors=1)
    out = result.stdout.str()
    assert "bad request \\x1b]52;c;ZXZpbA==\\x07" in out
    assert "\x1b]" not in out and "\x07" not in out and "\r" not in out
