"""Keys come from the environment or .env and never reach the store, a report,
the event log or an error message, even when the provider echoes them back."""

from __future__ import annotations

import base64
import json
import os
import textwrap
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import Fault, LoopbackServer, Reply

SECRET = "sk-test-S3CRET-0123456789abcdefABCDEF"


def _project(tmp_path: Path, base_url: str) -> Path:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "cases").mkdir()
    (tmp_path / "prompts" / "p.yaml").write_text(textwrap.dedent("""\
        id: p
        system: You are terse.
        user_template: "{{ question }}"
        params: {model: openai:gpt-4o-mini}
    """))
    (tmp_path / "cases" / "c.yaml").write_text(textwrap.dedent("""\
        - id: one
          input: {question: What is 2+2?}
          expected: "4"
        - id: two
          input: {question: What is 3+3?}
          expected: "6"
    """))
    cfg = tmp_path / "cycle.yaml"
    cfg.write_text(textwrap.dedent(f"""\
        prompt: prompts/p.yaml
        agent: openai:gpt-4o-mini
        judge: openai:gpt-4o-mini
        improver: openai:gpt-4o-mini
        criteria:
          - id: accuracy
        run: {{iterations: 1}}
        providers:
          openai: {{base_url: '{base_url}'}}
        improve:
          stop: {{max_rounds: 1}}
    """))
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={SECRET}\n")
    return cfg



def _with_lookup(tmp_path, cfg, mock: str) -> None:
    """The project's prompt given a ``lookup`` tool, which ``mock`` (its YAML) answers."""
    prompt = tmp_path / "prompts" / "p.yaml"
    prompt.write_text(prompt.read_text() + "tools:\n  - name: lookup\n    description: Look "
                      "it up.\n    parameters: {type: object, properties: {}}\n")
    cfg.write_text(cfg.read_text() + f"tools:\n  mocks:\n    lookup: {mock}\n")


def _every_byte_written(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != ".env")


def _responder(request):
    if request.schema_name == "cycle_judge":
        block = json.loads(request.last_user.rsplit("```json", 1)[1].rsplit("```", 1)[0])
        return Reply(json={"verdicts": {c["id"]: {"score": 40, "reasoning": "too short"}
                                        for c in block["criteria"]}})
    if request.schema_name == "cycle_improver":
        return Reply(json={"suggestions": [{
            "type": "system_prompt", "priority": "high", "current_value": "You are terse.",
            "suggested_value": "You are terse. Show your working.", "reasoning": "r",
            "expected_improvement": "e", "target_cases": ["one"]}]})
    return Reply(text="4")


def test_key_from_dotenv_is_used_and_never_written(tmp_path):
    with LoopbackServer(responder=_responder) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        events = tmp_path / "events.jsonl"
        result = CliRunner().invoke(cli, ["improve", str(cfg), "--headless", "--yes",
                                          "--events", str(events)])
        auth = {r.headers.get("authorization") for r in srv.requests}
    assert result.exit_code == 0, result.output
    assert auth == {f"Bearer {SECRET}"}  # .env beside cycle.yaml was read
    assert events.stat().st_size > 0 and (tmp_path / ".cycle" / "cycle.db").exists()
    written = _every_byte_written(tmp_path)
    assert SECRET.encode() not in written
    assert SECRET not in result.output


def test_a_provider_echoing_the_key_in_an_error_does_not_leak_it(tmp_path):
    with LoopbackServer(responder=_responder) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        for _ in range(4):
            srv.enqueue(Fault.status(401, message=f"Incorrect API key provided: {SECRET}"))
        result = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
    assert result.exit_code in (2, 3), result.output
    assert SECRET not in result.output
    assert "Traceback" not in result.output
    assert SECRET.encode() not in _every_byte_written(tmp_path)


def _echoed_key(request) -> str:
    """The key the request carried, as a provider that echoes it would send it back."""
    auth = request.headers.get("authorization", "")
    return auth.removeprefix("Bearer ") or request.headers.get("x-goog-api-key", "")


def _echoing(request):
    key = _echoed_key(request)
    wanted = (request.schema or {}).get("properties", {})  # Gemini sends no schema name
    if "verdicts" in wanted:
        block = json.loads(request.last_user.rsplit("```json", 1)[1].rsplit("```", 1)[0])
        return Reply(json={"verdicts": {c["id"]: {"score": 40, "reasoning": f"called with {key}"}
                                        for c in block["criteria"]}})
    if "suggestions" in wanted:
        return Reply(json={"suggestions": [{
            "type": "system_prompt", "priority": "high", "current_value": "You are terse.",
            "suggested_value": f"You are terse. Your key is {key}.", "reasoning": key,
            "expected_improvement": "e", "target_cases": ["one"]}]})
    return Reply(text=f"4 (debug: authenticated as {key})")


