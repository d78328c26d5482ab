"""An HTTP agent's endpoint as a hostile server would answer, through ``cycle run`` as a
user runs it: whatever it sends, the user sees one clear error of the iteration (exit 3:
errors kept the run from judging), never a score of 0 for an answer that was none,
never an internal error, never its token in the store, reports or output, and never its
escapes acting on the terminal or its markup styling a report."""

from __future__ import annotations

import gzip
import json
import sqlite3
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli

TOKEN = "tok-hostile-0123456789abcdef"
LITERAL = "lit-secret-9876543210zyxw"
#: written in headers not named as credentials: an unknown one, and a plain one (Accept)
#: with a key in it
UNNAMED = "sess-0123456789abcdefXYZ"
IN_PLAIN = "k3y0123456789abcdefgh"
#: every request's headers, as the endpoint received them
SEEN: list[dict[str, str]] = []


def _deep(n: int) -> bytes:
    return b'{"response": ' + b"[" * n + b"]" * n + b"}"


#: what the endpoint answers, by the case's message: (status, headers, body)
ANSWERS: dict[str, tuple[int, dict[str, str], bytes]] = {
    "surrogate": (200, {}, (b'{"response": "a\\ud800b", "toolCalls": '
                           b'[{"name": "look\\udc00up", "arguments": {"k\\ud800": "\\udfff"}}]}')),
    "not-json": (200, {}, b"<html>upstream gateway said no</html>"),
    "calls-not-list": (200, {}, b'{"response": "ok", "toolCalls": 5}'),
    "calls-a-dict": (200, {}, b'{"response": "ok", "toolCalls": {"name": "x"}}'),
    "null-response": (200, {}, b'{"response": null}'),
    "huge-number": (200, {}, (b'{"response": "ok", "toolCalls": [{"name": "t", "success": true, '
                             b'"durationMs": 1e400}]}')),
    "neg-duration": (200, {}, (b'{"response": "ok", "toolCalls": [{"name": "t", "success": true, '
                               b'"durationMs": -5}]}')),
    "long-int": (200, {}, b'{"response": ' + b"9" * 5000 + b"}"),
    "deep": (200, {}, _deep(10_000)),
    "deep-900": (200, {}, _deep(900)),
    "error-body": (200, {}, b'{"error": {"message": "model overloaded", "code": 529}}'),
    "redirect": (302, {"Location": "http://203.0.113.7/steal"}, b""),
    "bomb": (200, {"Content-Encoding": "gzip"}, gzip.compress(b" " * (65 * 2**20), 9)),
    "echo-json": (200, {}, b""),  # filled per request: the headers it was sent
    "echo-500": (500, {}, b""),
    "bad-utf8": (200, {}, b'{"response": "caf\xc3 \xff\xfe ok"}'),
    "escapes": (200, {}, json.dumps({"response": "\x1b]0;pwned\x07\x1b[2J[bold red]RED[/] "
                                                 "<script>alert(1)</script> | *x* \u202e"}).encode()),
    "error-surrogate": (200, {}, b'{"error": "bad \\ud800 thing"}'),
    "escapes-error": (502, {}, b"\x1b]0;pwned\x07\x1b[2J[bold red]RED[/] <script>x</script>"),
    "two-mb": (200, {}, b'{"response": "ok", "pad": "' + b" " * (2 * 2**20) + b'"}'),
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        SEEN.append(dict(self.headers.items()))
        name = body["message"]
        if name == "trickle":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            try:
                for _ in range(40):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass
            return
        if name == "ask-surrogate":
            asked = any(m["role"] == "tool" for m in body["messages"])
            raw = (b'{"response": "ok \\udc00"}' if asked else
                   b'{"tool_calls": [{"id": "c\\ud800", "name": "lookup", '
                   b'"arguments": {"q": "x\\ud800"}}]}')
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
            return
        status, headers, raw = ANSWERS[name]
        if name.startswith("echo"):
            said = {k: v for k, v in self.headers.items()}
            raw = json.dumps({"response": f"you sent {said}",
                              "escaped": json.dumps(said, ensure_ascii=True).replace("t", "\\u0074")
                              }).encode()
            if name == "echo-500":
                raw = f"denied for {said}".encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/chat"
    server.shutdown()
    server.server_close()


def run(tmp_path: Path, url: str, cases: list[str], *, timeout: float = 20.0,
        protocol: str = "plain", mocks: str = "{}", headers: str = "", agent: str = ""):
    (tmp_path / "cases.yaml").write_text("".join(f"- {{id: {c}, input: {c}}}\n" for c in cases))
    (tmp_path / "p.yaml").write_text(
        "id: hostile\nsystem: Answer.\nuser_template: '{{ q }}'\n"
        "tools: [{name: lookup, parameters: {type: object, properties: {q: {type: string}}}}]\n")
    (tmp_path / "cycle.yaml").write_text(textwrap.dedent(f"""\
        prompt: p.yaml
        agent:
          http: '{url}'
          protocol: {protocol}
          headers: {{Authorization: 'Bearer ${{HOSTILE_TOKEN}}', X-Api-Key: '{LITERAL}'{headers}}}
          {agent}
        criteria: [{{id: said, check: {{type: contains, values: [ok]}}}}]
        cases: [cases.yaml]
        run: {{iterations: 1, timeout: {timeout}}}
        tools: {{mocks: {mocks}}}
        """))
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                 str(tmp_path / "cycle.yaml")], env={"HOSTILE_TOKEN": TOKEN})
    return r


