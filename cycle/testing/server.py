"""A loopback HTTP server that speaks the OpenAI and Gemini APIs, for tests and benchmarks.

It answers ``POST /v1/chat/completions`` (OpenAI chat completions) and
``POST /{version}/models/{model}:generateContent`` (Gemini) so that the real
SDKs can be driven without the internet: text, tool calls, JSON output for a
requested schema (a value valid for it, unless scripted), usage with cached
tokens, and a configurable latency.

Tests script it per request with a queue; each request takes the next item:

    with LoopbackServer() as srv:
        srv.enqueue(Fault.status(429, retry_after=0.2), "hello")
        model = get_model("openai:gpt-4o-mini", options=srv.openai_options())
        ...
        assert srv.request_count == 2

Queue items: a ``Fault`` (an error status with Retry-After / retry-after-ms,
a malformed body, a slow answer, a dropped connection), a ``Reply`` (text,
tool calls, JSON, usage), a ``str`` (text) or a ``dict`` (JSON content).
With the queue empty, the ``responder`` function decides, else a default
answer (an echo of the last user message, or a schema-valid JSON object).
Every request is recorded (``srv.requests``) for assertions.

In a background thread: ``with LoopbackServer(latency=0.01) as srv``.
As its own process (so a benchmark measures the client, not the server):
``python -m cycle.testing.server --port 8765 --latency 0.1`` prints
``LISTENING http://127.0.0.1:8765`` once it accepts connections.

The server is asyncio with a tiny HTTP/1.1 keep-alive parser: hundreds of
concurrent slow requests cost it almost nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import itertools
import json
import re
import selectors
import signal
import ssl
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, Self

from msgspec import Struct, field
from msgspec.structs import force_setattr

from cycle.llm.base import ProviderOptions
from cycle.llm.compat import schema_in_prompt
from cycle.testing import compat as _compat
from cycle.testing.batches import BatchEngine
from cycle.testing.examples import example_for

Api = Literal["openai", "gemini"]

_GEMINI_PATH = re.compile(r"^/(?P<version>[^/]+)/models/(?P<model>[^/:]+):generateContent$")
_OPENAI_PATHS = ("/v1/chat/completions", "/chat/completions")
_REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    408: "Request Timeout", 413: "Payload Too Large", 422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
    504: "Gateway Timeout",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}
_OPENAI_TYPE = {
    400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
    404: "not_found_error", 429: "rate_limit_error",
}
#: largest request body accepted
MAX_BODY = 32 * 1024 * 1024
#: the internal header of a Fault.cut() answer (never sent)
_CUT = "x-loopback-cut"
#: the extra header that carries a Fault.malformed's label to where the body is written
_LABEL = "x-loopback-label"


# -- what tests put in the queue -------------------------------------------------


class Fault(Struct, frozen=True):
    """A failure the server produces for one request."""

    kind: Literal["status", "malformed", "slow", "disconnect", "bomb", "cut"]
    #: the HTTP status (for kind "status")
    code: int = 500
    retry_after: float | str | None = None
    retry_after_ms: float | None = None
    body: str | None = None
    delay: float = 0.0
    message: str = ""
    #: the answer after a slow delay
    then: Any = None
    #: the body's label (for kind "malformed"; default: JSON, or events for a body of them)
    content_type: str | None = None

    @classmethod
    def status(cls, code: int, *, retry_after: float | str | None = None,
               retry_after_ms: float | None = None, body: str | None = None,
               message: str = "") -> Fault:
        """Answer with HTTP ``code`` (and Retry-After / retry-after-ms headers if given)."""
        return cls("status", code=code, retry_after=retry_after,
                   retry_after_ms=retry_after_ms, body=body, message=message)

    @classmethod
    def malformed(cls, body: str = '{"choices": [ this is not JSON',
                  content_type: str | None = None) -> Fault:
        """Answer 200 with a body that is not a valid response (sent as it is, a streamed
        call's too), labelled ``content_type`` if given."""
        return cls("malformed", code=200, body=body, content_type=content_type)

    @classmethod
    def slow(cls, seconds: float, then: Reply | str | dict | None = None) -> Fault:
        """Wait ``seconds`` more, then answer with ``then`` (default: the usual answer)."""
        return cls("slow", delay=seconds, then=then)

    @classmethod
    def disconnect(cls) -> Fault:
        """Close the connection without answering."""
        return cls("disconnect")

    @classmethod
    def cut(cls, then: Reply | str | dict | None = None) -> Fault:
        """Answer 200 with ``then`` (default: the usual answer), its headers saying its whole
        length, and close the connection halfway through its body (an answer generated,
        and billed, that a network or a proxy dropped on the way)."""
        return cls("cut", code=200, then=then)

    @classmethod
    def bomb(cls, megabytes: int = 2048) -> Fault:
        """Answer 200 with a gzip body of zeros that inflates to ``megabytes`` (a body of
        about a thousandth of that size on the wire)."""
        return cls("bomb", code=200, delay=float(megabytes))


class Reply(Struct, frozen=True):
    """A successful answer. ``json`` (any JSON value) becomes the content as JSON."""

    text: str | None = None
    #: (name, arguments) pairs
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    json: Any = None
    input_tokens: int | None = None
    cached_tokens: int = 0
    output_tokens: int | None = None
    #: "stop", "length", "tool_calls"... (default: from the content)
    finish_reason: str | None = None
    # -- a hostile provider's liberties (issue 32) --
    #: the model name the answer claims (default: the one asked for)
    model: str | None = None
    #: the tool calls' ids, in order (default: call_N_I)
    call_ids: tuple[str, ...] = ()
    #: the usage sent as it is, in place of the counted one: strings, negatives, nulls...
    usage: Any = None
    #: send no usage at all
    no_usage: bool = False

    def __post_init__(self) -> None:
        force_setattr(self, "tool_calls", tuple(
            (name, dict(args)) for name, args in self.tool_calls
        ))

    @property
    def content(self) -> str | None:
        if self.json is not None:
            return json.dumps(self.json)
        return self.text


QueueItem = Fault | Reply | str | dict


# -- what the server received ----------------------------------------------------


class ChatRequest(Struct):
    """One request as received, with a provider-neutral view of it."""

    api: Api | None
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any = None
    model: str = ""
    at: float = field(default_factory=time.time)
    #: a streamed answer: the characters of its content written before the stream ended
    #: (the client closing it early stops the rest); None when not streamed
    streamed: int | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation as ``{"role", "content", "tool_calls"?}`` dicts
        (roles: system, user, assistant, tool), whatever the API."""
        body = self.body if isinstance(self.body, dict) else {}
        out: list[dict[str, Any]] = []
        if self.api == "openai":
            for m in body.get("messages", []):
                out.append({
                    "role": m.get("role"),
                    "content": _openai_text(m.get("content")),
                    **({"tool_calls": [
                        {"name": c["function"]["name"],
                         "arguments": json.loads(c["function"].get("arguments") or "{}")}
                        for c in m["tool_calls"]
                    ]} if m.get("tool_calls") else {}),
                })
        elif self.api == "gemini":
            system = body.get("systemInstruction") or body.get("system_instruction")
            if system:
                out.append({"role": "system", "content": _gemini_text(system.get("parts"))})
            for c in body.get("contents", []):
                parts = c.get("parts") or []
                responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
                if responses:
                    for r in responses:
                        out.append({"role": "tool", "name": r.get("name"),
                                    "content": json.dumps(r.get("response"))})
                    continue
                calls = [p["functionCall"] for p in parts if "functionCall" in p]
                role = "assistant" if c.get("role") == "model" else "user"
                message: dict[str, Any] = {"role": role, "content": _gemini_text(parts)}
                if calls:
                    message["tool_calls"] = [
                        {"name": f.get("name"), "arguments": f.get("args") or {}} for f in calls
                    ]
                out.append(message)
        return out

    @property
    def system(self) -> str:
        return "\n\n".join(m["content"] for m in self.messages if m["role"] == "system")

    @property
    def last_user(self) -> str:
        """The text of the last user message ('' if none)."""
        for m in reversed(self.messages):
            if m["role"] == "user":
                return m["content"]
        return ""

    @property
    def schema(self) -> dict[str, Any] | None:
        """The JSON schema the client asked the answer to follow, if any."""
        body = self.body if isinstance(self.body, dict) else {}
        if self.api == "openai":
            fmt = body.get("response_format") or {}
            if fmt.get("type") == "json_schema":
                return (fmt.get("json_schema") or {}).get("schema") or {}
            # a schema in the prompt (cycle.llm.compat) is followed, as a model would
            found = schema_in_prompt(self.system)
            asked = found[1] if found else None
            if fmt.get("type") == "json_object":
                return fmt.get("schema") or asked or {"type": "object"}
            if asked is not None:
                return asked
        elif self.api == "gemini":
            gen = body.get("generationConfig") or {}
            schema = gen.get("responseJsonSchema") or gen.get("responseSchema")
            if schema is not None:
                return schema
            if gen.get("responseMimeType") == "application/json":
                return {"type": "object"}
        return None

    @property
    def schema_name(self) -> str | None:
        body = self.body if isinstance(self.body, dict) else {}
        if self.api == "openai":
            fmt = body.get("response_format") or {}
            if fmt.get("type") == "json_schema":
                return (fmt.get("json_schema") or {}).get("name")
            if isinstance(fmt.get("schema"), dict) and fmt["schema"].get("title"):
                return str(fmt["schema"]["title"])
            found = schema_in_prompt(self.system)
            return found[0] if found else None
        return None

    @property
    def tools(self) -> list[str]:
        """Names of the tools the client declared."""
        body = self.body if isinstance(self.body, dict) else {}
        if self.api == "openai":
            return [t["function"]["name"] for t in body.get("tools", []) if "function" in t]
        names = []
        for tool in body.get("tools", []):
            for decl in tool.get("functionDeclarations", []) or []:
                names.append(decl.get("name"))
        return names


def _openai_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _gemini_text(parts: Any) -> str:
    return "".join(p.get("text", "") for p in parts or [] if isinstance(p, dict))


Responder = Callable[[ChatRequest], "Reply | Fault | str | dict | None"]


def default_reply(request: ChatRequest) -> Reply:
    """A schema-valid JSON object when a schema was requested, else an echo."""
    schema = request.schema
    if schema is not None:
        return Reply(json=example_for(schema))
    return Reply(text=f"echo: {request.last_user}"[:2000])


def tool_loop(calls: int) -> Responder:
    """A responder for an agent with tools: the first declared tool is called (with an
    empty argument object) until ``calls`` tool results are in the conversation, then
    the default reply. A benchmark's tool-using agent, from a server in its own process."""

    def respond(request: ChatRequest) -> Reply | None:
        tools = request.tools
        if not tools or request.schema is not None:
            return None
        answered = sum(1 for m in request.messages if m["role"] == "tool")
        return Reply(tool_calls=[(tools[0], {})]) if answered < calls else None

    return respond


def rate_limit(per_window: int, window: float = 1.0, *,
               retry_after: float | None = None) -> Responder:
    """A responder that rate limits as a provider does: a request beyond ``per_window``
    answered requests in the last ``window`` seconds is answered 429 (with Retry-After, if
    given); the others get the default answer. Refused requests do not use the quota."""
    accepted: collections.deque[float] = collections.deque()

    def respond(request: ChatRequest) -> Fault | None:
        now = time.monotonic()
        while accepted and accepted[0] <= now - window:
            accepted.popleft()
        if len(accepted) >= per_window:
            return Fault.status(429, retry_after=retry_after, message="rate limit reached")
        accepted.append(now)
        return None

    return respond


def every(n: int, *, retry_after: float | None = None) -> Responder:
    """A responder answering every ``n``-th request 429, whatever the load (a storm)."""
    count = itertools.count(1)

    def respond(request: ChatRequest) -> Fault | None:
        if next(count) % n == 0:
            return Fault.status(429, retry_after=retry_after, message="rate limit reached")
        return None

    return respond


async def wait_out(delay: float, arrived: float | None) -> None:
    """The answer is ready: wait out what is left of ``delay`` since the request arrived (loop
    time), so the server adds (almost) nothing on top of it."""
    loop = asyncio.get_running_loop()
    start = loop.time() if arrived is None else arrived
    await asyncio.sleep(max(0.0, start + delay - loop.time()))


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


# -- the server --------------------------------------------------------------------


class LoopbackServer:
    """OpenAI and Gemini on 127.0.0.1, scripted per request; see the module docstring."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        responder: Responder | None = None,
        record: bool = True,
        batch_delay: float = 0.0,
        stream_chars: int = 4,
        stream_delay: float = 0.0,
        compat: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """``stream_chars``: characters of a streamed answer a chunk (a token);
        ``stream_delay``: seconds between two chunks (a model's speed: a client that stops
        reading is noticed within one); ``compat``: behave as a real OpenAI-compatible
        server does (cycle.testing.compat: llamacpp, text-only, no-tool-role); ``tls``: a
        server context to serve HTTPS with (its certificate is the test's to trust)."""
        if compat is not None and compat not in _compat.MODES:
            raise ValueError(f"compat: one of {', '.join(_compat.MODES)}, not {compat!r}")
        #: the OpenAI-compatible server this one behaves as (None: OpenAI itself)
        self.compat = compat
        #: when a list: each request's (arrival, answer written) on the loop's clock, for
        #: a benchmark's look at the calls in flight over time (``--timeline``)
        self.timeline: list[tuple[float, float]] | None = None
        self.host = host
        self.port = port
        self.tls = tls
        self.stream_chars = stream_chars
        self.stream_delay = stream_delay
        #: seconds every answer waits (a model's thinking time)
        self.latency = latency
        self.responder = responder
        #: keep every request in ``requests`` (off for long benchmarks)
        self.record = record
        self._queue: collections.deque[QueueItem] = collections.deque()
        self._requests: list[ChatRequest] = []
        self._count = 0
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._startup_error: BaseException | None = None
        #: OpenAI Batch and Gemini batch mode; a job takes ``batch_delay`` seconds
        self.batches = BatchEngine(self, delay=batch_delay)

    # -- scripting and records -------------------------------------------------------

    def enqueue(self, *items: QueueItem | Iterable[QueueItem]) -> None:
        """Queue answers/faults for the next requests, in order."""
        with self._lock:
            for item in items:
                if isinstance(item, (Fault, Reply, str, dict)):
                    self._queue.append(item)
                else:
                    self._queue.extend(item)

    @property
    def requests(self) -> list[ChatRequest]:
        """The requests received so far (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        with self._lock:
            return self._count

    @property
    def pending(self) -> int:
        """Queued items not used yet."""
        with self._lock:
            return len(self._queue)

    def reset(self) -> None:
        """Forget queued items, recorded requests and batch jobs."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._count = 0
        self.batches.reset()

    # -- addresses ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """The ``base_url`` for the openai SDK (it appends /chat/completions)."""
        return f"{self.base_url}/v1"

    @property
    def gemini_base_url(self) -> str:
        """The ``base_url`` for google-genai (it appends /v1beta/models/...)."""
        return self.base_url

    def openai_options(self, **kwargs: Any) -> ProviderOptions:
        """ProviderOptions pointing the openai provider here."""
        return ProviderOptions(base_url=self.openai_base_url, **kwargs)

    def gemini_options(self, **kwargs: Any) -> ProviderOptions:
        """ProviderOptions pointing the gemini provider here."""
        return ProviderOptions(base_url=self.gemini_base_url, **kwargs)

    # -- running -----------------------------------------------------------------------

    async def start_async(self) -> None:
        """Start listening on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._server = await asyncio.start_server(
            self._handle, self.host, self.port, backlog=1024, reuse_address=True, ssl=self.tls
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def serve_forever(self) -> None:
        """Serve on the running loop until ``stop_async``."""
        if self._server is None:
            await self.start_async()
        assert self._stopped is not None
        await self._stopped.wait()

    async def stop_async(self) -> None:
        if self._server is not None:
            self._server.close()
            try:
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            except TimeoutError:
                pass
            self._server = None
        if self._stopped is not None:
            self._stopped.set()

    def start(self) -> LoopbackServer:
        """Serve from a background thread; returns once it accepts connections."""
        if self._thread is not None:
            return self
        self._ready.clear()
        self._thread = threading.Thread(target=self._run_thread, name="cycle-loopback", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._startup_error is not None:
            raise self._startup_error
        return self

    def _run_thread(self) -> None:
        async def main() -> None:
            try:
                await self.start_async()
            except BaseException as e:  # noqa: BLE001 - handed to start(), which raises it
                self._startup_error = e
                self._ready.set()
                return
            self._ready.set()
            await self.serve_forever()

        asyncio.run(main())

    def stop(self) -> None:
        """Stop the background thread's server."""
        if self._thread is None or self._loop is None:
            return
        future = asyncio.run_coroutine_threadsafe(self.stop_async(), self._loop)
        # a server that fails to stop cleanly is still stopping: the join below bounds it
        with contextlib.suppress(Exception):
            future.result(5)
        self._thread.join(5)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP --------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    break
                # the latency runs from here: parsing and answering happen inside it
                arrived = asyncio.get_running_loop().time()
                try:
                    method, target, _version = request_line.decode("latin-1").split(" ", 2)
                except ValueError:
                    break
                headers: dict[str, str] = {}
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await self._read_body(reader, headers)
                keep_alive = headers.get("connection", "").lower() != "close"
                asked: list[ChatRequest] = []
                answer = await self._dispatch(method, target.split("?", 1)[0], headers, body,
                                              arrived=arrived, asked=asked)
                if answer is None:  # a Fault.disconnect()
                    break
                status, extra_headers, payload = answer
                if asked and status == 200 and isinstance(asked[0].body, dict) \
                        and asked[0].body.get("stream") and asked[0].api == "openai":
                    await self._stream(reader, writer, asked[0], payload,
                                       extra_headers.get(_LABEL))
                    break  # a stream ends with its connection
                kind = extra_headers.pop(_LABEL, "application/json")
                head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
                        f"Content-Type: {kind}",
                        f"Content-Length: {len(payload)}",
                        f"Connection: {'keep-alive' if keep_alive else 'close'}"]
                cut = extra_headers.pop(_CUT, None) is not None
                head += [f"{k}: {v}" for k, v in extra_headers.items()]
                if cut:  # a Fault.cut(): half the body, then the connection closes
                    payload = payload[:len(payload) // 2]
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
                await writer.drain()
                if cut:
                    break
                if self.timeline is not None:
                    self.timeline.append((arrived, asyncio.get_running_loop().time()))
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # shutdown with keep-alive connections still open: end quietly
            # (re-raising makes asyncio log a traceback per connection)
            pass
        finally:
            with contextlib.suppress(Exception):  # the peer or the loop is already gone
                writer.close()

    async def _read_body(self, reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    await reader.readline()
                    break
                chunks.append(await reader.readexactly(size))
                await reader.readline()
            return b"".join(chunks)
        length = int(headers.get("content-length", "0") or 0)
        if length > MAX_BODY:
            raise ConnectionError("request body too large")
        return await reader.readexactly(length) if length else b""

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      request: ChatRequest, payload: bytes, label: str | None = None) -> None:
        """An answer as OpenAI streams it (server-sent events, ``stream_chars`` of content a
        chunk, ``stream_delay`` apart), stopped where the client closes the connection:
        ``request.streamed`` says how much was written (what a provider bills). A body
        given its ``label`` (a Fault.malformed's) is sent as it is, so labelled."""
        completion: Any = None
        if label is None:
            with contextlib.suppress(ValueError):
                completion = json.loads(payload)
        try:
            content = completion["choices"][0]["message"].get("content") or ""
        except (LookupError, TypeError, AttributeError):
            # a Fault.malformed body: a server gone wrong sends it as it is, not as events
            # (one that starts "data:" is a stream of events written by the test, as is)
            kind = (label.encode() if label is not None else b"text/event-stream"
                    if payload.startswith(b"data:") else b"application/json")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: " + kind + b"\r\n"
                         b"Content-Length: " + str(len(payload)).encode() + b"\r\n"
                         b"Connection: close\r\n\r\n" + payload)
            await writer.drain()
            return
        message = completion["choices"][0]["message"]
        base = {k: completion.get(k) for k in ("id", "created", "model")}
        base["object"] = "chat.completion.chunk"

        def event(data: Any) -> bytes:
            return b"data: " + json.dumps(data).encode() + b"\n\n"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return event({**base, "choices": [{"index": 0, "delta": delta,
                                               "finish_reason": finish}]})

        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
                     + chunk({"role": "assistant", "content": ""}))
        sent = 0
        try:
            for i in range(0, len(content), max(self.stream_chars, 1)):
                await asyncio.sleep(self.stream_delay)  # and the loop sees a closed peer
                if reader.at_eof() or writer.is_closing():
                    return
                piece = content[i:i + self.stream_chars]
                writer.write(chunk({"content": piece}))
                await writer.drain()
                sent += len(piece)
            tail = b""
            for i, call in enumerate(message.get("tool_calls") or ()):
                tail += chunk({"tool_calls": [{"index": i, "id": call.get("id"), "type": "function",
                                               "function": call["function"]}]})
            tail += chunk({}, completion["choices"][0].get("finish_reason") or "stop")
            include = (request.body.get("stream_options") or {}).get("include_usage")
            if include and "usage" in completion:
                tail += event({**base, "choices": [], "usage": completion["usage"]})
            writer.write(tail + b"data: [DONE]\n\n")
            await writer.drain()
        except ConnectionError:
            return
        finally:
            request.streamed = sent

    async def _dispatch(
        self, method: str, path: str, headers: dict[str, str], raw: bytes, *,
        arrived: float | None = None, asked: list[ChatRequest] | None = None,
    ) -> tuple[int, dict[str, str], bytes] | None:
        api: Api | None = None
        model = ""
        match = _GEMINI_PATH.match(path)
        if method == "POST" and path in _OPENAI_PATHS:
            api = "openai"
        elif method == "POST" and match:
            api, model = "gemini", match.group("model")
        elif method == "GET" and path in ("/health", "/"):
            return 200, {}, b'{"status": "ok"}'
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        refused = None
        if api == "openai" and isinstance(body, dict):
            model = str(body.get("model", ""))
            refused = _compat.refusal(self.compat, body)
            body = _compat.understood(self.compat, body)
        request = ChatRequest(api=api, method=method, path=path, headers=headers, raw=raw,
                              body=body, model=model)
        if asked is not None:
            asked.append(request)
        if refused is not None:  # counted, but it takes nothing from the queue
            with self._lock:
                self._count += 1
                if self.record:
                    self._requests.append(request)
            return refused[0], {}, refused[1]
        if api is None:
            batch = self.batches.route(method, path, headers, raw)
            if batch is not None:  # the batch endpoints are not model calls: not counted
                return batch
        item = self._take(request)
        if api is None:
            return 404, {}, json.dumps({"error": {"message": f"no route {method} {path}"}}).encode()
        if body is None or not isinstance(body, dict):
            return self._error(api, 400, "request body is not a JSON object")

        item, slower = self._scripted(request, item)
        answer = self._answer(api, request, item)
        delay = self.latency + slower
        if delay > 0:
            await wait_out(delay, arrived)
        return answer

    def _scripted(self, request: ChatRequest, item: QueueItem | None) -> tuple[QueueItem | None, float]:
        """What answers ``request``: its queued item (a slow fault unwrapped, with the extra
        seconds it asks), else the responder's."""
        slower = 0.0
        if isinstance(item, Fault) and item.kind == "slow":
            slower, item = item.delay, item.then
        if item is None and self.responder is not None:
            item = self.responder(request)
        return item, slower

    def _take(self, request: ChatRequest) -> QueueItem | None:
        """Count and record a request; the queued item it takes (a model call only)."""
        with self._lock:
            self._count += 1
            if self.record:
                self._requests.append(request)
            return self._queue.popleft() if self._queue and request.api else None

    def answer_in_batch(self, api: Api, model: str, path: str, body: Any) -> tuple[int, Any]:
        """A call inside a batch job, answered as if sent alone (queue, responder, faults;
        no latency: the job's own time stands for it): its status and JSON body."""
        request = ChatRequest(api=api, method="POST", path=path, headers={},
                              raw=json.dumps(body).encode(), body=body, model=model)
        item, _ = self._scripted(request, self._take(request))
        if not isinstance(body, dict):
            status, _, payload = self._error(api, 400, "request body is not a JSON object")
        else:
            answer = self._answer(api, request, item)
            status, _, payload = answer if answer is not None else self._error(
                api, 500, "the call was dropped")
        try:
            return status, json.loads(payload)
        except ValueError:
            return 500, {"error": {"message": "the answer is not JSON", "code": 500}}

    def _answer(
        self, api: Api, request: ChatRequest, item: QueueItem | None
    ) -> tuple[int, dict[str, str], bytes] | None:
        """The status, extra headers and body for ``item`` (None: drop the connection)."""
        if isinstance(item, Fault):
            if item.kind == "disconnect":
                return None
            if item.kind == "malformed":
                label = {_LABEL: item.content_type} if item.content_type else {}
                return 200, label, (item.body or "").encode()
            if item.kind == "bomb":
                return 200, {"Content-Encoding": "gzip"}, _bomb(int(item.delay))
            if item.kind == "cut":
                status, extra, payload = self._answer(api, request, item.then) or (200, {}, b"")
                return status, {**extra, _CUT: "1"}, payload
            if item.kind == "status":
                return self._fault(api, item)
        if item is None:
            reply = default_reply(request)
        elif isinstance(item, Reply):
            reply = item
        elif isinstance(item, str):
            reply = Reply(text=item)
        elif isinstance(item, dict):
            reply = Reply(json=item)
        else:
            reply = default_reply(request)
        payload = self._openai(request, reply) if api == "openai" else self._gemini(request, reply)
        return 200, {}, json.dumps(payload).encode()

    def _fault(self, api: Api, fault: Fault) -> tuple[int, dict[str, str], bytes]:
        status, extra, payload = self._error(
            api, fault.code, fault.message or _REASONS.get(fault.code, "error")
        )
        if fault.retry_after is not None:  # seconds, or a text as it is (an HTTP date)
            extra["Retry-After"] = (fault.retry_after if isinstance(fault.retry_after, str)
                                    else f"{fault.retry_after:g}")
        if fault.retry_after_ms is not None:
            extra["retry-after-ms"] = f"{fault.retry_after_ms:g}"
        if fault.body is not None:
            payload = fault.body.encode()
        return status, extra, payload

    def _error(self, api: Api, status: int, message: str) -> tuple[int, dict[str, str], bytes]:
        if api == "gemini":
            body = {"error": {"code": status, "message": message,
                              "status": _GEMINI_STATUS.get(status, "UNKNOWN")}}
        else:
            body = {"error": {"message": message, "type": _OPENAI_TYPE.get(status, "server_error"),
                              "param": None, "code": None}}
        return status, {}, json.dumps(body).encode()

    def _usage(self, request: ChatRequest, reply: Reply) -> tuple[int, int, int]:
        prompt = sum(_estimate_tokens(m.get("content") or "") for m in request.messages) or 1
        input_tokens = reply.input_tokens if reply.input_tokens is not None else prompt
        content = reply.content or ""
        calls = "".join(json.dumps(args) for _, args in reply.tool_calls)
        output = reply.output_tokens if reply.output_tokens is not None else _estimate_tokens(
            content + calls
        )
        return input_tokens, min(reply.cached_tokens, input_tokens), output

    def _openai(self, request: ChatRequest, reply: Reply) -> dict[str, Any]:
        n = next(self._ids)
        input_tokens, cached, output = self._usage(request, reply)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": reply.call_ids[i] if i < len(reply.call_ids) else f"call_{n}_{i}",
                 "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}}
                for i, (name, args) in enumerate(reply.tool_calls)
            ]
        elif message["content"] is None:
            message["content"] = ""
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        body = {
            "id": f"chatcmpl-loopback-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or request.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": None}],
            "usage": reply.usage if reply.usage is not None else {
                "prompt_tokens": input_tokens,
                "completion_tokens": output,
                "total_tokens": input_tokens + output,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }
        if reply.no_usage:
            del body["usage"]
        return body

    def _gemini(self, request: ChatRequest, reply: Reply) -> dict[str, Any]:
        input_tokens, cached, output = self._usage(request, reply)
        parts: list[dict[str, Any]] = []
        if reply.content:
            parts.append({"text": reply.content})
        for name, args in reply.tool_calls:
            parts.append({"functionCall": {"name": name, "args": args}})
        finish = {"length": "MAX_TOKENS", "content_filter": "SAFETY"}.get(
            reply.finish_reason or "", "STOP"
        )
        usage: dict[str, Any] = {
            "promptTokenCount": input_tokens,
            "candidatesTokenCount": output,
            "totalTokenCount": input_tokens + output,
        }
        if cached:
            usage["cachedContentTokenCount"] = cached
        body = {
            "candidates": [{"content": {"role": "model", "parts": parts or [{"text": ""}]},
                            "finishReason": finish, "index": 0}],
            "usageMetadata": reply.usage if reply.usage is not None else usage,
            "modelVersion": reply.model or request.model,
        }
        if reply.no_usage:
            del body["usageMetadata"]
        return body