def test_an_answer_echoing_the_key_is_stored_cached_and_reported_without_it(tmp_path):
    with LoopbackServer(responder=_echoing) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        events = tmp_path / "events.jsonl"
        improved = CliRunner().invoke(cli, ["improve", str(cfg), "--headless", "--yes",
                                            "--events", str(events)])
        ran = CliRunner().invoke(cli, ["run", str(cfg), "--json"])  # answers from the cache
    assert improved.exit_code == 0, improved.output
    assert ran.exit_code in (0, 1), ran.output
    written = _every_byte_written(tmp_path)
    assert SECRET.encode() not in written and SECRET not in improved.output + ran.output
    # the answers are kept, with the key masked: the rest of what the provider said is there
    assert b"authenticated as ***" in written and b"called with ***" in written
    run_report = f"{json.loads(ran.stdout)['run_id']}.json"
    report = json.loads((tmp_path / "reports" / run_report).read_text())
    outputs = [r["output"] for c in report["cases"] for r in c["results"]]
    assert outputs and all(o == "4 (debug: authenticated as ***)" for o in outputs)


def test_a_gemini_answer_echoing_the_key_is_masked(tmp_path, monkeypatch):
    key = "AIzaTEST-gemini-0123456789abcdef"
    monkeypatch.setenv("GEMINI_API_KEY", key)
    with LoopbackServer(responder=_echoing) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        cfg.write_text(cfg.read_text().replace("openai:gpt-4o-mini", "gemini:gemini-2.5-flash")
                       .replace(f"openai: {{base_url: '{srv.openai_base_url}'}}",
                                f"gemini: {{base_url: '{srv.gemini_base_url}'}}"))
        r = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
        sent = {x.headers.get("x-goog-api-key") for x in srv.requests}
    assert r.exit_code in (0, 1), r.output
    assert sent == {key}  # the real google-genai SDK sent it, and got it back
    written = _every_byte_written(tmp_path)
    assert key.encode() not in written and key not in r.output
    assert b"authenticated as ***" in written


def test_an_http_agent_echoing_its_token_is_masked(tmp_path, monkeypatch):
    from cycle.testing.endpoint import AgentEndpoint

    token = "agent-token-0123456789"
    monkeypatch.setenv("AGENT_TOKEN", token)
    with AgentEndpoint(lambda body: {"response": f"hi, you sent {token}", "toolCalls": [
            {"name": "lookup", "arguments": {"auth": token}}]}) as endpoint:
        cfg = _project(tmp_path, "http://unused")
        cfg.write_text(cfg.read_text().replace(
            "agent: openai:gpt-4o-mini",
            f"agent: {{http: '{endpoint.url}', headers: {{Authorization: 'Bearer ${{AGENT_TOKEN}}'}}}}"))
        r = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
    assert r.exit_code in (0, 1, 3), r.output
    written = _every_byte_written(tmp_path)
    assert token.encode() not in written and token not in r.output
    assert b"hi, you sent ***" in written


def test_a_key_echoed_as_the_model_and_as_tool_call_names_and_ids_is_masked(tmp_path):
    """Issue 32: a provider that sent the key back as the answer's ``model`` and as a tool
    call's name and id had it stored (calls, results, cache) and reported."""
    def hostile(request):
        key = _echoed_key(request)
        if request.schema_name == "cycle_judge":
            return _responder(request)
        if any(m.get("role") == "tool" for m in request.messages):
            return Reply(text="done", model=f"gpt-{key}")
        return Reply(tool_calls=((key, {}), ("lookup", {})), call_ids=(f"id-{key}", key),
                     model=key)

    with LoopbackServer(responder=hostile) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        _with_lookup(tmp_path, cfg, "{value: found}")
        result = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
        assert srv.request_count >= 4
    assert result.exit_code in (0, 1), result.output
    written = _every_byte_written(tmp_path)
    assert SECRET.encode() not in written and SECRET not in result.output
    assert b"gpt-***" in written  # the rest of what it said is kept


