"""Bounded memory (issue 17), by counting, not timing: what a run holds does not grow with
the size of its results. A run with a store keeps no IterationResult once each is written;
its reports read its results a hundred cases at a time; a case file is read one case at a
time."""

from __future__ import annotations

import gc
import json
import tracemalloc
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cycle import aio
from cycle.agents import CallableAgent
from cycle.cases import TestCase, load_case_file
from cycle.errors import ConfigError
from cycle.evals.results import load_run
from cycle.evals.runner import Runner
from cycle.judge import Judge
from cycle.judge.criteria import CriterionConfig
from cycle.records import IterationResult
from cycle.report import reports_ahead, write_reports
from cycle.store import Store


def peak_bytes(fn: Callable[[], Any]) -> int:
    """The most memory ``fn()`` held at once above what it started with (traced)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def live(kind: type) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


def _answer(inp: dict[str, Any]) -> str:
    n = inp["n"]
    # long answers: what would pile up if the results were held
    return f"answer {n} " + "words " * 200 + ("PASS" if n % 3 else "")


CRITERIA = [CriterionConfig(id="says-pass", check={"type": "contains", "values": ["PASS"]})]


def _run(store: Store, n: int, ahead: Any = None, **kwargs: Any):
    cases = [TestCase(id=f"c{i}", input={"n": i}) for i in range(n)]
    agent = CallableAgent(_answer)
    runner = Runner(agent=agent, judge=Judge(CRITERIA), cases=cases, iterations=2,
                    concurrency=8, store=store, **kwargs)
    return aio.run(runner.run(ahead=ahead))


def test_a_stored_run_holds_no_results_once_they_are_written(tmp_path: Path):
    store = Store.open(tmp_path / "s.db")
    before = live(IterationResult)
    result = _run(store, 300)
    # 600 iterations were judged and written; none is left in memory
    assert live(IterationResult) - before == 0
    s = result.suite
    assert (s.cases, s.iterations, s.passed, s.failed) == (300, 600, 200, 100)
    # they are read back when asked, a case at a time
    assert [r.iteration for r in result.results_of("c1")] == [0, 1]
    assert "PASS" in result.cases["c1"].representative.output
    assert result.cases["c3"].status == "failed" and result.case_means["c3"] == 0.0
    store.close()


def test_a_stored_run_reads_back_the_figures_it_was_built_with(tmp_path: Path):
    store = Store.open(tmp_path / "s.db")
    result = _run(store, 40)
    again = load_run(store.runs, result.run_id)
    assert again.suite == result.suite.model_copy(update={"usage": again.suite.usage})
    assert again.case_means == result.case_means
    assert [c.model_dump() for c in again.cases.values()] == \
        [c.model_dump() for c in result.cases.values()]
    store.close()


def test_writing_the_reports_holds_a_few_cases_at_a_time(tmp_path: Path, monkeypatch):
    """The reports' peak memory grows with the largest case, not with the run: four times
    the cases, not four times the memory (holding them all measured 4x)."""
    store = Store.open(tmp_path / "s.db")
    runs = {n: load_run(store.runs, _run(store, n).run_id) for n in (50, 200)}
    # the reports read a run CASES_READ cases at a time: 10 here, so that 50 and 200
    # cases show whether memory grows with the run or stays at a few reads' worth
    monkeypatch.setattr("cycle.store.runs.CASES_READ", 10)
    peaks = {n: peak_bytes(lambda n=n: write_reports(runs[n], tmp_path / str(n)))
             for n in runs}
    assert peaks[200] < 2 * peaks[50], peaks
    # and the streamed reports are whole: JSON, XML and Markdown read back
    paths = write_reports(runs[200], tmp_path / "check")
    data = json.loads(paths["json"].read_text())
    assert len(data["cases"]) == 200 and data["summary"]["failed"] == 67
    assert len(data["cases"][0]["results"]) == 2
    suite = ET.parse(paths["junit"]).getroot()
    assert suite.get("tests") == "200" and suite.get("failures") == "67"
    assert len(suite.findall(".//testcase")) == 200 and len(suite.findall(".//failure")) == 67
    md = paths["markdown"].read_text()
    assert md.count("### FAILED:") == 67 and md.count("<details>") == 133
    assert md.endswith("</details>\n")
    store.close()


def test_reports_written_while_the_run_runs_hold_a_few_cases_at_a_time(tmp_path: Path,
                                                                       monkeypatch):
    """``cycle run`` writes its reports as the results are stored (cycle.report.ahead):
    four times the cases, not four times the memory, and no result left in memory."""
    monkeypatch.setattr("cycle.store.runs.CASES_READ", 10)
    # a write per result: written in batches of a quarter second, a fast run's batch
    # would be the whole run, whatever the reports do
    monkeypatch.setattr("cycle.evals.recording.FLUSH_EVERY", 0)
    store = Store.open(tmp_path / "s.db")
    before = live(IterationResult)

    def run_and_report(n: int) -> None:
        ahead = reports_ahead(tmp_path / str(n))
        write_reports(_run(store, n, ahead=ahead), tmp_path / str(n), ahead=ahead)
        assert ahead.written == n

    peaks = {n: peak_bytes(lambda n=n: run_and_report(n)) for n in (50, 200)}
    assert peaks[200] < 2 * peaks[50], peaks
    assert live(IterationResult) - before == 0
    store.close()


def test_the_reports_read_a_stored_run_once_for_all_four(store_target, tmp_path: Path,
                                                        monkeypatch):
    """The four reports are written together, each read of the store serving all of them
    (written one after the other, they read the run four times), and they are the files
    each writes alone; on both backends."""
    from cycle.store.runs import RunLog

    store = Store.open(store_target)
    run = load_run(store.runs, _run(store, 200).run_id)
    monkeypatch.setattr("cycle.store.runs.CASES_READ", 10)
    reads: list[int] = []
    load_cases = RunLog.load_cases

    def counted(self: RunLog, run_id: str, case_ids: list[str]) -> Any:
        reads.append(len(case_ids))
        return load_cases(self, run_id, case_ids)

    monkeypatch.setattr(RunLog, "load_cases", counted)
    together = write_reports(run, tmp_path / "together")
    # 20 reads of 10 for the cases in order; the Markdown report's failed cases, every
    # third one, come out of those reads; its passed cases, read in a second pass, are
    # two of every three: the first after a failed one alone, then the next with it
    assert sum(reads) < 2 * 200 * 2, reads
    assert reads.count(10) <= 2 * 20, reads
    for name, path in together.items():
        alone = write_reports(load_run(store.runs, run.run_id), tmp_path / name, [name])
        assert path.read_text() == alone[name].read_text(), name
    store.close()


def _case_file(path: Path, n: int) -> Path:
    path.write_text("".join(
        f"- id: c{i}\n  tags: [t{i % 7}]\n  input: {{question: 'What is {i}?', n: {i}}}\n"
        f"  expected: '{i}'\n" for i in range(n)))
    return path


def test_a_case_file_is_read_one_case_at_a_time(tmp_path: Path):
    """Loading holds the cases it returns and the file's text, not a YAML tree of the
    whole file on top (which took about twice the memory of the cases it made)."""
    for n in (500, 2000):
        path = _case_file(tmp_path / f"c{n}.yaml", n)
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        cases = load_case_file(path)
        held, peak = (m - base for m in tracemalloc.get_traced_memory())
        tracemalloc.stop()
        assert len(cases) == n
        assert peak - held < 0.25 * held, (n, peak, held)


def test_a_streamed_case_file_keeps_lines_anchors_and_errors(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("cases:\n  - id: a\n    input: &q {question: hi}\n"
                    "  - id: b\n    input: *q\n    tags: [x]\n")
    a, b = load_case_file(path)
    assert b.input == {"question": "hi"} and a.source.endswith(":2") and b.source.endswith(":4")
    path.write_text("- id: a\n  input: {q: 1}\n- id: b\n  imput: {q: 2}\n")
    with pytest.raises(ConfigError) as e:
        load_case_file(path)
    assert e.value.line == 4 and "imput" in e.value.message and e.value.field == "cases[1].imput"
    path.write_text("cases:\n  - id: a\n    input: {q: 1}\nextra: 1\n")
    with pytest.raises(ConfigError) as e:
        load_case_file(path)
    assert e.value.line == 4 and e.value.message.endswith("unknown key 'extra'")
    path.write_text("- id: a\n  input: {q: 1}\n- id: b\n  input: {q: [1, 2}\n")
    with pytest.raises(ConfigError) as e:
        load_case_file(path)
    assert e.value.line == 4 and "not valid YAML" in e.value.message
    path.write_text("- id: a\n  input: {q: 1}\n  id: b\n")
    with pytest.raises(ConfigError) as e:
        load_case_file(path)
    assert e.value.line == 3 and "duplicate key 'id'" in e.value.message


def test_a_run_holds_the_cases_it_is_running_not_every_case(tmp_path: Path):
    """A run unpacks a case as a worker reaches it: at any moment the TestCases alive are
    about the ones in flight (8 here), not the 400 of the suite."""
    seen: list[int] = []

    # async, so that it counts on the event loop's thread: a sync agent runs on a worker
    # thread, where gc.collect() does nothing while the main thread is collecting, and the
    # count took in garbage not yet collected (it failed so under load)
    async def agent(inp: dict[str, Any]) -> str:
        if inp["n"] % 50 == 0:
            seen.append(live(TestCase))
        return "PASS"

    store = Store.open(tmp_path / "s.db")
    cases = [TestCase(id=f"c{i}", input={"n": i}) for i in range(400)]
    runner = Runner(agent=CallableAgent(agent), judge=Judge(CRITERIA), cases=cases,
                    concurrency=8, store=store)
    del cases
    before = live(TestCase)  # what other tests left alive
    result = aio.run(runner.run())
    assert result.suite.passed == 400 and len(seen) == 8
    assert max(seen) - before <= 3 * 8, (before, seen)
    store.close()
