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


def _run_result(n: int, run_id: str, shift: float = 0.0):
    from cycle.evals.results import build_run_result
    from cycle.records import IterationResult

    results = [IterationResult(case_id=f"c{k}", iteration=i, status="passed", score=80.0 - k % 9
                               + shift - i, passed=True, input={"q": k}, output=f"a {k}",
                               latency=0.1)
               for k in range(n) for i in range(2)]
    return build_run_result(run_id=run_id, status="finished", threshold=70.0, results=results)


def test_cycle_compare_is_linear_in_the_cases():
    from cycle.report.compare import compare_runs, render_compare, render_compare_json

    def make(n: int) -> Callable[[], Any]:
        a, b = _run_result(n, "a"), _run_result(n, "b", shift=3.0)

        def compare() -> None:
            comparison = compare_runs(a, b)
            render_compare(comparison)
            render_compare_json(comparison)

        return compare

    assert growth(make, 100) < 5


def test_cycle_history_is_linear_in_the_versions(tmp_path: Path):
    from click.testing import CliRunner

    from cycle.cli import cli
    from cycle.records import Prompt
    from cycle.store import Store

    def make(n: int) -> Callable[[], Any]:
        path = tmp_path / f"s{n}.db"
        store = Store.open(path)
        for i in range(n):
            store.save_version(Prompt(id="p", system=f"Version {i}."), message=f"edit {i}")
        store.close()
        return lambda: CliRunner().invoke(cli, ["--store", str(path), "history", "p",
                                                "--limit", str(n)])

    assert growth(make, 40) < 5


def test_the_tui_dashboard_state_is_linear_in_the_events():
    from cycle import events as ev
    from cycle.tui.state import DashboardState

    def make(n: int) -> Callable[[], Any]:
        events: list[ev.Event] = [ev.RunStarted(run_id="r", cases=n, iterations=2)]
        events += [ev.CaseFinished(run_id="r", case_id=f"c{k}", iteration=i, score=80.0,
                                   passed=True, status="passed")
                   for k in range(n) for i in range(2)]

        def fold() -> None:
            state = DashboardState()
            for k, e in enumerate(events):
                state.apply(e)
                if k % 50 == 0:  # the screen takes what changed now and then
                    state.take_changes()
            state.take_changes()

        return fold

    assert growth(make, 200) < 5


def test_reading_a_stored_run_case_by_case_is_linear_in_its_cases(tmp_path: Path, monkeypatch):
    """Counted in SQLite's own steps (the VM instructions it runs): reading a stored run
    back and writing its reports, a case at a time, grows 4x for 4x the cases. (Reading a
    case's verdicts through a join once scanned every verdict of the store per case.)"""
    from cycle import aio
    from cycle.agents import CallableAgent
    from cycle.cases import TestCase
    from cycle.evals.results import load_run
    from cycle.evals.runner import Runner
    from cycle.judge import Judge
    from cycle.judge.criteria import CriterionConfig
    from cycle.report import write_reports
    from cycle.store import Store

    store = Store.open(tmp_path / "s.db")
    judge = Judge([CriterionConfig(id="a", check={"type": "regex", "pattern": "1"}),
                   CriterionConfig(id="b", check={"type": "regex", "pattern": "2"})])

    def make(n: int) -> Callable[[], Any]:
        cases = [TestCase(id=f"c{k}", input={"n": k}) for k in range(n)]
        # a third of the cases pass at either size: the Markdown report reads its failed
        # cases and then its passed ones, so a mix that moved with n would move the count
        runner = Runner(agent=CallableAgent(lambda inp: "answer 12" if inp["n"] % 3 == 0
                                            else "answer 1"), judge=judge,
                        cases=cases, iterations=2, store=store)
        run_id = aio.run(runner.run()).run_id
        return lambda: write_reports(load_run(store.runs, run_id), tmp_path / run_id)

    def steps(fn: Callable[[], Any]) -> int:
        count = 0

        def tick() -> int:
            nonlocal count
            count += 1
            return 0

        store.db.set_progress_handler(tick, 100)
        try:
            fn()
        finally:
            store.db.set_progress_handler(None, 100)
        return count

    # reads of 10 cases: both runs span many reads (with 100, the small run would be read
    # once and its four reports served from that one read)
    monkeypatch.setattr("cycle.store.runs.CASES_READ", 10)
    small, large = make(100), make(400)  # both runs in the store, as runs pile up
    assert steps(large) / steps(small) < 5
    store.close()