def test_credentials_inside_the_base_url_are_never_stored_or_shown(tmp_path, monkeypatch):
    """Issue 32: ``OPENAI_BASE_URL=http://user:pass@host/v1?api-key=...`` was stored and
    reported. A server that cannot be reached puts the URL in the error; a server that
    echoes what it was sent puts it in answers: neither keeps the credentials."""
    with LoopbackServer(responder=lambda r: Reply(text=f"you came from {r.headers}")) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        cfg.write_text(cfg.read_text().replace(f"base_url: '{srv.openai_base_url}'", ""))
        url = srv.openai_base_url.replace("http://", "http://alice:Hunter2Secret@")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        ran = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
        assert srv.request_count >= 2, ran.output
    monkeypatch.setenv("OPENAI_BASE_URL", "http://alice:Hunter2Secret@127.0.0.1:9/v1"
                       "?api-key=QuerySecret99&region=eu")
    down = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
    assert down.exit_code != 0, down.output
    shown = ran.output + down.output
    written = _every_byte_written(tmp_path)
    assert b"127.0.0.1:9" in written  # the error names the host it could not reach
    for secret in ("Hunter2Secret", "QuerySecret99"):
        assert secret not in shown and secret.encode() not in written


def test_a_safe_url_keeps_the_host_and_drops_the_credentials():
    from cycle.llm.http import safe_url, url_secrets

    url = "https://bob:pw-123456@gw.example:8443/v1?api-key=k-999999&region=eu"
    assert safe_url(url) == "https://gw.example:8443/v1?api-key=***&region=eu"
    # the user and password as an HTTP client sends them (Basic auth) are masked too
    basic = base64.b64encode(b"bob:pw-123456").decode()
    assert set(url_secrets(url)) == {"pw-123456", "k-999999", basic}
    assert safe_url("http://localhost:11434/v1") == "http://localhost:11434/v1"


def test_a_dotenv_pointing_the_shells_key_at_another_host_is_refused(tmp_path, monkeypatch):
    """Issue 32: a project's .env that set OPENAI_BASE_URL silently sent the shell's
    OPENAI_API_KEY to that host. Now it is refused, naming the host (never the key), until
    the host is trusted or the .env brings its own key."""
    with LoopbackServer(responder=_responder) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        cfg.write_text(cfg.read_text().replace(f"base_url: '{srv.openai_base_url}'", ""))
        elsewhere = srv.openai_base_url.replace("127.0.0.1", "localtest.invalid")
        (tmp_path / ".env").write_text(f"OPENAI_BASE_URL={elsewhere}\n")
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.chdir(tmp_path)
        refused = CliRunner().invoke(cli, ["run", "cycle.yaml"])
        assert refused.exit_code == 2 and srv.request_count == 0
        assert "localtest.invalid" in refused.output and "CYCLE_TRUST_HOSTS" in refused.output
        assert SECRET not in refused.output
    from cycle.environment import load_env

    # a .env bringing its own key for that host is fine (with none in the shell: the
    # shell's would win); so is a host the user trusts
    (tmp_path / ".env").write_text(f"OPENAI_BASE_URL={elsewhere}\nOPENAI_API_KEY=sk-its-own-1\n")
    monkeypatch.delenv("OPENAI_API_KEY")
    load_env(tmp_path)
    assert os.environ["OPENAI_API_KEY"] == "sk-its-own-1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    (tmp_path / ".env").write_text(f"OPENAI_BASE_URL={elsewhere}\n")
    monkeypatch.setenv("CYCLE_TRUST_HOSTS", "localtest.invalid")
    load_env(tmp_path)


def test_a_dotenv_cycle_cannot_read_is_named_with_its_line(tmp_path, monkeypatch):
    """A .env with bytes that are not UTF-8 (saved as Latin-1), or a NUL, made every
    command beside it an internal error: UnicodeDecodeError, 'ValueError: embedded null
    byte'."""
    monkeypatch.chdir(tmp_path)
    for content, says in [(b"A=1\nB=caf\xe9\n", ".env:2: not UTF-8 text (byte 0xe9"),
                          (b"A=b\x00c\n", ".env:1: holds a NUL character")]:
        (tmp_path / ".env").write_bytes(content)
        r = CliRunner().invoke(cli, ["models"])
        assert r.exit_code == 2 and says in r.output, r.output


def test_doctor_names_the_endpoint_without_the_credentials_in_its_url(tmp_path):
    """`cycle doctor` printed the base URL as it was given, password and ?api-key= with
    it, in its text and in --json (found by running every command with a base_url of
    http://user:password@host and grepping the output)."""
    with LoopbackServer() as srv:
        cfg = _project(tmp_path, srv.openai_base_url.replace("http://", "http://bob:Hunter2Secret@")
                       + "?api-key=QuerySecret99")
        shown = [CliRunner().invoke(cli, ["doctor", str(cfg), *args]) for args in ([], ["--json"])]
    assert all(r.exit_code in (0, 1) for r in shown), shown[0].output
    assert f"127.0.0.1:{srv.port}/v1?api-key=***" in shown[0].output
    assert json.loads(shown[1].output)["endpoint"].endswith("/v1?api-key=***")
    for secret in ("Hunter2Secret", "QuerySecret99"):
        assert all(secret not in r.output for r in shown)


