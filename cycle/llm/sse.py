"""A streamed call's decoder that also keeps a body that is not a stream.

Some OpenAI-compatible servers answer ``stream: true`` with a plain JSON chat completion
(or a JSON error) labelled ``text/event-stream``. The SDK's decoder reads it line by line
as events, finds none and drops it: the call had "no chat completion chunk". This
decoder (the SDK's, made by the client cycle builds: ``events_or_body``) looks at the
first piece of each body once: one that starts as JSON, which no line of events does, is
read whole into ``body`` and yields no event, for the provider to read as the call's
answer; any other is decoded as the SDK does, piece by piece, with no extra work a piece.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

try:
    from openai._streaming import SSEDecoder
except ImportError:  # an SDK whose insides moved (see _SDK)
    SSEDecoder: Any = object  # type: ignore[no-redef]

if TYPE_CHECKING:
    from openai._streaming import ServerSentEvent

#: the start of a JSON object or array: what no line of server-sent events starts with
_JSON = re.compile(rb"\s*[{\[]")

#: the SDK's decoder has what this one takes from it (private: looked for, not assumed;
#: an SDK whose insides moved keeps its own decoder, and such a body is "no chunk" again)
_SDK = SSEDecoder is not object and all(
    hasattr(SSEDecoder, name) for name in ("_decode_lines", "_reset", "aiter_bytes"))


class EventsOrBody(SSEDecoder):
    """The SDK's decoder of server-sent events; ``body``: a body that was JSON instead."""

    #: the most of a JSON body read (past it, what came): set per call by its reader
    limit = 1 << 20

    def __init__(self) -> None:
        super().__init__()
        self.body: bytes | None = None

    async def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
        pieces = aiter(iterator)
        first = await anext(pieces, b"")
        if _JSON.match(first):
            self.body = await read_up_to(pieces, self.limit, first)
            return
        # the SDK's own loop (SSEDecoder.aiter_bytes), its first piece already taken
        from openai._streaming import _SSELineDecoder

        decoder = _SSELineDecoder()
        try:
            for sse in self._decode_lines(decoder.feed(first)):
                yield sse
            async for piece in pieces:
                for sse in self._decode_lines(decoder.feed(piece)):
                    yield sse
            for sse in self._decode_lines(decoder.finish()):
                yield sse
        finally:
            self._reset()


def _events_or_body() -> EventsOrBody:
    """The decoder of each stream of a client (its ``_make_sse_decoder``)."""
    return EventsOrBody()


#: what a client's streams decode with (None: the SDK's own, see ``_SDK``)
events_or_body = _events_or_body if _SDK else None


async def read_up_to(pieces: AsyncIterator[bytes], limit: int, data: bytes = b"") -> bytes:
    """``data`` and what follows in ``pieces``, read until past ``limit`` bytes (then what
    came: an answer is not read further); a body cut on its way is what came."""
    import httpx2  # the SDK's HTTP client, whose body this is

    out = bytearray(data)
    try:
        async for piece in pieces:
            out += piece
            if len(out) > limit:
                break
    except httpx2.HTTPError:
        pass  # what came is read as it is
    return bytes(out)