def results(tmp_path: Path) -> dict[str, dict]:
    report = json.loads(max((tmp_path / "reports").glob("*.json")).read_text())
    return {c["id"]: c["results"][0] for c in report["cases"]}


def everything_written(tmp_path: Path, output: str) -> str:
    """The output, every report, and every text of the store, as one text."""
    texts = [output] + [p.read_text(errors="replace") for p in (tmp_path / "reports").glob("*")]
    db = sqlite3.connect(tmp_path / "s.db")
    for (table,) in db.execute("select name from sqlite_master where type='table'"):
        for row in db.execute(f'select * from "{table}"'):
            texts += [v.decode(errors="replace") if isinstance(v, bytes) else str(v) for v in row]
    db.close()
    return "\n".join(texts)


def in_code(md: str, line: str) -> bool:
    """Whether ``line`` of ``md`` is inside a fenced code block."""
    fenced = False
    for each in md.splitlines():
        if each.startswith("```"):
            fenced = not fenced
        elif each == line:
            return fenced
    return False


def _errors(tmp_path: Path, r, cases: list[str]) -> dict[str, str]:
    assert "Traceback" not in r.output and "internal error" not in r.output.lower(), r.output
    assert r.exit_code == 3, r.output
    got = results(tmp_path)
    for case in cases:
        assert got[case]["status"] == "error", (case, got[case])
    return {c: got[c]["error"] for c in cases}


def test_a_lone_surrogate_in_an_endpoints_answer_and_tool_calls_is_kept_as_u_fffd(
        tmp_path, endpoint):
    r = run(tmp_path, endpoint, ["surrogate"])
    assert "Traceback" not in r.output and "internal error" not in r.output.lower(), r.output
    got = results(tmp_path)["surrogate"]
    assert got["status"] == "failed", got  # judged: it answered, without "ok"
    assert got["output"] == "a\ufffdb"
    (call,) = [c for e in got["trace"] for c in e.get("tool_calls") or ()]
    assert call["name"] == "look\ufffdup" and call["arguments"] == {"k\ufffd": "\ufffd"}


def test_answers_of_the_wrong_shape_are_errors_that_say_so(tmp_path, endpoint):
    cases = ["not-json", "calls-not-list", "calls-a-dict", "null-response", "huge-number",
             "neg-duration", "long-int", "deep", "error-body"]
    r = run(tmp_path, endpoint, cases)
    errors = _errors(tmp_path, r, cases)
    assert "did not answer JSON" in errors["not-json"] and "upstream gateway" in errors["not-json"]
    assert "toolCalls is not a list" in errors["calls-not-list"], errors
    assert "toolCalls is not a list" in errors["calls-a-dict"], errors
    assert "no response" in errors["null-response"], errors
    assert "1e400" in errors["huge-number"], errors
    assert "durationMs = -5" in errors["neg-duration"], errors
    assert "did not answer JSON" in errors["long-int"], errors
    assert "nested" in errors["deep"], errors
    assert "answered an error" in errors["error-body"] and "model overloaded" in errors["error-body"]


def test_a_redirect_is_refused_and_never_followed_with_the_token(tmp_path, endpoint):
    r = run(tmp_path, endpoint, ["redirect"])
    errors = _errors(tmp_path, r, ["redirect"])
    assert "HTTP 302" in errors["redirect"] and "redirect" in errors["redirect"], errors
    assert "203.0.113.7" in errors["redirect"]