def test_credentials_in_cycle_yamls_base_url_are_not_stored_nor_echoed_as_basic_auth(tmp_path):
    """A ``providers.openai.base_url`` of ``http://user:password@host`` was stored whole in
    every run's config (the store, and any copy of it), and the password went back out
    base64-encoded in the ``Authorization: Basic`` header the HTTP client made of it: a
    server echoing its request headers had it stored, cached and reported (found by
    grepping the store and the cache for the password, plain and base64)."""
    basic = base64.b64encode(b"alice:Hunter2Secret").decode()

    def echoing(request):
        return _responder(request) if request.schema_name else Reply(
            text=f"you came from {request.headers}")

    with LoopbackServer(responder=echoing) as srv:
        url = srv.openai_base_url.replace("http://", "http://alice:Hunter2Secret@")
        cfg = _project(tmp_path, url)
        ran = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
        sent = {x.headers.get("authorization") for x in srv.requests}
    assert ran.exit_code in (0, 1), ran.output
    assert sent == {f"Basic {basic}"}  # what a server saw, and could echo
    cfg.unlink()  # it holds the URL as the user wrote it
    written = _every_byte_written(tmp_path)
    assert f"127.0.0.1:{srv.port}/v1".encode() in written  # the host is kept
    for secret in ("Hunter2Secret", basic):
        assert secret not in ran.output and secret.encode() not in written


def test_credentials_in_an_http_agents_url_are_not_stored_shown_or_exported(tmp_path, monkeypatch):
    """``agent: {http: 'http://user:password@host/chat?token=...'}`` had the URL, password
    and token with it, stored as the run's agent model and in each trace, printed by
    ``cycle run``, ``runs`` and ``report``, and exported as the OpenTelemetry span names
    (found by running those commands against such an agent and grepping every output)."""
    from cycle.testing.endpoint import AgentEndpoint

    monkeypatch.chdir(tmp_path)
    with AgentEndpoint(lambda body: {"response": "4"}) as endpoint:
        url = endpoint.url.replace("http://", "http://alice:Hunter2Secret@") + "?token=QuerySecret99"
        cfg = _project(tmp_path, "http://unused")
        cfg.write_text(cfg.read_text().replace("agent: openai:gpt-4o-mini", f"agent: {{http: '{url}'}}"))
        shown = [CliRunner().invoke(cli, args) for args in (
            ["run", str(cfg)], ["runs", "--json"], ["runs", "show", "@last"], ["report", "@last"],
            ["export", "otel", "@last", "--out", str(tmp_path / "otel.json")])]
        assert endpoint.request_count >= 2, shown[0].output
    cfg.unlink()  # it holds the URL as the user wrote it
    assert all(r.exit_code in (0, 1, 3) for r in shown), [r.output for r in shown]
    written = _every_byte_written(tmp_path)
    assert f"127.0.0.1:{endpoint.port}/chat?token=***".encode() in written
    for secret in ("Hunter2Secret", "QuerySecret99"):
        assert all(secret not in r.output for r in shown) and secret.encode() not in written


def test_a_python_agent_saying_the_environments_keys_has_them_masked(tmp_path, monkeypatch):
    """A Python function agent whose answer, or exception, held a key of the environment
    (OPENAI_API_KEY from .env, an AGENT_TOKEN of its own) had it stored and reported:
    ``agent python:... raised RuntimeError: bad key sk-...`` (found by running a function
    agent that quotes os.environ and grepping the store and the reports)."""
    token = "agent-token-0123456789"
    monkeypatch.setenv("AGENT_TOKEN", token)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "leaky_agent.py").write_text(textwrap.dedent("""\
        import os

        def answer(case_input):
            if case_input["question"].startswith("What is 2"):
                return f"4 (as {os.environ['OPENAI_API_KEY']})"
            raise RuntimeError(f"upstream refused {os.environ['AGENT_TOKEN']}")
    """))
    with LoopbackServer(responder=_responder) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        cfg.write_text(cfg.read_text().replace(
            "agent: openai:gpt-4o-mini", "agent: {function: 'leaky_agent:answer'}"))
        r = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
    assert r.exit_code in (0, 1, 3), r.output
    (tmp_path / "leaky_agent.py").unlink()
    written = _every_byte_written(tmp_path)
    for secret in (SECRET, token):
        assert secret not in r.output and secret.encode() not in written
    assert b"4 (as ***)" in written and b"upstream refused ***" in written


