"""How many calls may be in flight to one provider: the configured number at most, less
while the provider says it is overloaded.

A provider that answers 429 (rate limited) is telling the client to slow down; retrying
each call after its wait while keeping every slot busy keeps the storm going. So the
limit adapts as TCP's congestion window does (additive increase, multiplicative
decrease): a rate-limited answer halves it (at least 1), once per round trip: the 429s of
calls sent before the cut are the same overload and do not cut it again; a whole limit's
worth of answers raises it by one, back to the configured ceiling. One limit per
provider endpoint (and event loop): the agent's and the judge's calls to one account share
its rate limit.
"""

from __future__ import annotations

import asyncio
import collections
import time


class AdaptiveLimit:
    """A semaphore whose size follows the provider: ``sent = await acquire()``, the call,
    ``release()``; then ``answered()`` or, on a 429, ``throttle(sent)``."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = max(1, ceiling)
        #: calls that may be in flight now
        self.current = self.ceiling
        self.in_flight = 0
        self._answers = 0  # since the limit last changed
        #: rate-limited answers seen, and cuts made
        self.throttled = 0
        self.cuts = 0
        self._cut_at = 0.0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def acquire(self) -> float:
        """Wait for a slot; returns when the call is sent (what ``throttle`` compares)."""
        if self.in_flight < self.current and not self._waiters:
            self.in_flight += 1
            return time.monotonic()
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # the slot is ours when it resolves (release counts it for us)
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # given a slot just as we were cancelled: hand it on
            else:
                self._waiters.remove(waiter)
            raise
        return time.monotonic()

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.current:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    def answered(self) -> bool:
        """A call was answered: additive increase. True when the limit grew."""
        if self.current >= self.ceiling:
            return False
        self._answers += 1
        if self._answers < self.current:
            return False
        self._answers = 0
        self.current += 1
        self._wake()
        return True

    def throttle(self, sent_at: float) -> bool:
        """A call sent at ``sent_at`` was rate limited: multiplicative decrease, unless a
        cut was made since it was sent. True when the limit was cut."""
        self.throttled += 1
        if sent_at < self._cut_at:
            return False
        self._cut_at = time.monotonic()
        self.cuts += 1
        self._answers = 0
        before, self.current = self.current, max(1, self.current // 2)
        return self.current != before
