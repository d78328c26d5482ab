"""A loopback agent endpoint, as tool-forge's contract (and ``agent: {http: ...}``) calls one:
``POST {"message": ...}`` answering ``{"response": ..., "toolCalls": [...]}``.

    with AgentEndpoint(lambda body: {"response": "hi", "toolCalls": []}) as endpoint:
        endpoint.url            # http://127.0.0.1:PORT/chat
        endpoint.requests       # the bodies received

The answer function gets the request body; it may return a dict (sent as JSON), or an
``(status, text)`` pair for a failure. ``delay`` seconds pass before each answer (threads:
many requests wait together, as a real agent's would).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[dict[str, Any]], "dict[str, Any] | tuple[int, str]"]


class AgentEndpoint:
    def __init__(self, answer: Answer, *, delay: float = 0.0, path: str = "/chat") -> None:
        self.answer = answer
        self.delay = delay
        self.path = path
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a production server
            disable_nagle_algorithm = True  # headers and body leave at once, not 40 ms apart

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with endpoint._lock:
                    endpoint.requests.append(body)
                if endpoint.delay:
                    time.sleep(endpoint.delay)
                try:
                    out = endpoint.answer(body)
                except Exception as e:  # noqa: BLE001 - an agent that crashes answers 500
                    out = (500, f"agent crashed: {e}")
                if isinstance(out, tuple):
                    status, data = out[0], out[1].encode()
                    kind = "text/plain"
                else:
                    status, data, kind = 200, json.dumps(out).encode(), "application/json"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.path}"

    def start(self) -> AgentEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> AgentEndpoint:  # noqa: PYI034 - start() returns self
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