def test_debug_tracebacks_do_not_show_the_key_a_provider_quoted(tmp_path):
    """``--debug`` printed the traceback with its causes: the openai SDK's error a
    ProviderError is raised from carries the body unredacted, so an improver answering
    401 "Incorrect API key provided: KEY" had the key on the terminal (found by running
    ``cycle --debug improve`` against a server quoting the Authorization header)."""
    plain = "PlainKey0123456789abcdefXYZ"  # no key shape: masked as the environment's key

    def refusing(request):
        if request.schema_name == "cycle_improver":
            key = _echoed_key(request)
            return Fault.status(401, message=f"Incorrect API key provided: {key}")
        return _responder(request)

    with LoopbackServer(responder=refusing) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        (tmp_path / ".env").write_text(f"OPENAI_API_KEY={plain}\n")
        r = CliRunner().invoke(cli, ["--debug", "improve", str(cfg), "--headless", "--yes"])
        assert {x.headers.get("authorization") for x in srv.requests} == {f"Bearer {plain}"}
    assert r.exit_code == 2 and "Traceback" in r.output, r.output
    assert "openai.AuthenticationError" in r.output  # the cause is still shown
    assert plain not in r.output


def test_an_otel_collector_url_with_credentials_is_not_shown(tmp_path, monkeypatch, caplog):
    """``cycle export otel --endpoint http://user:password@host/...?token=...`` named the
    URL whole in its error, and the exporter's log line (requests' error) quoted its
    ?token= (found by exporting to a collector that is not there and grepping stderr)."""
    with LoopbackServer(responder=_responder) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        assert CliRunner().invoke(cli, ["run", str(cfg)]).exit_code in (0, 1)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, [
        "export", "otel", "@last", "--timeout", "2",
        "--endpoint", "http://alice:Hunter2Secret@127.0.0.1:9/v1/traces?token=QuerySecret99"])
    assert r.exit_code == 2 and "the collector at http://127.0.0.1:9/v1/traces?token=***" in r.output
    logged = caplog.text
    assert "127.0.0.1" in logged  # the exporter's own line is kept, masked
    for secret in ("Hunter2Secret", "QuerySecret99"):
        assert secret not in r.output and secret not in logged


