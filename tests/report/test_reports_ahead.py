"""A run's reports written while it runs (cycle.report.ahead): the files written whole at
the end, byte for byte, whatever the run's cases and however it ends; a failure on the way
leaves them to the end, and a failure at the end is the error it always was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cycle import aio
from cycle.agents import CallableAgent
from cycle.cases import TestCase
from cycle.errors import ReportError
from cycle.evals.runner import Runner
from cycle.judge import Judge
from cycle.judge.criteria import CriterionConfig
from cycle.report import reports_ahead, write_reports
from cycle.store import Store

CRITERIA = [CriterionConfig(id="says-pass", check={"type": "contains", "values": ["PASS"]})]


def _answer(inp: dict[str, Any]) -> str:
    n = inp["n"]
    if n % 7 == 5:
        raise RuntimeError(f"agent down for {n}\n\n")  # an error ending in blank lines
    # every third fails; some pass only sometimes (a case of several iterations)
    return f"answer {n}\r\nline\n" + ("PASS" if n % 3 else "")


def _cases(n: int) -> list[TestCase]:
    # descriptions ending in blank lines or only blank: the Markdown report's blank lines
    # are its trickiest join
    return [TestCase(id=f"c{i}", input={"n": i}, name=f"Case {i}",
                     description=("about " + str(i) + "\n\n") if i % 4 == 0 else
                     (" \n" if i % 4 == 1 else ""))
            for i in range(n)]


def _run(store: Store, ahead: Any, n: int = 60, **kwargs: Any):
    runner = Runner(agent=CallableAgent(_answer), judge=Judge(CRITERIA), cases=_cases(n),
                    iterations=2, iterations_for={"c3": 3, "c4": 1}, concurrency=8,
                    store=store, **kwargs)
    return aio.run(runner.run(meta={"prompt_id": "p", "version": "1.0.0"}, ahead=ahead))


def _files(paths: dict[str, Path]) -> dict[str, bytes]:
    return {name: path.read_bytes() for name, path in paths.items()}


@pytest.fixture
def every_result_a_batch(monkeypatch):
    # each result its own write: the cases come whole out of order, many times a run
    monkeypatch.setattr("cycle.evals.recording.FLUSH_EVERY", 0)


def test_reports_written_ahead_are_the_reports_written_whole(store_target, tmp_path: Path,
                                                           every_result_a_batch):
    store = Store.open(store_target)
    ahead = reports_ahead(tmp_path / "ahead")
    result = _run(store, ahead)
    # every case was written while the run ran (in slices of the loop's time, the last
    # ones at once): the end makes the heads only
    assert ahead.written == 60
    assert {c.status for c in result.cases.values()} == {"passed", "failed", "error"}
    written = _files(write_reports(result, tmp_path / "ahead", ahead=ahead))
    whole = _files(write_reports(result, tmp_path / "whole"))
    assert written == whole
    # the Markdown report's joins, as written whole before it was written in parts
    md = written["markdown"].decode()
    assert (" |\n\n## Failed and errored cases\n\n### FAILED: Case 0 (`c0`)\n\n"
            "about 0\n\n\n\nMean ") in md
    assert (" |\n\n## Passed cases\n\n<details>\n<summary>Case 1 (<code>c1</code>): "
            "100.0 ± 0.0</summary>\n\n\n\nMean ") in md
    assert md.endswith("</details>\n")
    # nothing else is left in the folder (the streams' files are anonymous)
    assert sorted(p.name for p in (tmp_path / "ahead").iterdir()) == \
        sorted(p.name for p in (tmp_path / "whole").iterdir())
    store.close()


def test_some_formats_ahead(tmp_path: Path):
    store = Store.open(tmp_path / "s.db")
    ahead = reports_ahead(tmp_path / "ahead", ["markdown", "junit"])
    result = _run(store, ahead, n=12)
    written = write_reports(result, tmp_path / "ahead", ["markdown", "junit"], ahead=ahead)
    assert _files(written) == _files(write_reports(result, tmp_path / "whole",
                                                   ["markdown", "junit"]))
    store.close()


def test_a_run_stopped_early_is_written_from_its_own_cases(tmp_path: Path,
                                                           every_result_a_batch):
    """Stopped at its first failure, the run has the cases it ran: the ones written
    ahead that it has are kept, the rest written at the end, as a whole report."""
    store = Store.open(tmp_path / "s.db")
    ahead = reports_ahead(tmp_path / "ahead")
    result = _run(store, ahead, stop_on_first_failure=True)
    assert result.status == "interrupted" and len(result.cases) < 60
    written = _files(write_reports(result, tmp_path / "ahead", ahead=ahead))
    assert written == _files(write_reports(result, tmp_path / "whole"))
    store.close()


def test_a_failure_while_writing_ahead_leaves_the_reports_to_the_end(
        tmp_path: Path, monkeypatch, every_result_a_batch):
    """A full disk (or a bug) on the way does not stop the run: the reports are written
    whole at the end, as they were before."""
    calls = []

    def fails(n: int, c: Any, result: Any) -> str:
        calls.append(n)
        raise OSError(28, "No space left on device")

    store = Store.open(tmp_path / "s.db")
    ahead = reports_ahead(tmp_path / "ahead")
    with monkeypatch.context() as m:
        m.setattr("cycle.report.junit.junit_case", fails)
        result = _run(store, ahead, n=20)
    assert calls == [0] and result.suite.cases == 20  # given up at once; the run went on
    written = _files(write_reports(result, tmp_path / "ahead", ahead=ahead))
    assert written == _files(write_reports(result, tmp_path / "whole"))
    store.close()


def test_a_failure_at_the_end_is_the_clear_error_and_leaves_no_file(tmp_path: Path,
                                                                  monkeypatch):
    from cycle.report.ahead import ReportsAhead

    store = Store.open(tmp_path / "s.db")
    ahead = reports_ahead(tmp_path / "ahead")
    result = _run(store, ahead, n=12)
    pieces = ReportsAhead.pieces

    def full(self: Any, name: str, result: Any):
        if name == "junit":  # the third of the four: two are written whole already
            yield "<?xml"
            raise OSError(28, "No space left on device")
        yield from pieces(self, name, result)

    monkeypatch.setattr(ReportsAhead, "pieces", full)
    with pytest.raises(ReportError) as e:
        write_reports(result, tmp_path / "ahead", ahead=ahead)
    assert "could not be written" in e.value.message and "No space left" in e.value.message
    assert "cycle report " + result.run_id in (e.value.hint or "")
    # the one cut short is gone; the ones written whole stay, as when written at the end
    left = sorted(p.name for p in (tmp_path / "ahead").iterdir())
    assert left == [f"{result.run_id}.json", f"{result.run_id}.md"]
    store.close()
