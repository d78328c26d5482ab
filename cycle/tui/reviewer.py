"""The TUI reviewer: the loop awaits a person's decision on the Review screen.

``review`` may be awaited on the app's own asyncio loop or, as when the cycle
runs in a worker thread, on another loop: it posts a message to the app
(``post_message`` is thread-safe) and awaits a ``concurrent.futures.Future``
that the Review screen resolves on submit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import TYPE_CHECKING

from textual.message import Message

from cycle.improve.suggestion import ReviewRequest, Suggestion

if TYPE_CHECKING:
    from textual.app import App


class ReviewRequested(Message):
    """The loop asks the app to open the Review screen."""

    def __init__(self, request: ReviewRequest, reply: concurrent.futures.Future[list[Suggestion]]) -> None:
        super().__init__()
        self.request = request
        self.reply = reply


class TuiReviewer:
    """A ``Reviewer`` (cycle.improve.suggestion) that asks the person at the TUI."""

    name = "tui"

    def __init__(self, app: App[object]) -> None:
        self.app = app

    async def review(self, request: ReviewRequest) -> list[Suggestion]:
        reply: concurrent.futures.Future[list[Suggestion]] = concurrent.futures.Future()
        self.app.post_message(ReviewRequested(request, reply))
        # cancelling this await (the user quit) cancels `reply` too, and the
        # app closes the Review screen when it sees the cycle end
        return await asyncio.wrap_future(reply)