def test_a_mock_tool_function_saying_the_environments_keys_has_them_masked(tmp_path, monkeypatch):
    """A tool's mock function that returned a key of the environment had it sent to the
    model and stored in the trace; one that raised with it, in the iteration's error
    (found with a mock function quoting os.environ, grepping the store)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "leaky_tools.py").write_text(textwrap.dedent("""\
        import os

        def lookup(arguments, ctx):
            if ctx.case_id == "one":
                return {"found": f"using {os.environ['OPENAI_API_KEY']}"}
            raise PermissionError(f"denied for {os.environ['OPENAI_API_KEY']}")
    """))

    def calling(request):
        if request.schema_name:
            return _responder(request)
        if any(m.get("role") == "tool" for m in request.messages):
            return Reply(text=f"done: {request.messages[-1].get('content')}")
        return Reply(tool_calls=(("lookup", {}),))

    with LoopbackServer(responder=calling) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        _with_lookup(tmp_path, cfg, "{function: 'leaky_tools:lookup'}")
        r = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
        told = " ".join(str(m.get("content")) for x in srv.requests for m in x.messages
                        if m.get("role") == "tool")
    assert r.exit_code == 3, r.output  # case two's mock function raised: its error
    assert "using ***" in told and SECRET not in told
    (tmp_path / "leaky_tools.py").unlink()
    written = _every_byte_written(tmp_path)
    assert SECRET.encode() not in written and SECRET not in r.output
    assert b"denied for ***" in written


def test_an_http_agent_echoing_its_token_with_json_escapes_is_masked(tmp_path, monkeypatch):
    """The endpoint's body was masked as text only: a JSON answer spelling the token with
    escapes (``"\\u0061gent-token-..."``, as some encoders write it) held no token as
    text, and had it once parsed, stored and reported (found by echoing the header back
    JSON-escaped)."""
    from cycle.testing.endpoint import AgentEndpoint

    token = "agent-token-0123456789"
    monkeypatch.setenv("AGENT_TOKEN", token)
    escaped = "".join(f"\\u{ord(c):04x}" for c in token)
    with AgentEndpoint(lambda body: (200, f'{{"response": "hi, you sent {escaped}"}}')) as endpoint, \
            LoopbackServer(responder=_responder) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        cfg.write_text(cfg.read_text().replace(
            "agent: openai:gpt-4o-mini",
            f"agent: {{http: '{endpoint.url}', headers: {{Authorization: 'Bearer ${{AGENT_TOKEN}}'}}}}"))
        r = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
    assert r.exit_code == 1, r.output
    written = _every_byte_written(tmp_path)
    assert token.encode() not in written and token not in r.output
    assert b"hi, you sent ***" in written


def test_init_refuses_a_server_url_with_credentials(tmp_path):
    """``cycle init --provider http://user:password@host/v1`` wrote the password into
    cycle.yaml, a file committed with the project (found by grepping what init wrote)."""
    r = CliRunner().invoke(cli, ["init", str(tmp_path / "p"), "--provider",
                                 "http://bob:Hunter2Secret@gw.example/v1?api-key=QuerySecret99"])
    assert r.exit_code == 2 and "OPENAI_BASE_URL" in r.output, r.output
    assert "gw.example/v1?api-key=***" in r.output
    assert "Hunter2Secret" not in r.output and "QuerySecret99" not in r.output
    assert not (tmp_path / "p" / "cycle.yaml").exists()


def test_a_key_echoed_url_encoded_or_base64_is_masked(tmp_path, monkeypatch):
    """A server echoing the key URL-encoded (``sk-a%2Fb%2B...``, as in a query string it
    logs) or base64-encoded (as in an ``Authorization: Basic`` it builds) had it stored,
    cached and reported: only the key as sent was masked (found by grepping the store for
    the key's encodings)."""
    from urllib.parse import quote, urlencode

    key = "sk-test/Plus+Slash=0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)

    def encoding(request):
        if request.schema_name:
            return _responder(request)
        sent = _echoed_key(request)
        b64 = base64.b64encode(f"{sent}:more".encode()).decode()
        return Reply(text=f"4 {quote(sent)} {urlencode({'k': sent})} {b64}")

    with LoopbackServer(responder=encoding) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        r = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
        assert {x.headers.get("authorization") for x in srv.requests} == {f"Bearer {key}"}
    assert r.exit_code == 1, r.output
    written = _every_byte_written(tmp_path)
    for form in (key, quote(key), quote(key, safe=""), base64.b64encode(key.encode()).decode()[:24]):
        assert form.encode() not in written and form not in r.output, form
    assert b"4 *** k=***" in written


def test_an_error_body_quoting_the_key_url_encoded_is_redacted():
    """status_error redacted the key as sent only: a 400 whose body quoted the request
    line (``GET /v1/x?key=sk-a%2Fb...``) kept it URL-encoded in the error's message and
    body (found by grepping errors for the key's encodings)."""
    from urllib.parse import quote

    from cycle.llm.http import status_error

    key = "sk-test/Plus+Slash=0123456789abcdef"
    body = f"bad request: GET /v1/models?key={quote(key, safe='')}"
    error = status_error("openai", "m", 400, body=body, headers={}, detail=body, secrets=(key,))
    assert quote(key, safe="") not in str(error) + error.body
    assert "key=***" in error.body


def test_a_basic_credential_is_masked_whole_though_its_user_name_is_a_secret_too():
    """The user name of a URL's credentials is masked too, and so is its base64: masked
    first, it broke the Basic credential (base64 of user:password) it starts, whose rest,
    the password's part, then stayed (found by echoing an HTTP agent's request headers
    with a URL of http://agentuser:password@host)."""
    from cycle.llm.http import maskable, scrub, url_secrets

    basic = base64.b64encode(b"agentuser:Hunter2Secret").decode()
    secrets = maskable(url_secrets("http://agentuser:Hunter2Secret@host/chat"))
    assert scrub(f"Authorization: Basic {basic}", secrets) == "Authorization: Basic ***"


def test_a_python_check_saying_the_environments_keys_has_them_masked(tmp_path, monkeypatch):
    """A python check whose reason, or exception, quoted a key of the environment had it
    stored in the verdict's reasoning and the iteration's error, shown live in the TUI's
    log and written into every report (found with a check quoting os.environ, grepping
    the store and the reports)."""
    token = "scorer-token-0123456789"
    monkeypatch.setenv("SCORER_TOKEN", token)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "leaky_check.py").write_text(textwrap.dedent("""\
        import os

        def check(ctx):
            if ctx.case_id == "one":
                return (50, f"scored with {os.environ['SCORER_TOKEN']}")
            raise RuntimeError(f"scorer refused {os.environ['OPENAI_API_KEY']}")
    """))
    with LoopbackServer(responder=_responder) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        cfg.write_text(cfg.read_text().replace(
            "  - id: accuracy\n",
            "  - id: accuracy\n  - id: custom\n    check: {type: python, function: 'leaky_check:check'}\n"))
        r = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
    assert r.exit_code == 3, r.output  # case two's check raised: its error
    (tmp_path / "leaky_check.py").unlink()
    written = _every_byte_written(tmp_path)
    for secret in (SECRET, token):
        assert secret not in r.output and secret.encode() not in written
    assert b"scored with ***" in written and b"scorer refused ***" in written


