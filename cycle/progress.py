"""A progress line on stderr while a suite runs: a subscriber of the event bus.

    bus.subscribe(Progress())

On a terminal it redraws one line (bar, iterations done/total, failures,
errors, cost so far) at most ten times a second; elsewhere (a CI log) it
prints a line at every tenth of the work, so logs stay short.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from cycle.events import (
    BatchProgress,
    CaseFinished,
    ConcurrencyChanged,
    Event,
    RunFinished,
    RunStarted,
)


class Progress:
    """Draws the progress of runs from RunStarted / CaseFinished / RunFinished events."""

    def __init__(self, stream: TextIO | None = None, *, interval: float = 0.1,
                 offline: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval
        self.offline = offline
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = self.done = self.failed = self.errors = self.ended = 0
        self.cost = 0.0
        self._last = 0.0
        # tenths of the work printed so far (integers: summing 0.1s skipped the 3rd line)
        self._tenths = 0
        self._run_id = ""
        #: provider -> its latest limit of calls in flight, once it rate-limited a call
        self.throttled: dict[str, ConcurrencyChanged] = {}
        #: batch jobs not ended yet, by id, as last told
        self.jobs: dict[str, BatchProgress] = {}

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.total, self.done, self.failed, self.errors, self.ended, self.cost = (
                event.iterations_in_all, event.done, 0, 0, 0, 0.0)
            self._run_id, self._tenths = event.run_id, 0
            if self.tty:
                self._draw(force=True)
            else:
                before = f", {self.done} judged before" if self.done else ""
                self.stream.write(f"running {self._run_id}: {self.total} iterations{before}\n")
                self.stream.flush()
        elif isinstance(event, CaseFinished):
            self.done += 1
            self.cost += event.cost
            if event.status == "terminated":
                self.ended += 1  # a limit, not an error
            elif event.error is not None:
                self.errors += 1
            elif event.passed is False:
                self.failed += 1
            self._draw()
        elif isinstance(event, ConcurrencyChanged):
            self.throttled[event.provider] = event
            self._draw()
        elif isinstance(event, BatchProgress):
            if event.done or event.state == "live":
                self.jobs.pop(event.job_id, None)
            else:
                self.jobs[event.job_id] = event
            if not self.tty and event.milestone:
                # a job takes minutes to hours: a log says when each starts and ends
                self.stream.write(event.logged + "\n")
                self.stream.flush()
            self._draw()
        elif isinstance(event, RunFinished):
            self._draw(force=True)
            if self.tty:
                self.stream.write("\n")
                self.stream.flush()

    def line(self) -> str:
        width = 24
        share = self.done / self.total if self.total else 1.0
        filled = int(width * min(1.0, share))
        bar = "#" * filled + "-" * (width - filled)
        tag = " [offline model]" if self.offline else ""
        ended = f"  {self.ended} ended by a limit" if self.ended else ""
        slowed = "".join(f"  {e.shown}" for e in [*self.throttled.values(), *self.jobs.values()])
        return (f"[{bar}] {self.done}/{self.total} iterations  {self.failed} failed  "
                f"{self.errors} errors{ended}  ${self.cost:.4f}{slowed}{tag}")

    def _draw(self, *, force: bool = False) -> None:
        if self.tty:
            now = time.monotonic()
            if not force and now - self._last < self.interval:
                return
            self._last = now
            from cycle.safetext import REDRAW, raw

            # the redraw is cycle's own, written past the terminal filter; the line is
            # filtered like any other text (a provider's name in it is from outside)
            raw(self.stream).write(REDRAW)
            self.stream.write(self.line())
            self.stream.flush()
            return
        # the header is RunStarted's: a run resumed with nothing left ends with done at 0,
        # and printed it a second time
        tenths = self.done * 10 // self.total if self.total else 10
        if tenths > self._tenths:
            self._tenths = tenths
            self.stream.write(self.line() + "\n")
        self.stream.flush()
