"""A hard dollar cap shared by every model of a run or a cycle, never exceeded.

Before a call is sent, ``Model`` *reserves* its worst-case cost (the prompt's tokens,
estimated on the high side, plus the most output the call may produce, at the
model's price); when the answer arrives the reservation is *settled* with the real
cost. A call whose worst case does not fit what is left waits while other calls'
reservations are outstanding (they usually settle below their worst case), and when
none is, it is refused with ``BudgetExceededError`` and never sent. So concurrent
calls cannot together cross the cap, whatever their number.
"""

from __future__ import annotations

import asyncio
import math
import threading

from cycle.errors import BudgetExceededError

#: how often a call waiting for reservations to settle looks again (seconds)
_WAIT = 0.005


class Budget:
    """Spent and reserved dollars against an optional limit, per role too."""

    def __init__(self, limit: float | None) -> None:
        if limit is not None and not (math.isfinite(limit) and limit >= 0):
            raise ValueError(f"budget limit must be a finite number >= 0, got {limit}")
        self.limit = limit
        self.spent = 0.0
        #: worst-case costs of the calls in flight, and how many they are
        self.reserved = 0.0
        self._holding = 0
        self.by_role: dict[str, float] = {}
        #: whether any charged cost came from a guessed price
        self.estimated = False
        # calls come from worker threads too (sync facades): keep totals exact
        self._lock = threading.Lock()
        #: the worst case of a call refused for not fitting what was left (the last one)
        self.refused: float | None = None

    @property
    def remaining(self) -> float | None:
        """Dollars left, or None without a limit."""
        return None if self.limit is None else max(0.0, self.limit - self.spent)

    @property
    def exceeded(self) -> bool:
        return self.limit is not None and self.spent >= self.limit

    def check(self) -> None:
        """Raise BudgetExceededError if the limit is reached: no further call may start."""
        if self.exceeded:
            assert self.limit is not None
            raise BudgetExceededError(
                f"cost budget reached: ${self.spent:.4f} spent of ${self.limit:.4f}; no further "
                "model call was made",
                spent=self.spent,
                limit=self.limit,
            )

    async def reserve(self, worst: float) -> float:
        """Hold ``worst`` dollars for a call about to be sent; returns what is held (0
        without a limit). Waits while it does not fit and other reservations may still
        settle; raises BudgetExceededError when it cannot fit."""
        if self.limit is None:
            return 0.0
        while True:
            with self._lock:
                if self.spent + self.reserved + worst <= self.limit:
                    if worst > 0:  # a free call holds nothing (and releases nothing)
                        self.reserved += worst
                        self._holding += 1
                    return worst
                pending = self._holding > 0
            if not pending:
                self.check()
                self.refused = worst
                raise BudgetExceededError(
                    f"cost budget reached: the next call could cost up to ${worst:.4f} and "
                    f"${self.limit - self.spent:.4f} is left of ${self.limit:.4f} "
                    f"(${self.spent:.4f} spent); no further model call was made",
                    spent=self.spent, limit=self.limit)
            await asyncio.sleep(_WAIT)

    def settle(self, held: float, cost: float, role: str, *, estimated: bool = False) -> None:
        """The call answered: release what it held and charge what it cost."""
        with self._lock:
            self._unhold(held)
            self.spent += cost
            self.by_role[role] = self.by_role.get(role, 0.0) + cost
            self.estimated = self.estimated or estimated

    def release(self, held: float) -> None:
        """The call failed before an answer: release what it held."""
        with self._lock:
            self._unhold(held)

    def _unhold(self, held: float) -> None:
        if held:
            self._holding -= 1
            # back to exactly 0 when nothing is held: no float residue left to wait on
            self.reserved = max(0.0, self.reserved - held) if self._holding else 0.0

    def add(self, cost: float, role: str, *, estimated: bool = False) -> None:
        """Charge ``cost`` dollars to ``role`` (spent earlier, e.g. before a resume)."""
        self.settle(0.0, cost, role, estimated=estimated)

    def __repr__(self) -> str:
        return f"Budget(limit={self.limit}, spent={self.spent:.6f}, reserved={self.reserved:.6f})"