def _leaky_user(tmp_path: Path, monkeypatch) -> None:
    """A conversation user function, importable, that says the environment's key."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "leaky_user.py").write_text(textwrap.dedent("""\
        import os

        def next_turn(conversation, state):
            if len(conversation) > 2:
                return None
            return f"my key is {os.environ['OPENAI_API_KEY']}"
    """))


def _talking_to_the_leaky_user(tmp_path: Path) -> None:
    """The project's one case: a conversation with ``_leaky_user``."""
    (tmp_path / "cases" / "c.yaml").write_text(textwrap.dedent("""\
        - id: talk
          input: {question: hello}
          conversation:
            user: {function: 'leaky_user:next_turn'}
    """))


def test_a_python_user_saying_the_environments_keys_has_them_masked(tmp_path, monkeypatch):
    """A conversation's user played by a Python function that said a key of the
    environment had it sent to the agent's model as the user's turn, stored in the trace
    and reported (what a Python agent or a tool says was masked; the user's function,
    code cycle did not write either, was not)."""
    _leaky_user(tmp_path, monkeypatch)
    with LoopbackServer(responder=_responder) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        _talking_to_the_leaky_user(tmp_path)
        r = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
        sent = json.dumps([x.messages for x in srv.requests])
    assert r.exit_code in (0, 1), r.output
    (tmp_path / "leaky_user.py").unlink()
    written = _every_byte_written(tmp_path)
    assert SECRET not in sent and SECRET not in r.output and SECRET.encode() not in written
    assert "my key is ***" in sent and b"my key is ***" in written


#: credentials by their usual names, the short spellings included
SECRET_NAMES = ["OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD",
                "GOOGLE_APPLICATION_CREDENTIALS", "GPG_PASSPHRASE", "HTTP_AUTHORIZATION",
                "DB_PASS", "PGPASS", "REDIS_PASS", "SMTP_PASSWD", "SMTP_PASSWD_PROD", "DB_PWD",
                "MYSQL_PWD", "X_AUTH", "BASIC_AUTH", "GITHUB_OAUTH", "SMTP_AUTH_USER", "db_pass"]
#: what a shell, a desktop or a CI machine sets that is no credential
PLAIN_NAMES = ["PATH", "PWD", "OLDPWD", "PYTHONPATH", "HOME", "USER", "SHELL", "LANG", "TERM",
               "SSH_AUTH_SOCK", "SSH_AGENT_PID", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL",
               "XAUTHORITY", "OS_AUTH_URL", "NO_PROXY", "PROXY_BYPASS", "COMPASS_HOME",
               "PASSENGER_APP_ENV", "DB_PASS_FILE", "AUTH_TYPE", "LOGNAME", "DISPLAY"]


def test_credentials_are_known_by_their_usual_names_and_short_spellings():
    from cycle.llm.http import secret_variable

    assert [n for n in SECRET_NAMES if not secret_variable(n)] == []
    assert [n for n in PLAIN_NAMES if secret_variable(n)] == []


