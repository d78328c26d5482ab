"""EventBus -> TUI, throttled.

The loop may emit thousands of events a second. Posting a Textual message per
event would flood the screen, so the bridge only queues them (a deque append:
cheap and safe from the loop's thread) and the app drains the queue on a timer
at most ``rate`` times a second, handing each batch to the dashboard at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from cycle.events import Event, EventBus

#: redraws per second at most. 5 rather than 10: at 10 the redraws of a fast
#: offline run took ~17% of the cycle's throughput (one GIL), at 5 under 10%
#: (benchmarks/RESULTS.md), and a 200 ms frame still reads as live
DEFAULT_RATE = 5.0


class EventBridge:
    """A bus subscriber that batches events for the UI thread.

    ``__call__`` runs in whatever thread emits (the loop's); ``drain`` runs on
    the app's timer. ``deque.append``/``popleft`` are atomic, so no lock.
    """

    def __init__(self) -> None:
        self._queue: deque[Event] = deque()
        self._unsubscribe: Callable[[], None] | None = None

    def __call__(self, event: Event) -> None:
        self._queue.append(event)

    def attach(self, bus: EventBus) -> None:
        """Subscribe to ``bus`` (once)."""
        self.detach()
        self._unsubscribe = bus.subscribe(self)

    def detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def drain(self) -> list[Event]:
        """Every event queued so far, oldest first."""
        queue = self._queue
        batch: list[Event] = []
        # pop only what is there now: the loop may keep appending meanwhile
        for _ in range(len(queue)):
            batch.append(queue.popleft())
        return batch

    @property
    def pending(self) -> int:
        return len(self._queue)
