"""A loopback agent endpoint, as tool-forge's contract (and ``agent: {http: ...}``) calls one:
``POST {"message": ...}`` answering ``{"response": ..., "toolCalls": [...]}``.

    with AgentEndpoint(lambda body: {"response": "hi", "toolCalls": []}) as endpoint:
        endpoint.url            # http://127.0.0.1:PORT/chat
        endpoint.requests       # the bodies received

The answer function gets the request body; it may return a dict (sent as JSON), or an
``(status, text)`` pair for a failure; it runs in a worker thread, so it may block. ``delay``
seconds pass between a request's arrival and its answer, waited on the event loop: the
loopback server's own HTTP (asyncio, keep-alive), so a benchmark measures the client, not a
thread per connection contending for the interpreter.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from cycle.testing.server import LoopbackServer, wait_out

Answer = Callable[[dict[str, Any]], "dict[str, Any] | tuple[int, str]"]


class AgentEndpoint(LoopbackServer):
    def __init__(self, answer: Answer, *, delay: float = 0.0, path: str = "/chat") -> None:
        super().__init__(latency=delay, record=False)
        self.answer = answer
        self.path = path
        self._bodies: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"{self.base_url}{self.path}"

    @property
    def requests(self) -> list[dict[str, Any]]:  # type: ignore[override]
        """The request bodies received so far (a copy)."""
        with self._lock:
            return list(self._bodies)

    async def _dispatch(self, method: str, path: str, headers: dict[str, str], raw: bytes, *,
                        arrived: float | None = None, asked: list[Any] | None = None,
                        ) -> tuple[int, dict[str, str], bytes]:
        if method != "POST" or path != self.path:
            return 404, {}, json.dumps({"error": f"no route {method} {path}"}).encode()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return 400, {}, b'{"error": "the body is not JSON"}'
        with self._lock:
            self._count += 1
            self._bodies.append(body)
        try:
            out = await asyncio.to_thread(self.answer, body)
        except Exception as e:  # noqa: BLE001 - an agent that crashes answers 500
            out = (500, f"agent crashed: {e}")
        await wait_out(self.latency, arrived)
        if isinstance(out, tuple):
            return out[0], {}, out[1].encode()
        return 200, {}, json.dumps(out).encode()
