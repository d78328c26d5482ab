"""Guards against going quadratic again (issue 17), by counting, not timing: the Python
lines a step executes for n and for 4n items. Linear work grows about 4x; the quadratic
case loading this replaced (every case re-filtered the whole file's line map) grew 16x."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cycle.cases import load_case_file


def lines_executed(fn: Callable[[], Any]) -> int:
    """How many Python lines ``fn()`` executes (comprehension bodies count per item)."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def growth(make: Callable[[int], Callable[[], Any]], n: int) -> float:
    """lines(4n) / lines(n)."""
    small, large = lines_executed(make(n)), lines_executed(make(4 * n))
    return large / small


def test_loading_a_case_file_is_linear_in_its_cases(tmp_path: Path):
    def make(n: int) -> Callable[[], Any]:
        path = tmp_path / f"cases{n}.yaml"
        path.write_text("".join(
            f"- id: c{i}\n  tags: [t{i % 7}]\n  input: {{question: 'What is {i}?', n: {i}}}\n"
            f"  expected: '{i}'\n" for i in range(n)))
        return lambda: load_case_file(path)

    assert growth(make, 300) < 5


def test_the_run_reports_are_linear_in_the_cases(tmp_path: Path):
    from cycle.evals.results import build_run_result
    from cycle.records import IterationResult, Verdict
    from cycle.report import write_reports

    def make(n: int) -> Callable[[], Any]:
        results = [
            IterationResult(case_id=f"c{k}", iteration=i, status="passed" if k % 3 else "failed",
                            score=90.0 - k % 7 - i, passed=bool(k % 3), input={"q": k},
                            output=f"answer {k} {i}", latency=0.1,
                            verdicts=(Verdict(criterion_id="tone", kind="llm", score=80.0,
                                              passed=True, weight=1, required=False,
                                              reasoning="fine"),))
            for k in range(n) for i in range(2)]
        run = build_run_result(run_id=f"run-{n}", status="finished", threshold=70.0,
                               results=results)
        return lambda: write_reports(run, tmp_path / str(n))

    assert growth(make, 100) < 5
