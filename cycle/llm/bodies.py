"""Answers of bounded size: an HTTP transport that reads every body under a cap, after
decompression.

A server (or a proxy in front of it) may answer with a body far larger than any answer
cycle asked for: a 2 MB gzip body that inflates to 2 GB took all the memory of the
process and ended in an uncaught panic of the JSON parser. Every provider and agent
endpoint cycle calls over HTTP goes through a capped transport (``cap_client``): it
asks for gzip or deflate only, reads the body as it arrives, inflates it chunk by chunk
and stops at the limit with a ``MalformedResponseError`` that names the server and the
limit (the setting ``providers.<name>.max_response_mb``), before the SDK sees a byte.
"""

from __future__ import annotations

import zlib
from typing import Any

from cycle.errors import MalformedResponseError

#: the default cap, in MB: a model's answer is kilobytes, a batch file megabytes
DEFAULT_MB = 64.0

_ASKED = "gzip, deflate"


#: what the error of a body past the cap says of the limit, for a provider's client
PROVIDER_LIMIT = "providers.<name>.max_response_mb raises the limit"


def cap_client(client: Any, *, limit_mb: float = DEFAULT_MB, limit: str = PROVIDER_LIMIT) -> Any:
    """``client`` (an httpx or httpx2 ``AsyncClient``) with every transport it routes
    through, its proxies' too, reading bodies under ``limit_mb`` megabytes. The client
    keeps everything else it was built with (limits, proxies from the environment,
    timeouts): only its transports are wrapped. ``limit``: what the error of a body
    past the cap says of the limit (where to raise it, or that it is fixed)."""
    import importlib

    # httpx or httpx2, as the client was built with (its class may be an SDK's subclass)
    httpx = importlib.import_module(type(client._transport).__module__.split(".")[0])
    size = int(limit_mb * 1024 * 1024)
    client._transport = _capped(httpx, client._transport, size, limit)
    client._mounts = {pattern: None if t is None else _capped(httpx, t, size, limit)
                      for pattern, t in client._mounts.items()}
    return client


def _capped(httpx: Any, inner: Any, limit: int, said: str) -> Any:
    class CappedTransport(httpx.AsyncBaseTransport):  # type: ignore[misc, name-defined]
        async def handle_async_request(self, request: Any) -> Any:
            request.headers["Accept-Encoding"] = _ASKED
            response = await inner.handle_async_request(request)
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                return response  # a stream is read as it comes, and stopped, by its reader
            try:
                body = await _read(response, limit, str(request.url.host), said)
            except httpx.TransportError as e:
                # cut on its way: an answer the server generated, which it may bill (the
                # provider reads this mark: ``answered_when_cut``)
                if 200 <= response.status_code < 300:
                    e.cycle_answered = True
                raise
            finally:
                await response.aclose()
            headers = [(k, v) for k, v in response.headers.items()
                       if k.lower() not in ("content-encoding", "content-length",
                                            "transfer-encoding")]
            return httpx.Response(response.status_code, headers=headers, content=body,
                                  request=request, extensions=response.extensions)

        async def aclose(self) -> None:
            await inner.aclose()

    return CappedTransport()


async def _read(response: Any, limit: int, host: str, said: str = PROVIDER_LIMIT) -> bytes:
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("gzip", "x-gzip"):
        inflate: Any = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        inflate = zlib.decompressobj()
    elif encoding in ("", "identity"):
        inflate = None
    else:
        raise MalformedResponseError(
            f"{host} answered in the encoding '{encoding}', which cycle did not ask for "
            f"(it asks for {_ASKED})")
    out = bytearray()
    async for chunk in response.aiter_raw():
        while chunk:
            if inflate is None:
                piece, chunk = chunk, b""
            else:
                # never more than the room left (+1, to know it was passed): a bomb is
                # stopped at the limit, not inflated first
                piece = inflate.decompress(chunk, limit - len(out) + 1)
                chunk = inflate.unconsumed_tail
            out += piece
            if len(out) > limit:
                raise MalformedResponseError(
                    f"{host} answered more than {limit / 2**20:g} MB"
                    + (" once inflated" if inflate is not None else "")
                    + f"; cycle stopped reading it ({said})")
            if inflate is not None and not piece:
                break
    if inflate is not None:
        out += inflate.flush()
    return bytes(out)


def answered_when_cut(error: BaseException) -> bool:
    """Whether a transport error cut a successful answer's body on its way (its headers
    came: the server generated it, and may bill it)."""
    return bool(getattr(error, "cycle_answered", False))