def test_a_body_past_the_cap_is_cut_and_names_the_endpoint(tmp_path, endpoint):
    r = run(tmp_path, endpoint, ["bomb"])
    errors = _errors(tmp_path, r, ["bomb"])
    assert "MB" in errors["bomb"] and "127.0.0.1" in errors["bomb"], errors
    assert "providers.<name>" not in errors["bomb"]  # no provider setting for an agent
    assert "agent.max_response_mb" in errors["bomb"] and "64 MB" in errors["bomb"], errors


def test_the_cap_on_an_endpoints_answer_is_agent_max_response_mb(tmp_path, endpoint):
    """The cap was fixed at 64 MB: an endpoint whose answers are larger (a batch of
    documents) could not be tested. Now a setting, named by the error past it."""
    r = run(tmp_path, endpoint, ["two-mb"], agent="max_response_mb: 1.5")
    errors = _errors(tmp_path, r, ["two-mb"])
    assert "more than 1.5 MB" in errors["two-mb"], errors
    assert "agent.max_response_mb in cycle.yaml raises the limit" in errors["two-mb"], errors
    raised = tmp_path / "raised"
    raised.mkdir()
    r = run(raised, endpoint, ["two-mb"], agent="max_response_mb: 3")
    assert r.exit_code == 0, r.output
    assert results(raised)["two-mb"]["status"] == "passed"


@pytest.mark.parametrize("value", ["0", "-1", "lots", ".inf", "{mb: 1}"])
def test_a_bad_max_response_mb_is_an_error_naming_the_setting(tmp_path, endpoint, value):
    r = run(tmp_path, endpoint, ["two-mb"], agent=f"max_response_mb: {value}")
    assert r.exit_code == 2, r.output
    assert "cycle.yaml:6 (agent.max_response_mb)" in r.output, r.output
    assert "Traceback" not in r.output


def test_max_response_mb_is_refused_for_an_agent_that_is_no_endpoint(tmp_path):
    (tmp_path / "cycle.yaml").write_text(
        "prompt: p.yaml\nagent: {model: 'offline:default', max_response_mb: 5}\n")
    r = CliRunner().invoke(cli, ["run", "--dry-run", str(tmp_path / "cycle.yaml")])
    assert r.exit_code == 2, r.output
    assert "max_response_mb is for an http agent" in r.output, r.output


def test_a_trickle_past_the_timeout_is_an_error_of_the_iteration(tmp_path, endpoint):
    began = time.monotonic()
    r = run(tmp_path, endpoint, ["trickle"], timeout=1.0)
    errors = _errors(tmp_path, r, ["trickle"])
    # it names the endpoint, never "model calls" it does not make (before: "no model call
    # of this run had been answered yet: if the server is slow (a local model) ...")
    assert errors["trickle"] == (
        f"timeout: the case took longer than 1 s (agent: the HTTP endpoint {endpoint}): it "
        "had not answered; if it is that slow, raise run.timeout (or lower run.concurrency: "
        "cases in flight slow it down)"), errors
    assert time.monotonic() - began < 3.5


def test_the_token_an_endpoint_echoes_is_masked_everywhere(tmp_path, endpoint):
    r = run(tmp_path, endpoint, ["echo-json", "echo-500"])
    assert "Traceback" not in r.output, r.output
    written = everything_written(tmp_path, r.output)
    assert "you sent" in written and "denied for" in written
    assert TOKEN not in written and LITERAL not in written
    assert "\\u0074ok-hostile" not in written


