"""Where a run's results go: one recorder per run, to which the runner hands every result.

``RunRecorder`` keeps them in memory (a run without a store); ``StoredRunRecorder`` writes
them, their verdicts and the model calls made for them to the store's run log as they are
judged, in batches at most ``FLUSH_EVERY`` seconds apart, so a killed run resumes where it
stopped. At the end the runner asks its recorder for the run's usage and results (read
back from where they were kept); it writes no row itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from cycle.evals.results import MemoryResults, Tally, stored_tallies
from cycle.events import Event, EventBus, ModelCalled
from cycle.records import IterationResult, RoleUsage, RunResult
from cycle.records.results import ResultSource
from cycle.store import CallRecorder
from cycle.store.runs import FLUSH_EVERY, RunLog, StoredResults


class Follower(Protocol):
    """What follows a new stored run as its results are stored (the reports written
    ahead, cycle.report.ahead)."""

    def follow(self, base: RunResult, log: RunLog, iterations: Callable[[str], int]
               ) -> Callable[[list[IterationResult]], None]:
        """Start following the run ``base`` (its figures at its start), whose results
        ``log`` stores, each case ``iterations(case_id)`` times; returns what to call
        with each batch of results once it is stored."""
        ...


class Usage:
    """Per-role totals of one run's calls, from its ModelCalled events: what a run without
    a store reports, and the latencies a timeout's message quotes."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.totals: dict[str, list[Any]] = {}

    def __call__(self, event: Event) -> None:
        if not isinstance(event, ModelCalled) or event.scope.run_id != self.run_id:
            return
        t = self.totals.setdefault(event.role, [0, 0, 0, 0.0, False, 0, 0.0, 0])
        t[0] += 1
        t[1] += event.input_tokens
        t[2] += event.output_tokens
        t[3] += event.cost
        t[4] = t[4] or event.cost_estimated
        t[5] += event.cache_hit
        if event.error is None and event.latency > 0 and not event.cache_hit:
            t[6] += event.latency
            t[7] += 1

    def latencies(self) -> dict[str, tuple[float, int]]:
        """Role -> (mean seconds of its answered calls in this run, their number)."""
        return {k: (v[6] / v[7], v[7]) for k, v in self.totals.items() if v[7]}

    def by_role(self) -> dict[str, RoleUsage]:
        return {k: RoleUsage(calls=v[0], input_tokens=v[1], output_tokens=v[2], cost=v[3],
                             cost_estimated=v[4], cache_hits=v[5]) for k, v in self.totals.items()}


class RunRecorder:
    """A run's results kept in memory (no store): nothing to resume, nothing written."""

    def __init__(self, run_id: str, bus: EventBus) -> None:
        self.run_id = run_id
        self.usage = Usage(run_id)
        self._unsubscribe: list[Callable[[], None]] = [bus.subscribe(self.usage)]
        self._kept: list[IterationResult] = []

    def begin(self, row: Callable[[], dict[str, Any]]) -> dict[str, list[Tally]]:
        """Open the run (``row``: what a new run's row holds); the tallies of what a resumed
        run had judged already (none here)."""
        return {}

    def add(self, result: IterationResult) -> None:
        self._kept.append(result)

    def interrupted(self) -> None:
        """The run stopped on an exception: keep what was judged."""

    def flush(self) -> None:
        """Write every result and call not written yet (before the run's totals are read)."""

    def finish(self, status: str, summary: dict[str, Any]) -> None:
        """The run is over: its status and summary."""

    def role_usage(self) -> dict[str, RoleUsage]:
        return self.usage.by_role()

    def results(self) -> ResultSource:
        return MemoryResults(self._kept)

    def started_at(self, default: str) -> str:
        """When the run first started (a resumed run: when it started before)."""
        return default

    def close(self) -> None:
        """Stop listening to the bus."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()


class StoredRunRecorder(RunRecorder):
    """A run's results written to the store's run log as they are judged; only their
    tallies stay in memory (the results are read back a case at a time by who asks)."""

    def __init__(self, run_id: str, bus: EventBus, log: RunLog) -> None:
        super().__init__(run_id, bus)
        self.log = log
        self._calls = CallRecorder(log, run_id=run_id)
        self._unsubscribe.append(bus.subscribe(self._calls))
        self._unwritten: list[IterationResult] = []
        self._last_write = time.monotonic()
        #: told of each batch of results once it is stored (the reports written ahead)
        self.on_stored: Callable[[list[IterationResult]], None] | None = None

    def begin(self, row: Callable[[], dict[str, Any]]) -> dict[str, list[Tally]]:
        if self.log.get(self.run_id) is None:
            self.log.create(run_id=self.run_id, **row())
            return {}
        # a resume: its errors are tried again, its judged iterations kept
        self.log.delete_errors(self.run_id)
        tallies = stored_tallies(self.log, self.run_id)
        self.log.mark_running(self.run_id)
        return tallies

    def add(self, result: IterationResult) -> None:
        self._unwritten.append(result)
        self._write()

    def _write(self, force: bool = False) -> None:
        # batched: one transaction per FLUSH_EVERY seconds, not one per result
        now = time.monotonic()
        if not force and (not self._unwritten or now - self._last_write < FLUSH_EVERY):
            return
        batch, self._unwritten = self._unwritten, []
        self.log.write_results(self.run_id, batch, calls=self._calls.take())
        self._last_write = now
        if self.on_stored is not None:
            self.on_stored(batch)

    def interrupted(self) -> None:
        self.on_stored = None  # no report is written of a run stopped by an exception
        self._write(force=True)
        self.log.finish(self.run_id, status="interrupted", summary=None)

    def finish(self, status: str, summary: dict[str, Any]) -> None:
        self.log.finish(self.run_id, status=status, summary=summary)

    def flush(self) -> None:
        self._write(force=True)

    def role_usage(self) -> dict[str, RoleUsage]:
        return self.log.usage_by_role(self.run_id)

    def results(self) -> ResultSource:
        return StoredResults(self.log, self.run_id)

    def started_at(self, default: str) -> str:
        return self.log.require(self.run_id).started_at or default
