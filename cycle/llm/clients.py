"""SDK clients shared by every model with the same endpoint and settings.

An SDK client holds an httpx connection pool, which belongs to one event loop; a second
pool for the same server costs about 9% more CPU per call (measured with the OpenAI SDK:
the agent and the judge on one server). So each provider keeps one ``SharedClients``:
per event loop, one client per settings key, made on first use and closed when the last
model holding it is closed.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

Client = TypeVar("Client")


class SharedClients(Generic[Client]):
    """One client per (event loop, settings key), counted by the models that hold it."""

    def __init__(self, close: Callable[[Client], Awaitable[object]]) -> None:
        self._close = close
        #: per loop: key -> [client, holders]
        self._entries: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[Hashable, list]] = weakref.WeakKeyDictionary()
        #: per loop: holder -> the key it holds
        self._held: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, weakref.WeakKeyDictionary[object, Hashable]
        ] = weakref.WeakKeyDictionary()
        #: holder -> (loop, client): a model's every call after its first finds its
        #: client here, without the two lookups per loop
        self._bound: weakref.WeakKeyDictionary[object, tuple[asyncio.AbstractEventLoop, Client]] = (
            weakref.WeakKeyDictionary())

    def get(self, holder: object, key: Hashable, make: Callable[[], Client]) -> Client:
        """The client for ``key`` on the running loop (``make`` builds it the first time);
        ``holder`` holds it until ``release``."""
        loop = asyncio.get_running_loop()
        bound = self._bound.get(holder)
        if bound is not None and bound[0] is loop:
            return bound[1]
        entries = self._entries.setdefault(loop, {})
        entry = entries.get(key)
        if entry is None:
            entry = entries[key] = [make(), 0]
        held = self._held.setdefault(loop, weakref.WeakKeyDictionary())
        if held.get(holder) != key:
            held[holder] = key
            entry[1] += 1
        self._bound[holder] = (loop, entry[0])
        return entry[0]

    async def release(self, holder: object) -> None:
        """``holder`` lets go of its client on the running loop; the last one closes it."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._bound.pop(holder, None)
        key = self._held.get(loop, {}).pop(holder, None)
        if key is None:
            return
        entries = self._entries.get(loop, {})
        entry = entries.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del entries[key]
                await self._close(entry[0])
