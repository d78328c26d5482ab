"""Reading the store in a worker thread, as the Runs and Case screens do (a large run takes
a moment to read: the screen stays responsive meanwhile).

A worker thread never uses the app's connection: it reads through one of its own
(``Store.reopen``), opened and closed in the thread. Textual does not wait for a thread
worker when the app exits (it cancels the worker, which cannot stop a thread), and the
app's store is closed as soon as the app has returned (``cycle tui``'s ``with``): a
SQLite connection closed while another thread is inside one of its statements crashes
the process. With a connection of its own, what a late worker still reads is read from
a connection nobody else closes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from textual.worker import get_current_worker

if TYPE_CHECKING:
    from textual.screen import Screen

    from cycle.store import Store

T = TypeVar("T")


def read_in_thread(store: Store, read: Callable[[Store], T]) -> T:
    """``read(own)`` on a connection of this thread's own to ``store``, closed after it."""
    with store.reopen() as own:
        return read(own)


def deliver(screen: Screen[object], show: Callable[[T], None], value: T) -> None:
    """From a worker thread: ``show(value)`` in the UI thread, unless the worker was
    cancelled meanwhile (its screen left, the app closing), the screen is gone or the app
    has closed (nothing is left to show it on)."""
    worker = get_current_worker()
    if worker.is_cancelled:
        return
    app = screen.app

    def shown() -> None:
        if screen.is_attached and not worker.is_cancelled:
            show(value)

    try:
        app.call_from_thread(shown)
    except RuntimeError:
        if app.is_running:
            raise  # not the app's having closed: the screen's own error