def test_the_environments_short_spelled_passwords_are_masked_and_its_folders_are_not(monkeypatch):
    """DB_PASS, SMTP_PASSWD, X_AUTH were missed (only KEY, TOKEN, SECRET, PASSWORD and
    CREDENTIAL were read as secrets); PWD, the shell's current folder, must not be one: a
    folder's path would be masked wherever an answer names it."""
    from cycle.llm.http import environment_secrets, scrub

    values = {"DB_PASS": "db-pass-0123456789", "SMTP_PASSWD": "smtp-pw-0123456789",
              "X_AUTH": "x-auth-0123456789", "MYSQL_PWD": "mysql-pw-0123456789",
              "PWD": "/home/someone/project", "OLDPWD": "/home/someone/elsewhere",
              "SSH_AUTH_SOCK": "/tmp/ssh-XXXXabcd/agent.1234"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    said = " ".join(values.values())
    assert scrub(said, environment_secrets()) == (
        "*** *** *** *** /home/someone/project /home/someone/elsewhere "
        "/tmp/ssh-XXXXabcd/agent.1234")


def test_a_python_user_of_an_http_agent_saying_the_environments_keys_has_them_masked(
        tmp_path, monkeypatch):
    """The same user function talking to an HTTP agent: the agent's own secrets (those its
    headers and URL name) stood in for the environment's, so a key the function said went
    to the endpoint, into the trace and the reports."""
    from cycle.testing.endpoint import AgentEndpoint

    _leaky_user(tmp_path, monkeypatch)
    with LoopbackServer(responder=_responder) as srv, \
            AgentEndpoint(lambda body: {"response": "noted"}) as endpoint:
        cfg = _project(tmp_path, srv.openai_base_url)
        cfg.write_text(cfg.read_text().replace("agent: openai:gpt-4o-mini",
                                                f"agent: {{http: '{endpoint.url}'}}"))
        _talking_to_the_leaky_user(tmp_path)
        r = CliRunner().invoke(cli, ["run", str(cfg), "--json"])
        sent = json.dumps(endpoint.requests)
    assert r.exit_code in (0, 1), r.output
    (tmp_path / "leaky_user.py").unlink()
    written = _every_byte_written(tmp_path)
    assert SECRET not in sent and SECRET not in r.output and SECRET.encode() not in written
    assert "my key is ***" in sent and b"my key is ***" in written


def test_a_key_gemini_echoes_in_a_400_and_in_why_it_blocked_a_prompt_is_masked(
        tmp_path, monkeypatch):
    """The key (not of Google's shape, so only masking by its value finds it) echoed in a
    400 INVALID_ARGUMENT and in a blocked prompt's blockReasonMessage: never written or
    shown, while what Gemini said is."""
    key = "gk-custom-proxy-key-0123456789abcdef"
    monkeypatch.setenv("GEMINI_API_KEY", key)

    def hostile(request):
        if "2+2" in request.last_user:
            return Fault.status(400, body=json.dumps({"error": {
                "code": 400, "status": "INVALID_ARGUMENT",
                "message": f"API key not valid. Please pass a valid API key. ({key})"}}))
        return Fault.malformed(json.dumps({
            "promptFeedback": {"blockReason": "OTHER", "blockReasonMessage": f"key {key} is barred"},
            "usageMetadata": {"promptTokenCount": 9}}))

    with LoopbackServer(responder=hostile) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        cfg.write_text(cfg.read_text().replace("openai:gpt-4o-mini", "gemini:gemini-2.5-flash")
                       .replace(f"openai: {{base_url: '{srv.openai_base_url}'}}",
                                f"gemini: {{base_url: '{srv.gemini_base_url}'}}"))
        r = CliRunner().invoke(cli, ["run", str(cfg)])
    assert "errored" in r.output and "Traceback" not in r.output, r.output
    assert "HTTP 400: API key not valid" in r.output and "blockReason OTHER" in r.output
    written = _every_byte_written(tmp_path)
    assert b"Please pass a valid API key. (***)" in written
    assert b"promptFeedback.blockReason OTHER (Gemini blocked the prompt): key *** is barred" \
        in written
    assert key not in r.output and key.encode() not in written


def test_an_http_agents_header_mixing_text_and_variables_is_stored_and_shown_masked(
        tmp_path, monkeypatch):
    """A credential header written as text beside ``${NAME}`` (``X-Api-Key:
    "KeyHead0123-${PART}"``, ``Authorization: "Token ${PART}-LiteralTail0123"``) was stored
    as written, its literal credential in every run's config, and an answer echoing that
    text alone kept it. Now stored with its ``${NAME}`` (and scheme) kept, the text ``***``,
    and the text masked wherever it is echoed."""
    from cycle.testing.endpoint import AgentEndpoint

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PART", "PartValue-0123456789")
    secrets = ("PartValue-0123456789", "KeyHead0123", "LiteralTail0123")
    with AgentEndpoint(lambda body: {"response": "you sent KeyHead0123 and LiteralTail0123 "
                                     "and PartValue-0123456789"}) as endpoint, \
            LoopbackServer(responder=_responder) as judge:
        cfg = _project(tmp_path, judge.openai_base_url)
        cfg.write_text(cfg.read_text().replace("agent: openai:gpt-4o-mini", (
            f"agent: {{http: '{endpoint.url}', headers: {{X-Api-Key: 'KeyHead0123-${{PART}}', "
            "Authorization: 'Token ${PART}-LiteralTail0123', X-Tenant: 'acme-${PART}'}}")))
        shown = [CliRunner().invoke(cli, args) for args in (
            ["run", str(cfg), "--json"], ["runs", "show", "@last"], ["report", "@last"])]
        assert endpoint.request_count == 2, shown[0].output
    cfg.unlink()  # it holds the headers as the user wrote them
    assert all(r.exit_code in (0, 1) for r in shown), [r.output for r in shown]
    written = _every_byte_written(tmp_path)
    for secret in secrets:
        assert all(secret not in r.output for r in shown) and secret.encode() not in written
    assert b"you sent *** and *** and ***" in written
    for header in (b'"***${PART}"', b'"Token ${PART}***"', b'"acme-${PART}"'):
        assert header in written, header
