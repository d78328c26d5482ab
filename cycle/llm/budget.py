"""A hard dollar cap shared by every model of a run or a cycle.

``Model`` calls ``check()`` before each call, so a call that would start
after the cap is reached is never made, and ``add()`` after it with the
call's cost. Concurrent calls that passed the check before the cap was
reached still finish, so the final spend can overshoot by at most the calls
in flight.
"""

from __future__ import annotations

import threading

from cycle.errors import BudgetExceededError


class Budget:
    """Spent dollars against an optional limit, per role too."""

    def __init__(self, limit: float | None) -> None:
        if limit is not None and limit < 0:
            raise ValueError(f"budget limit must be >= 0, got {limit}")
        self.limit = limit
        self.spent = 0.0
        self.by_role: dict[str, float] = {}
        #: whether any charged cost came from a guessed price
        self.estimated = False
        # add() may be called from worker threads (sync facades), keep totals exact
        self._lock = threading.Lock()

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

    def add(self, cost: float, role: str, *, estimated: bool = False) -> None:
        """Charge ``cost`` dollars to ``role``."""
        with self._lock:
            self.spent += cost
            self.by_role[role] = self.by_role.get(role, 0.0) + cost
            self.estimated = self.estimated or estimated

    def __repr__(self) -> str:
        return f"Budget(limit={self.limit}, spent={self.spent:.6f})"
