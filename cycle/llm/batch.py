"""Provider batch jobs: a run's calls sent as OpenAI Batch / Gemini batch-mode jobs, at the
providers' batch prices (half the list price).

With batch on, ``Model`` hands each call to its ``Batcher`` instead of sending it. The
batcher gathers the calls that arrive together (a run's workers make their agent calls at
once, then their judge calls) and, once no new call came for ``window`` seconds or
``max_requests`` are waiting, submits them as one job. It polls the job every ``poll``
seconds, telling its progress on the bus (``BatchProgress``), and hands each call its
answer when the job ends. A multi-turn agent makes one job per turn.

A job's id and the keys of its calls are kept in the ledger (the store) the moment it is
submitted: a run killed while a job runs resumes by polling that job, not by submitting its
calls again (and a call whose answer reached the journal is replayed before it gets here).
A call the job answered with an error, a job that failed or expired, and a provider (or a
compatible server) without batch endpoints raise ``BatchUnavailable``: ``Model`` then
sends that call live, with its usual retries.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from msgspec import Struct

from cycle.errors import describe
from cycle.events import BatchProgress
from cycle.llm.base import BatchRequest, BatchUnsupported, ModelAPI, ModelOutput
from cycle.records.scope import CallScope

if TYPE_CHECKING:
    from cycle.events import EventBus


class BatchLedger(Protocol):
    """Where submitted jobs are kept (the store: cycle.store.batches)."""

    def job_of(self, key: str) -> str | None:
        """The job a call (by its journal key) was submitted in, or None. An ended job is
        still named: a kill between reading its answers and journaling them reads them
        again rather than paying again."""

    def submitted(self, job_id: str, *, model: str, keys: Sequence[str],
                  scope: CallScope) -> None:
        """Keep a job and its calls' keys, durably, before anything waits on it."""

    def ended(self, job_id: str, state: str) -> None:
        """The job ended and its answers were read."""


class BatchSettings(Struct, frozen=True):
    """How a model's calls go out as batch jobs."""

    #: seconds between two looks at a job's state (providers take minutes to hours)
    poll: float = 30.0
    #: a pause this long in new calls sends the gathered ones as a job
    window: float = 1.0
    #: the most calls in one job (OpenAI takes 50,000 and 200 MB, Gemini's inlined 20 MB)
    max_requests: int = 10_000
    #: where jobs are kept so that a killed run resumes them (None: not kept)
    ledger: BatchLedger | None = None


class BatchUnavailable(Exception):
    """This call has no answer from a batch job: it goes live."""


#: failed looks at a job in a row before its calls go live
_POLL_FAILURES = 5


class _Job:
    """One submitted job: followed until it ends, then its answers handed out by key."""

    def __init__(self, batcher: Batcher, job_id: str, *, total: int, resumed: bool) -> None:
        self.batcher = batcher
        self.job_id = job_id
        self.total = total
        self.answers: dict[str, ModelOutput | str] = {}
        self.why = ""
        self.task = asyncio.ensure_future(self._follow(resumed))

    async def _follow(self, resumed: bool) -> None:
        b = self.batcher
        b.tell(job_id=self.job_id, state="resumed" if resumed else "submitted",
               total=self.total)
        failures = 0
        while True:
            try:
                status = await b.api.batch_status(self.job_id)
                failures = 0
            except Exception as e:  # noqa: BLE001 - a look that failed: look again, a few times
                failures += 1
                if failures >= _POLL_FAILURES:
                    self.why = f"the batch job {self.job_id} could not be followed: {describe(e)}"
                    b.tell(job_id=self.job_id, state="lost", done=True, note=self.why)
                    return
                await asyncio.sleep(b.settings.poll)
                continue
            b.tell(job_id=self.job_id, state=status.state, total=status.total or self.total,
                   completed=status.completed, failed=status.failed)
            if status.done:
                break
            await asyncio.sleep(b.settings.poll)
        if status.succeeded:
            try:
                self.answers = await b.api.batch_results(status)
            except Exception as e:  # noqa: BLE001 - its calls go live with the reason
                self.why = f"the answers of batch job {self.job_id} could not be read: {describe(e)}"
        else:
            self.why = f"the batch job {self.job_id} ended {status.state}"
        if b.settings.ledger is not None:
            b.settings.ledger.ended(self.job_id, status.state)
        failed = sum(isinstance(a, str) for a in self.answers.values())
        note = self.why or (f"{failed} of its calls failed in the job: they go live"
                            if failed else "")
        b.tell(job_id=self.job_id, state=status.state, done=True, total=self.total,
               completed=len(self.answers) - failed, failed=failed, note=note)

    async def answer(self, key: str) -> ModelOutput:
        await asyncio.shield(self.task)
        got = self.answers.pop(key, None)
        if isinstance(got, ModelOutput):
            return got
        raise BatchUnavailable(got or self.why or f"batch job {self.job_id} has no answer "
                               "for this call")


