"""Reports and run comparison, from results built by hand."""

import json
import xml.etree.ElementTree as ET

import pytest

from cycle.evals.results import build_run_result
from cycle.records import IterationResult, RoleUsage, Verdict
from cycle.report import render_console, render_json, render_junit, render_markdown, write_reports
from cycle.report.compare import compare_dict, compare_runs, render_compare


def it(case, i, score, *, error=None, required_ok=True):
    if error:
        return IterationResult(case_id=case, iteration=i, status="error", score=None, passed=None,
                               error=error, input={"q": case})
    passed = score >= 70 and required_ok
    v = (Verdict(criterion_id="order", kind="check", score=100.0 if required_ok else 0.0,
                 passed=required_ok, weight=1, required=True,
                 reasoning="found" if required_ok else "missing: 'A-1'"),
         Verdict(criterion_id="tone", kind="llm", score=score, passed=score >= 70, weight=1,
                 required=False, reasoning=f"tone reasoning {case}"))
    return IterationResult(case_id=case, iteration=i, status="passed" if passed else "failed",
                           score=score, passed=passed, input={"q": case}, output=f"out {case} {i}",
                           latency=0.1 * (i + 1), verdicts=v)


def run(run_id, scores, *, offline=False):
    results = []
    for case, values in scores.items():
        for i, v in enumerate(values):
            results.append(it(case, i, v, error="ProviderError: down") if v is None else it(case, i, v))
    return build_run_result(
        run_id=run_id, status="finished", threshold=70, results=results, offline=offline,
        usage={"agent": RoleUsage(calls=4, input_tokens=100, output_tokens=50, cost=0.01),
               "judge": RoleUsage(calls=4, input_tokens=400, output_tokens=80, cost=0.02)},
        case_info={k: {"name": k.title(), "expected": f"ref {k}"} for k in scores},
        prompt_id="p", version="1.0.0", agent_model="openai:x", judge_model="openai:y",
    )


def test_case_and_suite_figures():
    r = run("r1", {"good": [80, 90, 85], "bad": [40, 50, 60], "flaky": [None, None]})
    good = r.cases["good"]
    assert good.stats.mean == 85 and good.pass_rate == 1 and good.representative.iteration == 2
    assert r.cases["flaky"].status == "error" and r.suite.errored == 1
    assert r.suite.score.mean == pytest.approx((85 + 50) / 2)
    assert r.suite.cost == pytest.approx(0.03)
    assert r.exit_code == 3


def test_markdown_expands_failures_and_collapses_passes(tmp_path):
    r = run("r1", {"good": [80, 90], "bad": [40, 50]}, offline=True)
    md = render_markdown(r)
    assert "Offline model" in md
    failed = md.split("## Failed and errored cases")[1].split("## Passed cases")[0]
    assert "Bad" in failed and "tone reasoning bad" in failed and "ref bad" in failed
    passed = md.split("## Passed cases")[1]
    assert passed.lstrip().startswith("<details>") and "tone reasoning good" in passed
    paths = write_reports(r, tmp_path)
    assert all(p.exists() for p in paths.values())


def test_junit_marks_failures_and_errors():
    r = run("r1", {"good": [80], "bad": [40], "down": [None]})
    root = ET.fromstring(render_junit(r))
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = {tc.get("name"): tc for tc in suite.findall("testcase")}
    assert cases["bad"].find("failure") is not None and cases["down"].find("error") is not None
    assert cases["good"].find("failure") is None


def test_json_and_console():
    r = run("r1", {"good": [80, 90], "bad": [40, 50]}, offline=True)
    data = json.loads(render_json(r))
    assert data["offline"] is True and "offline model" in data["note"]
    assert data["summary"]["usage"]["judge"]["cost"] == 0.02
    text = render_console(r)
    assert "[offline model]" in text and text.index("bad") < text.index("good")


def test_compare_pairs_by_case():
    a = run("a", {"x": [80, 80], "y": [50, 50], "z": [90, 90], "gone": [70, 70]})
    b = run("b", {"x": [60, 60], "y": [80, 80], "z": [95, 95], "new": [70, 70]})
    c = compare_runs(a, b)
    assert c.regressed == ["x"] and c.newly_passing == ["y"]
    assert c.score_delta.n == 3 and c.score_delta.mean == pytest.approx((-20 + 30 + 5) / 3)
    assert c.only_in_a == ["gone"] and c.only_in_b == ["new"]
    assert compare_dict(c)["pass_rate"]["delta_points"]["mean"] == pytest.approx(0.0)
    text = render_compare(c)
    assert "Regressed" in text and "x" in text