def test_a_literal_secret_in_a_header_not_named_as_a_credential_never_leaves_the_request(
        tmp_path, endpoint):
    """Only headers named as credentials (Authorization, X-Api-Key) had their text
    masked: ``X-Session: sess-0123...`` was stored in every run's config as written, and
    an endpoint echoing it had it stored and reported. Now a word as long as a key is
    masked in any header but a plain one (Accept, Content-Type, User-Agent), and a
    key-shaped one in those too; prose and short text stay as written. The request still carries
    every value, and stderr says (once, naming the header, not its value) that the
    secret belongs in the environment."""
    SEEN.clear()
    headers = (f", X-Session: '{UNNAMED}', Accept: 'application/json; {IN_PLAIN}', "
               "X-Tenant: acme, User-Agent: 'Mozilla/5.0 AppleWebKit/537.36', "
               "X-Note: 'a nightly evaluation', X-Env: productionwest")
    r = run(tmp_path, endpoint, ["echo-json", "echo-500"], headers=headers)
    assert "Traceback" not in r.output, r.output
    sent = SEEN[-1]
    assert sent["X-Session"] == UNNAMED and IN_PLAIN in sent["Accept"]
    assert sent["X-Tenant"] == "acme" and sent["Authorization"] == f"Bearer {TOKEN}"
    shown = [r] + [CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), *args])
                   for args in (["runs", "show", "@last"], ["report", "@last"])]
    assert all(x.exit_code in (0, 1, 3) for x in shown), [x.output for x in shown]
    (tmp_path / "cycle.yaml").unlink()  # it holds the headers as the user wrote them
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for secret in (UNNAMED, IN_PLAIN, LITERAL, TOKEN):
        assert secret.encode() not in written, secret
        assert all(secret not in x.output for x in shown), secret
    # prose is no key, nor one plain word: an answer quoting them is judged as it was said
    # (the word is kept out of the stored config all the same: it may be a passphrase)
    assert "a nightly evaluation" in results(tmp_path)["echo-json"]["output"]
    assert "productionwest" in results(tmp_path)["echo-json"]["output"]
    config = json.loads(sqlite3.connect(tmp_path / "s.db").execute(
        "select config from runs").fetchone()[0])
    assert config["agent"]["headers"] == {
        "Authorization": "Bearer ${HOSTILE_TOKEN}", "X-Api-Key": "***", "X-Session": "***",
        "Accept": "***", "X-Tenant": "acme",
        "User-Agent": "Mozilla/5.0 AppleWebKit/537.36", "X-Note": "a nightly evaluation",
        "X-Env": "***"}
    warned = [line for line in r.output.splitlines() if line.startswith("warning:")]
    assert len(warned) == 3, r.output  # X-Api-Key, X-Session, Accept: once each
    for header in ("X-Api-Key", "X-Session", "Accept"):
        assert sum(f"(agent.headers.{header})" in line for line in warned) == 1, warned
    assert all("${NAME}" in line and "environment" in line for line in warned), warned


def test_invalid_utf8_escapes_and_markup_stay_data(tmp_path, endpoint):
    r = run(tmp_path, endpoint, ["bad-utf8", "escapes", "escapes-error"])
    assert "Traceback" not in r.output, r.output
    got = results(tmp_path)
    assert got["bad-utf8"]["status"] == "passed" and "\ufffd" in got["bad-utf8"]["output"]
    assert got["escapes-error"]["status"] == "error"
    assert "\x1b" not in r.output and "\x07" not in r.output and "\u202e" not in r.output
    assert "\\x1b]0;pwned\\x07[bold" in r.output  # shown as the endpoint said it, unstyled
    html = max((tmp_path / "reports").glob("*.html")).read_text()
    assert "<script>alert" not in html and "<script>x" not in html
    md = max((tmp_path / "reports").glob("*.md")).read_text()
    assert "\x1b" not in md and "\x07" not in md
    for line in md.splitlines():  # the answer's text only inside a code block
        assert "<script>" not in line or line.startswith(("    ", "```")) or in_code(md, line)



def test_lone_surrogates_in_the_calls_an_endpoint_asks_cycle_to_run_are_kept_as_u_fffd(
        tmp_path, endpoint):
    r = run(tmp_path, endpoint, ["ask-surrogate"], protocol="tools",
            mocks="{lookup: {value: {found: 1}}}")
    assert "Traceback" not in r.output and "internal error" not in r.output.lower(), r.output
    got = results(tmp_path)["ask-surrogate"]
    assert got["status"] == "passed", got
    assert got["output"] == "ok \ufffd"
    (call,) = [c for e in got["trace"] for c in e.get("tool_calls") or ()]
    assert call["id"] == "c\ufffd" and call["arguments"] == {"q": "x\ufffd"}


def test_a_lone_surrogate_in_an_error_body_is_kept_as_u_fffd(tmp_path, endpoint):
    r = run(tmp_path, endpoint, ["error-surrogate"])
    errors = _errors(tmp_path, r, ["error-surrogate"])
    assert "bad \ufffd thing" in errors["error-surrogate"], errors


def test_json_nested_deep_yet_within_reach_is_an_answer_judged(tmp_path, endpoint):
    r = run(tmp_path, endpoint, ["deep-900"])
    assert "Traceback" not in r.output and "internal error" not in r.output.lower(), r.output
    assert results(tmp_path)["deep-900"]["status"] == "failed"  # judged: no "ok" in it
