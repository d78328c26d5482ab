"""Running a coroutine to completion from synchronous code."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


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