def _hostile_run():
    """Outputs, errors and ids holding what XML forbids and what closes a Markdown fence."""
    out = "fine\x1b[2J\x00\x07 then ```\n<img src=x onerror=alert(1)>\n````` and more"
    good = it("c\x0bse", 0, 40)
    good = good.model_copy(update={"output": out})
    bad = it("down", 0, 0, error="ProviderError: \x1b]0;owned\x07 \x00gone")
    return build_run_result(
        run_id="r1", status="finished", threshold=70, results=[good, bad], offline=False,
        usage={}, case_info={"c\x0bse": {"expected": "```\nexpected ``` too"}, "down": {}},
        prompt_id="p", version="1.0.0", agent_model="openai:x", judge_model="openai:y")


def test_junit_stays_valid_xml_whatever_the_output_holds():
    """Issue 32: one control character in an output made the JUnit file invalid XML."""
    xml = render_junit(_hostile_run())
    root = ET.fromstring(xml)  # raises on a forbidden character
    text = ET.tostring(root, encoding="unicode")
    assert "\\x1b" in text and "\\x00" in text  # shown, not dropped silently
    assert {tc.get("name") for tc in root.iter("testcase")} == {"c\\x0bse", "down"}


def test_junit_shows_c1_controls_and_bidi_overrides_visibly():
    """XML allows U+009B (a one-byte CSI) and U+202E (which reverses the text after it in
    a CI's page or log): a provider's error brought them into the file as they were."""
    bad = it("down", 0, 0, error="ProviderError: \x9b2J \u202edessap \x85")
    result = build_run_result(
        run_id="r2", status="finished", threshold=70, results=[bad], offline=False, usage={},
        case_info={"down": {}}, prompt_id="p", version="1.0.0", agent_model="openai:x",
        judge_model="openai:y")
    xml = render_junit(result)
    ET.fromstring(xml)
    assert "\\x9b2J \\u202edessap \\x85" in xml
    assert not {"\x9b", "\u202e", "\x85"} & set(xml)


def test_markdown_fences_are_longer_than_any_backtick_run_inside():
    """Issue 32: an output's own fence closed the report's, and the HTML after it rendered."""
    md = render_markdown(_hostile_run())
    out_at = md.index("<img src=x")
    # the fence opened before the output is still open at the <img>: count fences by length
    opened: str | None = None
    for line in md[:out_at].splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            run = len(stripped) - len(stripped.lstrip("`"))
            if opened is None:
                opened = "`" * run
            elif stripped == opened:
                opened = None
    assert opened is not None and len(opened) > 5


def test_a_terminated_case_is_counted_in_the_summary_and_the_report_has_its_times():
    """Issue 33: 'Cases 7: 2 passed, 4 failed, 0 errored' left a terminated case out."""
    ended = IterationResult(case_id="looped", iteration=0, status="terminated", score=None,
                            passed=None, error="the step limit was reached", input={"q": "x"})
    r = build_run_result(
        run_id="r1", status="finished", threshold=70,
        results=[it("good", 0, 90), it("bad", 0, 10), ended], usage={},
        case_info={}, prompt_id="p", version="1.0.0", agent_model="openai:x",
        judge_model="openai:y", started_at="2026-11-24T01:00:00", finished_at="2026-11-24T01:01:00")
    s = r.suite
    assert (s.passed, s.failed, s.errored, s.terminated_cases) == (1, 1, 0, 1)
    assert "Cases 3: 1 passed, 1 failed, 0 errored, 1 terminated" in render_console(r)
    assert "3: 1 passed, 1 failed, 0 errored, 1 terminated" in render_markdown(r)
    data = json.loads(render_json(r))
    assert data["summary"]["terminated_cases"] == 1 and data["started_at"] == "2026-11-24T01:00:00"


def test_junit_fails_a_case_a_limit_ended():
    """A case every iteration of which ended by a limit (terminated) was a testcase with no
    failure, green in CI, while the run exited 1 for it."""
    ended = IterationResult(case_id="loops", iteration=0, status="terminated", score=None,
                            passed=None, input={"q": "loops"},
                            error="max_steps (10) reached")
    r = build_run_result(
        run_id="r1", status="finished", threshold=70, results=[it("good", 0, 80), ended],
        offline=False, usage={}, case_info={"good": {}, "loops": {}}, prompt_id="p",
        version="1.0.0", agent_model="openai:x", judge_model="openai:y")
    assert r.exit_code == 1
    root = ET.fromstring(render_junit(r))
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    assert root.get("failures") == "1"
    cases = {tc.get("name"): tc for tc in suite.findall("testcase")}
    failure = cases["loops"].find("failure")
    assert failure is not None and failure.get("type") == "terminated"
    assert "max_steps (10) reached" in failure.text
