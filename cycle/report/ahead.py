"""A run's reports written while it runs (issue 40).

A run bound by its model's latency leaves its event loop idle most of the time; written
at the end, the reports of 2,000 cases added about 0.4 s after the last answer. Here each
case's text, in every report, is written as soon as the case is stored whole and every
case before it is (the cases' order is the reports'), into an anonymous file per
report's stream in the reports' folder; at the end only the heads (the run's figures)
and tails are made, and each report is its head, its streams copied in order, its tail
(``cycle.report.parts``: the same code as a report written whole, so the same bytes).

A case's text is made from what the store holds, read back as a report written at the
end reads it: every paid answer is kept before it is used, as before. Anything that goes
wrong on the way (a full disk, a bug) is not the run's concern: the reports are then
written whole at the end, where the same failure is reported as it always was.

The texts are written in slices of the event loop's time (``SLICE`` seconds at most, then
the loop's other work, then the next slice), not a stored batch at once: a batch of 20
cases took 4-9 ms, during which every answer that arrived waited, and at 16 calls in
flight, 100 ms each, those waits made the run 1% longer than its calls (bench_latency.py).
What a finished run has not written yet is written at the end."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from pathlib import Path
from typing import TextIO

from msgspec.structs import replace

from cycle.evals.results import CaseTable, Tally
from cycle.records import IterationResult, RunResult
from cycle.report.parts import Parts
from cycle.store.runs import RunLog, StoredResults

#: characters copied from a stream's file at a time
_CHUNK = 1 << 16

#: seconds of the event loop's time the texts are written in at a stretch
SLICE = 0.0005


class ReportsAhead:
    """The reports ``formats`` (names of ``RUN_REPORTS``, in its order) of one run, to
    be written in ``directory``: ``follow`` the run as its results are stored, then
    ``pieces`` of each report at the end (``ready`` says whether it may)."""

    def __init__(self, directory: Path, formats: Sequence[str],
                 parts: dict[str, Callable[[], Parts]]) -> None:
        self.directory = directory
        self.formats = list(formats)
        self._new_parts = parts
        self._parts: dict[str, Parts] = {}
        self._files: dict[str, list[TextIO]] = {}
        self._base: RunResult | None = None
        self._log: RunLog | None = None
        self._iterations: Callable[[str], int] = lambda case_id: 1
        self._order: list[str] = []
        #: cases written, the first ones in order
        self.written = 0
        #: cases stored whole, in order, whose text waits for the loop's next slice
        self._due: deque[tuple[RunResult, str]] = deque()
        self._sliced = False  # a slice is scheduled
        self._open: dict[str, list[Tally]] = {}  # cases with iterations still to store
        self._whole: dict[str, list[Tally]] = {}  # stored whole, a case before them not yet
        self._given_up = False

    def follow(self, base: RunResult, log: RunLog,
               iterations: Callable[[str], int]) -> Callable[[list[IterationResult]], None]:
        """Start writing the run ``base`` (its figures as they are at its start: its
        cases' text needs none of the rest), whose results ``log`` stores, each case
        ``iterations(case_id)`` times; returns what to call with each batch of results
        once it is stored."""
        self._base, self._log, self._iterations = base, log, iterations
        self._order = [k for k in base.case_info if iterations(k) > 0]
        return self.stored

    def _open_streams(self) -> None:
        """The streams' files, made with the first case written (not before the run's
        first request)."""
        if self._files:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        for name in self.formats:
            self._parts[name] = parts = self._new_parts[name]()
            # anonymous: a run killed on the way leaves nothing behind
            self._files[name] = [
                tempfile.TemporaryFile("w+", encoding="utf-8", newline="",  # noqa: SIM115 - closed by close()
                                       dir=self.directory)
                for _ in range(parts.streams)]

    def stored(self, batch: list[IterationResult]) -> None:
        """``batch`` is stored: write every case now whole whose cases before it are."""
        if self._given_up:
            return
        try:
            for r in batch:
                tallies = self._open.setdefault(r.case_id, [])
                tallies.append(Tally.of(r))
                if len(tallies) == self._iterations(r.case_id):
                    self._whole[r.case_id] = self._open.pop(r.case_id)
            ids = []
            queued = self.written + len(self._due)
            while queued + len(ids) < len(self._order) \
                    and self._order[queued + len(ids)] in self._whole:
                ids.append(self._order[queued + len(ids)])
            if ids:
                run = self._run_of(ids)
                self._due.extend((run, case_id) for case_id in ids)
                if self.written + len(self._due) == len(self._order):
                    self._write_due()  # the run's last cases: no answer is left to wait
                else:
                    self._slice_soon()
        except Exception:  # noqa: BLE001 - written whole at the end, where it is reported
            self._give_up()

    def _run_of(self, ids: list[str]) -> RunResult:
        """The run as far as cases ``ids`` (stored whole) go, read back from the store."""
        assert self._base is not None and self._log is not None
        source = StoredResults(self._log, self._base.run_id)
        source.follow(ids)
        tallies = {k: sorted(self._whole.pop(k), key=attrgetter("iteration")) for k in ids}
        return replace(self._base, source=source,
                       cases=CaseTable(tallies, self._base.case_info, source))

    def _slice_soon(self) -> None:
        if self._sliced:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # stored outside a loop: nothing waits on it
            self._write_due()
            return
        self._sliced = True
        loop.call_soon(self._slice)

    def _slice(self) -> None:
        """Write what is due for ``SLICE`` seconds, then let the loop go on; but an eighth
        of what is due at least, so that a run leaving the loop no idle time (answers at
        once) does not pile its cases up for the end (at 20,000 cases, 11,000 were left,
        and the memory their runs held)."""
        self._sliced = False
        if self._given_up:
            return
        try:
            until = time.perf_counter() + SLICE
            least = (len(self._due) + 7) // 8
            while self._due:
                self._write_cases(*self._next_due())
                least -= 1
                if least <= 0 and time.perf_counter() >= until:
                    break
            if self._due:
                self._slice_soon()
        except Exception:  # noqa: BLE001 - written whole at the end, where it is reported
            self._give_up()

    def _write_due(self) -> None:
        while self._due:
            self._write_cases(*self._next_due())

    def _next_due(self) -> tuple[RunResult, list[str]]:
        run, case_id = self._due.popleft()
        return run, [case_id]

    def _write_cases(self, run: RunResult, ids: list[str]) -> None:
        """The text of cases ``ids`` (the next ones in order) of ``run``, in every report."""
        self._open_streams()
        for n, case_id in enumerate(ids, start=self.written):
            c = run.cases[case_id]
            for name, parts in self._parts.items():
                for stream, out in enumerate(self._files[name]):
                    text = parts.case(stream, n, c, run)
                    if text:
                        out.write(text)
            self.written = n + 1

    def ready(self, result: RunResult, directory: Path, formats: Sequence[str]) -> bool:
        """Whether the reports ``formats`` of ``result`` in ``directory`` may be written
        from what was written ahead: the same reports, and the cases written are the
        first of the finished run's (a run stopped early has none of the cases after
        its stop)."""
        if self._given_up or self._base is None or self._base.run_id != result.run_id \
                or directory != self.directory or list(formats) != self.formats:
            return False
        order = list(result.cases)
        return order[:self.written] == self._order[:self.written]

    def pieces(self, name: str, result: RunResult) -> Iterator[str]:
        """Report ``name`` of the finished run ``result`` in pieces: the cases not
        written yet are written first (into every report's streams), then its head, its
        streams, its tail."""
        self._due.clear()  # (written from the finished run, as every case after them)
        self._write_cases(result, list(result.cases)[self.written:])
        parts = self._parts[name]
        yield parts.head(result)
        for stream, file in enumerate(self._files[name]):
            if not file.tell():
                continue  # a stream with no text (no failed case)
            yield parts.before(stream)
            file.seek(0)
            while chunk := file.read(_CHUNK):
                yield chunk
        yield parts.tail(result)

    def _give_up(self) -> None:
        self._given_up = True
        self.close()

    def close(self) -> None:
        """Let the streams' files go (they leave nothing on disk)."""
        self._due.clear()
        for files in self._files.values():
            for file in files:
                # what is left in its buffer has nowhere to go on a full disk, and is not
                # wanted: the file is closed all the same
                with contextlib.suppress(OSError):
                    file.close()
        self._files.clear()
