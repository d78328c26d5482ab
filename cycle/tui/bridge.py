"""EventBus -> TUI, throttled.

The loop may emit thousands of events a second. Posting a Textual message per
event would flood the screen, so the bridge only queues them (a deque append:
cheap and safe from the relay thread that emits them, and nothing else happens
there: no formatting, no message) and the app drains the queue on a timer at
most ``rate`` times a second, folding each batch into the dashboard's state at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from cycle.events import Event, EventBus

#: frames per second at most: each drains the queue and redraws the status
#: line and progress bar; the heavier widgets follow at most once a second while
#: a run is fast (``cycle.tui.app.FULL_INTERVAL``). A 200 ms frame reads as
#: live, and costs the UI thread little (benchmarks/RESULTS.md)
DEFAULT_RATE = 5.0


class EventBridge:
    """A bus subscriber that batches events for the UI thread.

    ``__call__`` runs in whatever thread emits (the relay's); ``drain`` runs on
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
