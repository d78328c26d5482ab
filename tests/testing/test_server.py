"""The loopback server itself: routes, keep-alive, records, process mode, concurrency."""

from __future__ import annotations

import asyncio
import http.client
import json
import subprocess
import sys
import time

from cycle.llm.model import Model
from cycle.llm.registry import get_api
from cycle.records import Message
from cycle.testing import ChatRequest, Fault, LoopbackServer, Reply

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "ping"}]}


def post(conn: http.client.HTTPConnection, path: str, body: dict) -> tuple[int, dict, dict]:
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    return resp.status, dict(resp.getheaders()), json.loads(data) if data else {}


def test_keep_alive_connection_serves_both_apis_and_records():
    with LoopbackServer() as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        status, _, body = post(conn, "/v1/chat/completions", CHAT)
        assert status == 200 and body["choices"][0]["message"]["content"] == "echo: ping"
        gemini = {"contents": [{"role": "user", "parts": [{"text": "pong"}]}]}
        status, _, body = post(conn, "/v1beta/models/gemini-2.5-flash:generateContent", gemini)
        assert status == 200 and body["candidates"][0]["content"]["parts"][0]["text"] == "echo: pong"
        assert body["modelVersion"] == "gemini-2.5-flash"
        assert [r.api for r in srv.requests] == ["openai", "gemini"]
        assert srv.requests[1].model == "gemini-2.5-flash"
        conn.close()


def test_faults_carry_headers_and_are_used_once():
    with LoopbackServer() as srv:
        srv.enqueue(Fault.status(429, retry_after=0.5, retry_after_ms=500), Fault.status(503))
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        status, headers, body = post(conn, "/v1/chat/completions", CHAT)
        assert status == 429 and headers["Retry-After"] == "0.5"
        assert headers["retry-after-ms"] == "500" and body["error"]["type"] == "rate_limit_error"
        assert post(conn, "/v1/chat/completions", CHAT)[0] == 503
        assert post(conn, "/v1/chat/completions", CHAT)[0] == 200
        assert srv.pending == 0 and srv.request_count == 3


def test_responder_scripts_answers_through_the_real_sdk():
    def responder(request: ChatRequest):
        if request.schema is not None:
            return {"verdict": "pass"}
        if "weather" in request.last_user:
            return Reply(tool_calls=[("get_weather", {"city": "Oslo"})])
        return f"system was: {request.system}"

    with LoopbackServer(responder=responder) as srv:
        model = Model(get_api("openai:gpt-4o-mini", srv.openai_options()))
        out = model.generate_sync([Message.system("S"), Message.user("hello")])
        assert out.text == "system was: S"
        out = model.generate_sync([Message.user("weather?")])
        assert out.tool_calls[0].arguments == {"city": "Oslo"}
        schema = {"type": "object", "properties": {"verdict": {"type": "string"}},
                  "required": ["verdict"]}
        assert model.generate_structured_sync([Message.user("j")], schema).parsed == {
            "verdict": "pass"}


def test_unknown_route_is_404():
    with LoopbackServer() as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        assert post(conn, "/v2/nothing", {})[0] == 404


def test_64_concurrent_requests_at_100ms_take_about_100ms():
    async def burst(srv: LoopbackServer) -> float:
        model = Model(get_api("openai:gpt-4o-mini", srv.openai_options(max_connections=64)))
        started = time.monotonic()
        await asyncio.gather(*(model.generate([Message.user(str(i))]) for i in range(64)))
        elapsed = time.monotonic() - started
        await model.aclose()
        return elapsed

    with LoopbackServer(latency=0.1) as srv:
        elapsed = asyncio.run(burst(srv))
        assert srv.request_count == 64
    assert elapsed < 1.0  # serial would be 6.4 s


def test_runs_as_a_separate_process():
    proc = subprocess.Popen(
        [sys.executable, "-m", "cycle.testing.server", "--port", "0", "--latency", "0.01"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("LISTENING http://127.0.0.1:"), proc.stderr.read()
        port = int(line.rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        status, _, body = post(conn, "/v1/chat/completions", CHAT)
        assert status == 200 and body["usage"]["prompt_tokens"] >= 1
        conn.close()
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