# -- as a process ----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """``python -m cycle.testing.server --port N --latency S``."""
    parser = argparse.ArgumentParser(
        prog="python -m cycle.testing.server",
        description="A loopback OpenAI/Gemini server for tests and benchmarks.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    parser.add_argument("--tool-calls", type=int, default=0,
                        help="answer an agent with tools with this many tool calls first")
    parser.add_argument("--rate-limit", type=int, default=0,
                        help="answer 429 beyond this many requests a second")
    parser.add_argument("--every", type=int, default=0, help="answer every N-th request 429")
    parser.add_argument("--retry-after", type=float, default=None,
                        help="the Retry-After of a 429, seconds")
    parser.add_argument("--batch-delay", type=float, default=0.0,
                        help="seconds a batch job takes to finish")
    parser.add_argument("--compat", choices=_compat.MODES, default=None,
                        help="behave as a real OpenAI-compatible server (cycle.testing.compat)")
    parser.add_argument("--timeline", default=None, metavar="FILE",
                        help="on exit, write each request's arrival and answer times (JSON)")
    args = parser.parse_args(argv)
    server = LoopbackServer(host=args.host, port=args.port, latency=args.latency, record=False,
                            batch_delay=args.batch_delay, compat=args.compat)
    if args.tool_calls:
        server.responder = tool_loop(args.tool_calls)
    if args.rate_limit:
        server.responder = rate_limit(args.rate_limit, retry_after=args.retry_after)
    if args.every:
        server.responder = every(args.every, retry_after=args.retry_after)
    if args.timeline:
        server.timeline = []

    async def run() -> None:
        await server.start_async()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, lambda: asyncio.ensure_future(server.stop_async()))
            except (NotImplementedError, RuntimeError):
                pass
        print(f"LISTENING {server.base_url}", flush=True)
        await server.serve_forever()
        if args.timeline:  # the server is done: nothing waits on this write
            Path(args.timeline).write_text(json.dumps(server.timeline))

    # select() times out to the microsecond; epoll and poll round every timeout up to
    # the next whole millisecond, which made each answer ~0.5 ms late on average
    # (0.5% of a 100 ms latency). select() handles descriptors below 1024: plenty
    # for a benchmark's few hundred connections.
    with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(
            selectors.SelectSelector())) as runner:
        runner.run(run())
    sys.exit(0)


if __name__ == "__main__":
    main()


@functools.cache
def _bomb(megabytes: int) -> bytes:
    """A gzip body of zeros inflating to ``megabytes`` MB (built once a size)."""
    out = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(2**20)
    return b"".join(out.compress(zeros) for _ in range(megabytes)) + out.flush()