class Batcher:
    """A model's calls gathered into batch jobs, in one event loop (see the module doc)."""

    def __init__(self, api: ModelAPI, settings: BatchSettings, *, name: str,
                 bus: EventBus | None = None) -> None:
        self.api = api
        self.settings = settings
        self.name = name
        self.bus = bus
        #: the calls gathered for the next job, each with the future of the job it goes in
        self._waiting: list[tuple[BatchRequest, asyncio.Future[_Job], CallScope]] = []
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._jobs: dict[str, _Job] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: why this provider takes no batch jobs (then every call goes live)
        self.unavailable: str | None = None

    def tell(self, **fields: Any) -> None:
        if self.bus is not None:
            self.bus.emit(BatchProgress(model=self.name, **fields))

    async def call(self, request: BatchRequest, scope: CallScope) -> ModelOutput:
        """The call's answer from a batch job; ``BatchUnavailable`` when it must go live."""
        if self.unavailable is not None:
            raise BatchUnavailable(self.unavailable)
        ledger = self.settings.ledger
        job_id = ledger.job_of(request.key) if ledger is not None else None
        if job_id is not None:  # submitted before a kill: follow that job, do not pay again
            job = self._jobs.get(job_id)
            if job is None:
                job = self._jobs[job_id] = _Job(self, job_id, total=0, resumed=True)
            return await job.answer(request.key)
        loop = asyncio.get_running_loop()
        submitted: asyncio.Future[_Job] = loop.create_future()
        self._waiting.append((request, submitted, scope))
        self._last = loop.time()
        if len(self._waiting) >= self.settings.max_requests:
            self._send()
        elif self._timer is None:
            self._timer = loop.call_later(self.settings.window, self._due)
        job = await submitted
        return await job.answer(request.key)

    def _due(self) -> None:
        # the window runs from the last call gathered: while calls keep coming, wait on
        self._timer = None
        loop = asyncio.get_running_loop()
        left = self._last + self.settings.window - loop.time()
        if left > 0.001 and self._waiting:
            self._timer = loop.call_later(left, self._due)
        else:
            self._send()

    def _send(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        calls, self._waiting = self._waiting, []
        live = [c for c in calls if not c[1].done()]  # a cancelled caller needs no answer
        if live:
            task = asyncio.ensure_future(self._submit(live))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _submit(
        self, calls: list[tuple[BatchRequest, asyncio.Future[_Job], CallScope]],
    ) -> None:
        requests = [r for r, _, _ in calls]
        try:
            job_id = await self.api.batch_submit(requests)
            if self.settings.ledger is not None:
                self.settings.ledger.submitted(job_id, model=self.name,
                                               keys=[r.key for r in requests],
                                               scope=calls[0][2])
        except Exception as e:  # noqa: BLE001 - the calls go live, with the reason told
            why = e.args[0] if isinstance(e, BatchUnsupported) else describe(e)
            if isinstance(e, BatchUnsupported):
                self.unavailable = why
            self.tell(state="live", note=why, total=len(calls))
            for _, future, _ in calls:
                if not future.done():
                    future.set_exception(BatchUnavailable(why))
            return
        job = self._jobs[job_id] = _Job(self, job_id, total=len(calls), resumed=False)
        for _, submitted, _ in calls:
            if not submitted.done():
                submitted.set_result(job)

    async def aclose(self) -> None:
        """Stop following jobs (they go on at the provider; the ledger keeps them)."""
        if self._timer is not None:
            self._timer.cancel()
        for task in [*self._tasks, *(j.task for j in self._jobs.values())]:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


__all__ = ["BatchLedger", "BatchSettings", "BatchUnavailable", "Batcher"]
