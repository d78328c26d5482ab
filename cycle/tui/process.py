"""The cycle in its own process, talking to the app over a pipe.

A cycle that computes without waiting (the offline model, a fast local
server) run in a thread of the app shares one GIL with the UI: every frame
drawn is time taken from the cycle, and the hand-offs between the two threads
cost more than the drawing itself (benchmarks/RESULTS.md). So on Linux the app
forks the cycle into a child process, and each gets a core. (Elsewhere fork is
unsafe once a process has threads and system frameworks loaded, so the same
child runs in a thread instead: same protocol, same code.)

The child awaits ``cycle(bus, reviewer)`` on its own asyncio loop. Its bus
sends the events to the app in batches, its reviewer asks the app and awaits
the answer, and a message from the app cancels it, which leaves the cycle
interrupted and resumable. If the app dies, the pipe closes and the child
interrupts its cycle the same way. The store is shared through its file (WAL
lets several processes read and write).

Messages are pickled by the sender, so a value that cannot cross the pipe
fails where it is made, not half-written:

    child -> app   ("events", [Event, ...])       every BATCH_INTERVAL while events come
                   ("review", n, ReviewRequest)   the loop awaits a decision
                   ("done", CycleOutcome)         the cycle ended; its events went first
    app -> child   ("decided", n, [Suggestion])   the person's decisions on review n
                   ("cancel",)                    interrupt the cycle (it stays resumable)
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from typing import Any

from msgspec import Struct

from cycle.authors import current_author
from cycle.errors import CycleError, describe
from cycle.events import Event, EventBus
from cycle.loop.review import Reviewer
from cycle.records import ReviewRequest, Suggestion

#: what the app runs: given the bus to emit on and the reviewer to ask, run the cycle
CycleRun = Callable[[EventBus, Reviewer], Awaitable[Any]]

#: seconds the child gathers events before sending them: the app redraws at
#: most 5 times a second, and one pickled batch costs far less than many
BATCH_INTERVAL = 0.1

#: "process" where fork is safe, else "thread"
DEFAULT_HOST = "process" if sys.platform.startswith("linux") else "thread"


class CycleOutcome(Struct, frozen=True):
    """How the cycle run by the app ended."""

    #: "finished", "interrupted" (the user quit mid-cycle: resumable) or "failed"
    status: str
    #: what the cycle coroutine returned (the CycleResult) when finished
    result: Any = None
    #: the exception it raised when failed
    error: BaseException | None = None


def _send(conn: Connection, lock: threading.Lock, message: tuple[Any, ...]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    with lock:
        conn.send_bytes(data)


# -- the app's side --------------------------------------------------------


class CycleProcess:
    """Runs a cycle in a child (process or thread) and relays what it says.

    ``start`` launches it; ``relay`` (in a thread of the app's: it blocks on the
    pipe) hands each event to ``emit`` and each review request to ``ask``, and
    returns the outcome when the cycle ends. ``cancel`` may be called from any
    thread.
    """

    def __init__(self, cycle: CycleRun, *, host: str = DEFAULT_HOST) -> None:
        if host not in ("process", "thread"):
            raise ValueError(f"host must be 'process' or 'thread', not {host!r}")
        self.cycle = cycle
        self.host = host
        self._conn, self._child_conn = multiprocessing.Pipe()
        self._lock = threading.Lock()  # one message at a time on the pipe
        self._start_lock = threading.Lock()
        self._cancelled = False
        self._process: multiprocessing.process.BaseProcess | None = None
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._process is not None or self._thread is not None

    def start(self) -> None:
        """Launch the child, unless the cycle was cancelled before it began."""
        with self._start_lock:
            if not self._cancelled:
                self._launch()

    def _launch(self) -> None:
        if self.host == "process":
            # (the app has frozen its long-lived objects with gc.freeze() by
            # now: the child inherits them frozen, so its full collections skip them)
            context = multiprocessing.get_context("fork")
            self._process = context.Process(target=_child_main,
                                            args=(self.cycle, self._child_conn, self._conn),
                                            name="cycle", daemon=True)
            self._process.start()
            self._child_conn.close()  # the child holds its end: EOF here when it dies
        else:
            self._thread = threading.Thread(target=_serve_child, args=(self.cycle, self._child_conn),
                                            name="cycle", daemon=True)
            self._thread.start()

    def relay(self, emit: Callable[[Event], None],
              ask: Callable[[ReviewRequest, Callable[[list[Suggestion]], None]], None]) -> CycleOutcome:
        """Deliver the child's events and review requests until it ends; its outcome."""
        if not self.started:
            return CycleOutcome("interrupted")  # cancelled before it began
        while True:
            try:
                message = pickle.loads(self._conn.recv_bytes())
            except (EOFError, OSError):
                return self._lost()
            kind = message[0]
            if kind == "events":
                for event in message[1]:
                    emit(event)
            elif kind == "review":
                number = message[1]
                ask(message[2], lambda suggestions, n=number: self._reply(("decided", n, suggestions)))
            elif kind == "done":
                self.join()
                return message[1]

    def cancel(self) -> None:
        """Ask the cycle to stop (it is marked interrupted, so it can be resumed)."""
        with self._start_lock:
            self._cancelled = True
        self._reply(("cancel",))

    def join(self, timeout: float = 30.0) -> None:
        """Wait for the child to exit; a process that will not is killed."""
        if self._process is not None:
            self._process.join(timeout)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(5)
        elif self._thread is not None:
            self._thread.join(timeout)

    def _reply(self, message: tuple[Any, ...]) -> None:
        # the child may be gone already (it ended, or died): nobody is listening
        with contextlib.suppress(OSError):
            _send(self._conn, self._lock, message)

    def _lost(self) -> CycleOutcome:
        self.join(5)
        code = self._process.exitcode if self._process is not None else None
        return CycleOutcome("failed", error=CycleError(
            f"the cycle's process ended without a word (exit code {code})",
            hint="Its results so far are in the store: resume it with cycle improve cycle.yaml --resume",
        ))


