"""Running a coroutine to completion from synchronous code; calling a user's function
from a coroutine without blocking the event loop.

A user's function during an iteration (``call_user_function``):

Mocks, user agents, bridges (``format_prompt``/``format_response``), end conditions,
``python`` checks and function users are the user's code. A plain (sync) one runs in a
worker thread, so one that blocks (``time.sleep``, ``requests``) slows only its own
case, never the other cases running concurrently on the same event loop; it is bounded
by the iteration's timeout (``run.timeout`` cancels the await; the thread itself cannot
be killed and finishes in the background: the threads are daemons, so one stuck for
good does not keep cycle from exiting). An async one is awaited on the loop.

What such a function raises is an error of the iteration naming it (seed 000: "the eval
fails with a clear error indicating the user agent was the source"), never something
the agent under test sees and may talk its way past.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from cycle.errors import EvalError

T = TypeVar("T")


def at_once(coro: Coroutine[Any, Any, T], what: str) -> T:
    """Run a coroutine that never suspends (it awaits nothing that waits) to its end, here,
    without an event loop; ``what`` names it if it does suspend (a bug)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError(f"{what} suspended (a bug in cycle: please report it)")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, with the result handed back beside the task, not as its result.

    On Python 3.11, ``asyncio.run`` restores the SIGINT handler at the end by way of
    ``signal.getsignal``, which formats the repr of its own handler: a partial holding the
    main task, whose repr formats the task's result. A run's result holds every trace; at
    1,000 cases that repr cost 1.3 s of CPU (benchmarks/RESULTS.md, eval files).
    """
    held: list[T] = []

    async def main() -> None:
        held.append(await coro)

    asyncio.run(main())
    return held[0]

class UserFunctionError(EvalError):
    """A function of the user's (a mock, user agent, bridge, condition, check) raised."""


async def call_user_function(fn: Callable[..., Any], *args: Any, what: str) -> Any:
    """``fn(*args)``: a sync function in a worker thread (with this context's variables),
    an awaitable result awaited. What it raises becomes a ``UserFunctionError`` naming
    ``what`` ("mock function mypkg.mocks:refund of tool 'refund'"); cycle's own errors
    (an unmocked tool reached from inside it) and cancellation pass as they are."""
    try:
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
                type(fn).__call__):  # an async function, or an object with an async __call__
            value = fn(*args)
        else:
            value = await in_thread(fn, *args)
        if inspect.isawaitable(value):
            value = await value
    except (EvalError, asyncio.CancelledError):
        raise
    except Exception as e:
        raise UserFunctionError(f"{what} raised {e.__class__.__name__}: {e}") from e
    return value


#: the worker threads' jobs; a worker is started whenever none is idle, so a blocked
#: function holds its own thread and never delays another case's
_jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
_idle = 0
_idle_lock = threading.Lock()


def _worker() -> None:
    global _idle
    while True:
        _jobs.get()()
        with _idle_lock:
            _idle += 1


def _submit(job: Callable[[], None]) -> None:
    global _idle
    with _idle_lock:
        spawn = _idle == 0
        if not spawn:
            _idle -= 1
    _jobs.put(job)
    if spawn:
        threading.Thread(target=_worker, name="cycle-user-fn", daemon=True).start()


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return  # cancelled: the iteration timed out, the result is dropped
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a daemon worker thread, with this context's variables (the
    iteration's, see cycle.agents.intercept). Unlike ``asyncio.to_thread``, a call that
    never returns does not hold up the end of ``asyncio.run`` or of the process."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    ctx = contextvars.copy_context()

    def job() -> None:
        try:
            value, error = ctx.run(fn, *args), None
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            value, error = None, e
        try:
            loop.call_soon_threadsafe(_settle, future, value, error)
        except RuntimeError:
            pass  # the loop is closed: nobody waits for this any more

    _submit(job)
    return await future