# -- the child's side ------------------------------------------------------


def _child_main(cycle: CycleRun, conn: Connection, app_end: Connection) -> None:
    """The forked process: quiet, deaf to the terminal's signals, then the cycle."""
    # the fork copied the app's end of the pipe too: while the child held it,
    # the app's death would not close the pipe, and the child would never know
    app_end.close()
    # the app decides when the cycle stops (Ctrl-C is a key to it, and it
    # sends "cancel"); a SIGINT to the whole process group must not kill the
    # child's cycle half-way through a write
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # asyncio's wake-up fd is the app's loop's: a signal here must not wake it
    signal.set_wakeup_fd(-1)
    # the terminal belongs to the app: a stray print or warning would tear its
    # screen (both the descriptors and Python's streams, which the app replaced)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 -- for the child's life
    _serve_child(cycle, conn, process=True)


def _serve_child(cycle: CycleRun, conn: Connection, *, process: bool = False) -> None:
    """Run the cycle on a new asyncio loop in this thread, then say how it ended."""
    lock = threading.Lock()
    with asyncio.Runner() as runner:
        outcome = runner.run(_serve(cycle, conn, lock, process=process))
    try:
        _send(conn, lock, ("done", _portable(outcome)))
    except OSError:
        pass  # the app is gone; the store has the cycle's state
    finally:
        conn.close()


def _portable(outcome: CycleOutcome) -> CycleOutcome:
    """The outcome, made to survive pickling: an exception or result that cannot
    cross the pipe becomes a CycleError that says what it was."""
    try:
        pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        return outcome
    except Exception as e:  # noqa: BLE001 -- any pickling failure
        if outcome.error is not None:
            error = CycleError(describe(outcome.error))
            error.exit_code = getattr(outcome.error, "exit_code", 4)
            error.__notes__ = list(getattr(outcome.error, "__notes__", []))
            return CycleOutcome("failed", error=error)
        return CycleOutcome("failed", error=CycleError(
            f"the cycle finished but its result could not be passed back ({describe(e)})",
            hint="Its results are in the store: cycle cycles lists it"))


class _EventSender:
    """A bus subscriber that sends the events to the app in batches."""

    def __init__(self, conn: Connection, lock: threading.Lock, gone: Callable[[], None]) -> None:
        self._conn = conn
        self._lock = lock
        self._gone = gone
        self._batch: list[Event] = []

    def __call__(self, event: Event) -> None:
        self._batch.append(event)

    def flush(self) -> None:
        batch, self._batch = self._batch, []
        if batch:
            self.send(("events", batch))

    def send(self, message: tuple[Any, ...]) -> None:
        try:
            _send(self._conn, self._lock, message)
        except OSError:
            self._gone()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(BATCH_INTERVAL)
            self.flush()


class _PipeReviewer:
    """A ``Reviewer`` that asks the app and awaits its answer."""

    name = "tui"

    @property
    def author(self) -> str:
        """The person at the app: the cycle's process is theirs (forked or a thread of it)."""
        return current_author()

    def __init__(self, sender: _EventSender) -> None:
        self._sender = sender
        self._waiting: dict[int, asyncio.Future[list[Suggestion]]] = {}
        self._count = 0

    async def review(self, request: ReviewRequest) -> list[Suggestion]:
        self._count += 1
        number = self._count
        future: asyncio.Future[list[Suggestion]] = asyncio.get_running_loop().create_future()
        self._waiting[number] = future
        self._sender.flush()  # the dashboard shows everything up to the question
        self._sender.send(("review", number, request))
        try:
            return await future
        finally:
            self._waiting.pop(number, None)

    def answer(self, number: int, suggestions: list[Suggestion]) -> None:
        future = self._waiting.get(number)
        if future is not None and not future.done():
            future.set_result(suggestions)


async def _serve(cycle: CycleRun, conn: Connection, lock: threading.Lock, *, process: bool) -> CycleOutcome:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def stop() -> None:
        # cancelling the cycle's task makes the loop mark the cycle interrupted
        loop.call_soon(task.cancel)

    sender = _EventSender(conn, lock, gone=stop)
    reviewer = _PipeReviewer(sender)
    bus = EventBus()
    bus.subscribe(sender)

    def readable() -> None:
        try:
            message = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):  # the app is gone
            loop.remove_reader(conn.fileno())
            stop()
            return
        if message[0] == "cancel":
            stop()
        elif message[0] == "decided":
            reviewer.answer(message[1], message[2])

    loop.add_reader(conn.fileno(), readable)
    if process:
        # a SIGTERM (the app's exit terminating its daemon child, a kill) ends
        # the cycle as the app's "cancel" would: interrupted, resumable
        loop.add_signal_handler(signal.SIGTERM, stop)
    flusher = asyncio.create_task(sender.run())
    try:
        outcome = CycleOutcome("finished", result=await cycle(bus, reviewer))
    except (asyncio.CancelledError, KeyboardInterrupt):
        outcome = CycleOutcome("interrupted")
    except BaseException as e:  # noqa: BLE001 -- passed to the app, which shows it
        e.add_note(f"raised in the cycle's child:\n{traceback.format_exc()}")
        outcome = CycleOutcome("failed", error=e)
    finally:
        flusher.cancel()
        with contextlib.suppress(OSError, ValueError):
            loop.remove_reader(conn.fileno())
        sender.flush()
    return outcome
