"""`cycle export otel` (issue 37): a stored run as OpenTelemetry traces after the GenAI
conventions, as OTLP JSON and over OTLP/HTTP to a loopback receiver, decoded with the
OpenTelemetry proto package."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.store import Store
from tests.stored import copied, run


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory) -> tuple[Path, str]:
    project = copied("agent-tools", tmp_path_factory.mktemp("otel"))
    store = project / "s.db"
    return store, run(store, project / "cycle.yaml", "-n", "1")


def attributes(item: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in item.get("attributes", [])}


def test_a_run_as_otlp_json(stored_run, tmp_path):
    store, run_id = stored_run
    out = tmp_path / "traces.json"
    r = CliRunner().invoke(cli, ["--store", str(store), "export", "otel", run_id, "--out", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    [resource] = data["resourceSpans"]
    assert {"key": "service.name", "value": {"stringValue": "cycle"}} in resource["resource"]["attributes"]
    spans = [s for scope in resource["scopeSpans"] for s in scope["spans"]]
    roots = [s for s in spans if "parentSpanId" not in s]
    with Store.open(store) as s:
        iterations = len(s.runs.load_results(run_id))
    assert len(roots) == iterations and len({s["traceId"] for s in spans}) == iterations
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)  # hex
    names = {s["name"] for s in spans}
    # the example's first prompt refunds at once: its tool call is the refund
    assert {"invoke_agent order-support", "chat default", "execute_tool refund"} <= names
    tool = next(s for s in spans if s["name"] == "execute_tool refund")
    assert attributes(tool)["gen_ai.tool.name"] == "refund"
    assert attributes(tool)["gen_ai.operation.name"] == "execute_tool"
    chat = next(s for s in spans if s["name"] == "chat default")
    assert attributes(chat)["gen_ai.system"] == attributes(chat)["gen_ai.provider.name"] == "offline"
    assert "gen_ai.response.finish_reasons" in attributes(chat)  # as the model said it
    evaluations = [e for s in roots for e in s.get("events", [])
                   if e["name"] == "gen_ai.evaluation.result"]
    assert {attributes(e)["gen_ai.evaluation.name"] for e in evaluations} >= {
        "checks_before_refund", "refunded", "no_tool_errors", "tone"}
    assert {attributes(e)["gen_ai.evaluation.score.label"] for e in evaluations} <= {"pass", "fail"}
    assert all(int(s["endTimeUnixNano"]) >= int(s["startTimeUnixNano"]) for s in spans)


def test_a_run_sent_to_a_collector_over_otlp_http(stored_run):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    store, run_id = stored_run
    received: list[tuple[str, bytes]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()
            self.wfile.write(b"")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        r = CliRunner().invoke(cli, ["--store", str(store), "export", "otel", run_id,
                                     "--endpoint", url])
        assert r.exit_code == 0, r.output
        assert "sent to" in r.output
    finally:
        server.shutdown()
    [(path, body)] = received
    assert path == "/v1/traces"
    request = ExportTraceServiceRequest.FromString(body)
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert any(s.name == "execute_tool refund" for s in spans)
    assert any(e.name == "gen_ai.evaluation.result" for s in spans for e in s.events)


def test_a_collector_that_is_not_there_is_a_clear_error(stored_run):
    store, run_id = stored_run
    r = CliRunner().invoke(cli, ["--store", str(store), "export", "otel", run_id,
                                 "--endpoint", "http://127.0.0.1:9/v1/traces", "--timeout", "1"])
    assert r.exit_code != 0 and "did not take the traces" in r.output
    assert "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["--store", str(store), "export", "otel", run_id])
    assert r.exit_code == 2 and "--out FILE" in r.output


@pytest.mark.parametrize("timeout", ["inf", "1e300", "nan"])
def test_a_timeout_out_of_range_is_a_usage_error(stored_run, timeout):
    """--timeout inf (or 1e300) overflowed the exporter's deadline: 'internal error:
    OverflowError: timestamp out of range'; nan was taken as a timeout."""
    store, run_id = stored_run
    r = CliRunner().invoke(cli, ["--store", str(store), "export", "otel", run_id,
                                 "--endpoint", "http://127.0.0.1:9/v1/traces", "--timeout", timeout])
    assert r.exit_code == 2 and "Invalid value for '--timeout'" in r.output, r.output


def test_a_deadline_spent_in_the_exporters_backoff_is_the_same_clear_error(stored_run,
                                                                          monkeypatch):
    # The exporter waits a backoff that fits the deadline, then posts with the time left,
    # which can be below zero by then (CI saw it once with --timeout 1): a clock that moves
    # 40 ms a reading makes that happen every time.
    from opentelemetry.exporter.otlp.proto.http import trace_exporter
    clock = iter(i * 0.04 for i in range(1, 1000))
    monkeypatch.setattr(trace_exporter, "time", lambda: next(clock))
    monkeypatch.setattr(trace_exporter.random, "uniform", lambda a, b: 0.01)
    store, run_id = stored_run
    r = CliRunner().invoke(cli, ["--store", str(store), "export", "otel", run_id,
                                 "--endpoint", "http://127.0.0.1:9/v1/traces",
                                 "--timeout", "0.1"])
    assert r.exit_code == 2 and "did not take the traces" in r.output, r.output
    assert "internal error" not in r.output


# -- traces in: cycle import otel ------------------------------------------------

def exported_with_content(store: Path, run_id: str, out: Path) -> Path:
    r = CliRunner().invoke(cli, ["--store", str(store), "export", "otel", run_id, "--content",
                                 "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


def case_scores(store: Path, run_id: str) -> dict[str, tuple]:
    """Each case's representative score and its verdicts, criterion by criterion."""
    from cycle.evals.results import load_run

    with Store.open(store) as s:
        run = load_run(s.runs, run_id)
        return {k: (c.representative.score, sorted((v.criterion_id, v.score, v.passed)
                                                   for v in c.representative.verdicts))
                for k, c in run.cases.items()}


def test_a_run_round_trips_through_otlp_into_cases_that_score_the_same(stored_run, tmp_path):
    """cycle run -> OTLP JSON (with content) -> cycle import otel -> cases that run offline
    with no mock in cycle.yaml (each tool answers, and changes the state, as the trace
    says) and score as the original run's iterations did."""
    import yaml

    store, run_id = stored_run
    traces = exported_with_content(store, run_id, tmp_path / "traces.json")
    project = copied("agent-tools", tmp_path)
    shutil.rmtree(project / "cases")  # the imported cases only
    r = CliRunner().invoke(cli, ["import", "otel", str(traces), "--out",
                                 str(project / "cases" / "from-traces.yaml"), "--no-expected"])
    assert r.exit_code == 0, r.output
    assert "wrote 5 cases" in r.output and "5 with their tools mocked" in r.output
    config = yaml.safe_load((project / "cycle.yaml").read_text())
    del config["tools"]["mocks"]  # the trace's answers are the only mocks
    (project / "cycle.yaml").write_text(yaml.safe_dump(config))
    cases = yaml.safe_load((project / "cases" / "from-traces.yaml").read_text())
    late = next(c for c in cases if c["id"] == "late-parcel-0")
    assert late["input"] == {"customer": "Ann", "order": "A-1042",
                             "question": "My parcel came two weeks late, please refund it."}
    assert late["mocks"]["refund"] == {"value": {"refunded": True},
                                       "state": {"session.refunded": True}}
    assert "expected" not in late

    replay_store = tmp_path / "replay.db"
    replay_id = run(replay_store, project / "cycle.yaml", "-n", "1")
    before = case_scores(store, run_id)
    after = case_scores(replay_store, replay_id)
    # judged, and the mocked side effect happened (it changed the state as the trace says)
    assert all(score is not None and ("refunded", 100.0, True) in verdicts
               for score, verdicts in before.values())
    assert after == {f"{k}-0": v for k, v in before.items()}


def test_import_reads_genai_and_openinference_traces_as_other_tools_write_them(tmp_path):
    """A production agent's traces: GenAI content attributes (a conversation of two user
    turns, a tool answering per argument, a tool failing), and a Phoenix (OpenInference)
    trace; --where and --sample choose; the final answer becomes expected."""
    import yaml

    def attr(key, value):
        kind = {bool: "boolValue", int: "intValue", float: "doubleValue"}.get(type(value), "stringValue")
        return {"key": key, "value": {kind: value}}

    def span(trace, sid, name, attrs, parent=None, start=1, error=None):
        out = {"traceId": trace, "spanId": sid, "name": name, "startTimeUnixNano": str(start),
               "endTimeUnixNano": str(start + 1), "attributes": [attr(k, v) for k, v in attrs.items()]}
        if parent:
            out["parentSpanId"] = parent
        if error:
            out["status"] = {"code": 2, "message": error}
        return out

    msg = lambda role, text: {"role": role, "parts": [{"type": "text", "content": text}]}
    t1, t2, t3 = "a" * 32, "b" * 32, "c" * 32
    spans = [
        span(t1, "1" * 16, "invoke_agent support", {"gen_ai.operation.name": "invoke_agent",
                                                    "app.outcome": "complaint"}),
        span(t1, "2" * 16, "chat gpt-4o", {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([msg("system", "Be kind."), msg("user", "Where is A-1?"),
                                                 msg("assistant", "Checking."), msg("user", "And B-2?")]),
            "gen_ai.output.messages": json.dumps([msg("assistant", "A-1 shipped; B-2 is late.")])},
            parent="1" * 16, start=5),
        span(t1, "3" * 16, "execute_tool lookup", {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.arguments": json.dumps({"order": "A-1"}),
            "gen_ai.tool.call.result": json.dumps({"status": "shipped"})}, parent="1" * 16, start=2),
        span(t1, "4" * 16, "execute_tool lookup", {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.arguments": json.dumps({"order": "B-2"}),
            "gen_ai.tool.call.result": json.dumps({"status": "late"})}, parent="1" * 16, start=3),
        span(t1, "5" * 16, "execute_tool notify", {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "notify",
            "gen_ai.tool.call.arguments": "{}"}, parent="1" * 16, start=4, error="mail server down"),
        span(t1, "8" * 16, "execute_tool poll", {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "poll",
            "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": '"pending"'},
            parent="1" * 16, start=6),
        span(t1, "9" * 16, "execute_tool poll", {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "poll",
            "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": '"done"'},
            parent="1" * 16, start=7),
        span(t1, "a" * 16, "execute_tool pay", {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pay",
            "gen_ai.tool.call.arguments": '{"id": 1}'}, parent="1" * 16, start=8,
            error="declined"),
        span(t1, "b" * 16, "execute_tool pay", {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pay",
            "gen_ai.tool.call.arguments": '{"id": 1}', "gen_ai.tool.call.result": '"ok"'},
            parent="1" * 16, start=9),
        span(t2, "6" * 16, "ChatCompletion", {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "Cancel C-3",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Cancelled."}, start=10),
        span(t3, "7" * 16, "chat gpt-4o", {"gen_ai.operation.name": "chat"}, start=20),  # no content
    ]
    path = tmp_path / "prod.json"
    path.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": [
        attr("service.name", "support")]}, "scopeSpans": [{"spans": spans}]}]}))

    out = tmp_path / "cases.yaml"
    r = CliRunner().invoke(cli, ["import", "otel", str(path), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert f"trace {t3}: skipped, no user message" in r.output
    first, phoenix = yaml.safe_load(out.read_text())
    assert first["input"] == "Where is A-1?"
    assert first["conversation"] == {"follow_ups": ["And B-2?"]}
    assert first["expected"] == "A-1 shipped; B-2 is late."
    assert first["mocks"]["lookup"] == {"match": [
        {"args": {"order": "A-1"}, "match": "exact", "value": {"status": "shipped"}},
        {"args": {"order": "B-2"}, "match": "exact", "value": {"status": "late"}}]}
    assert first["mocks"]["notify"] == {"error": "mail server down"}
    assert first["mocks"]["poll"] == {"sequence": ["pending", "done"]}  # same arguments
    # failed, then answered, to the same arguments: no mock can replay it; said, not faked
    assert "pay" not in first["mocks"] and first["description"].startswith("not mocked: pay")
    assert f"trace {t1}: not mocked: pay" in r.output
    assert phoenix["input"] == "Cancel C-3" and phoenix["expected"] == "Cancelled."
    assert "mocks" not in phoenix

    where = tmp_path / "where.yaml"
    r = CliRunner().invoke(cli, ["import", "otel", str(path), "--out", str(where),
                                 "--where", "app.outcome=complaint", "--no-expected"])
    assert r.exit_code == 0, r.output
    [only] = yaml.safe_load(where.read_text())
    assert only["input"] == "Where is A-1?" and "expected" not in only
    sampled = tmp_path / "sampled.yaml"
    r = CliRunner().invoke(cli, ["import", "otel", str(path), "--out", str(sampled),
                                 "--where", "service.name=support", "--sample", "1"])
    assert r.exit_code == 0, r.output
    assert len(yaml.safe_load(sampled.read_text())) == 1


def test_import_otel_refuses_what_it_cannot_read_and_writes_nothing(tmp_path):
    out = tmp_path / "cases.yaml"
    bad = tmp_path / "bad.json"
    bad.write_text('{"resourceSpans": [')
    r = CliRunner().invoke(cli, ["import", "otel", str(bad), "--out", str(out)])
    assert r.exit_code != 0 and "bad.json" in r.output and "Traceback" not in r.output
    other = tmp_path / "other.json"
    other.write_text('{"spans": []}')
    r = CliRunner().invoke(cli, ["import", "otel", str(other), "--out", str(out)])
    assert r.exit_code != 0 and "resourceSpans" in r.output
    r = CliRunner().invoke(cli, ["import", "otel", str(tmp_path / "missing.json"), "--out", str(out)])
    assert r.exit_code != 0 and "does not exist" in r.output
    empty = tmp_path / "empty.json"
    empty.write_text('{"resourceSpans": []}')
    r = CliRunner().invoke(cli, ["import", "otel", str(empty), "--out", str(out)])
    assert r.exit_code != 0 and "no case" in r.output
    assert not out.exists()


@pytest.mark.parametrize(("spans", "field"), [
    ({"resourceSpans": [5]}, "resourceSpans[0]"),
    ({"resourceSpans": [{"resource": {"attributes": 5}}]}, "resourceSpans[0].resource.attributes"),
    ({"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]},
     "resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano"),
    ({"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [{"key": "k", "value": {
        "intValue": "many"}}]}]}]}]},
     "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.intValue"),
])
def test_import_otel_names_the_part_of_the_export_of_the_wrong_shape(tmp_path, spans, field):
    """A part of another shape than OTLP JSON gives it (a resource that is a number, a
    time that is not one) was an internal error ('int' object has no attribute 'get')."""
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(spans))
    out = tmp_path / "cases.yaml"
    r = CliRunner().invoke(cli, ["import", "otel", str(path), "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {path} ({field}): expected a "), r.output
    assert not out.exists()


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000,
                                  '{"resourceSpans": []}\n' + "[" * 100_000 + "]" * 100_000])
def test_import_otel_names_a_file_nested_too_deep(tmp_path, text):
    """An export (or a line of one) nested 100,000 deep was an internal error:
    RecursionError, exit 4."""
    path = tmp_path / "deep.json"
    path.write_text(text)
    r = CliRunner().invoke(cli, ["import", "otel", str(path), "--out", str(tmp_path / "c.yaml")])
    assert r.exit_code == 2, r.output
    assert "the JSON is nested deeper than cycle reads" in r.output and str(path) in r.output


def test_import_reads_the_messages_other_tools_put_in_span_events(tmp_path):
    """Content captured as span events, not attributes, was read as no content at all
    ('no user message (capture content: ...)'): Azure AI Inference's tracing (one
    gen_ai.{role}.message event a message, gen_ai.choice, the message's JSON in
    gen_ai.event.content, tool calls in the OpenAI shape) and the conventions' older
    gen_ai.content.prompt / gen_ai.content.completion events (Semantic Kernel)."""
    import yaml

    def event(name, key, value):
        return {"timeUnixNano": "2", "name": name,
                "attributes": [{"key": key, "value": {"stringValue": value}}]}

    def chat(trace, events):
        return {"traceId": trace, "spanId": "1" * 16, "name": "chat gpt-4o",
                "startTimeUnixNano": "1", "endTimeUnixNano": "3",
                "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                               {"key": "gen_ai.system", "value": {"stringValue": "az.ai.inference"}}],
                "events": events}

    call = {"id": "call_1", "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"order": "A-1"})}}
    azure = chat("a" * 32, [
        event("gen_ai.system.message",
              "gen_ai.event.content", json.dumps({"role": "system", "content": "Be kind."})),
        event("gen_ai.user.message",
              "gen_ai.event.content", json.dumps({"role": "user", "content": "Where is A-1?"})),
        event("gen_ai.assistant.message",
              "gen_ai.event.content", json.dumps({"role": "assistant", "tool_calls": [call]})),
        event("gen_ai.tool.message", "gen_ai.event.content", json.dumps(
            {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'})),
        event("gen_ai.choice", "gen_ai.event.content", json.dumps(
            {"finish_reason": "stop", "index": 0, "message": {"content": "A-1 has shipped."}})),
    ])
    kernel = chat("b" * 32, [
        event("gen_ai.content.prompt", "gen_ai.prompt", json.dumps(
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}])),
        event("gen_ai.content.completion", "gen_ai.completion", json.dumps(
            [{"role": "assistant", "content": "Hello!"}])),
    ])
    path = tmp_path / "traces.json"
    path.write_text(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [
        {"scope": {"name": "azure.ai.inference"}, "spans": [azure, kernel]}]}]}))
    out = tmp_path / "cases.yaml"
    r = CliRunner().invoke(cli, ["import", "otel", str(path), "--out", str(out)])
    assert r.exit_code == 0, r.output
    first, second = yaml.safe_load(out.read_text())
    assert first["input"] == "Where is A-1?" and first["expected"] == "A-1 has shipped."
    assert first["mocks"] == {"lookup": {"value": {"status": "shipped"}}}
    assert second["input"] == "Hi there" and second["expected"] == "Hello!"


DATA = Path(__file__).parent / "data" / "otel"


def test_import_reads_the_official_openai_instrumentations_traces(tmp_path):
    """Spans of opentelemetry-instrumentation-openai-v2 2.4b0 (with opentelemetry-util-genai
    0.4b0) around a tool-calling conversation with a loopback OpenAI, written as the
    collector's file exporter does (benchmarks/interop/make_openai_v2_traces.py). With
    content in the spans (the latest conventions, SPAN_ONLY) they make a case that runs
    offline; with only CAPTURE_MESSAGE_CONTENT=true the messages went to log records, and
    the note said to set exactly that."""
    import yaml

    out = tmp_path / "cases.yaml"
    r = CliRunner().invoke(cli, ["import", "otel", str(DATA / "openai-v2-span-only.json"),
                                 "--out", str(out)])
    assert r.exit_code == 0, r.output
    [case] = yaml.safe_load(out.read_text())
    assert case["input"] == "Where is my order A-1?"
    assert case["mocks"] == {"lookup_order": {"value": {"status": "shipped"}}}
    assert case["expected"] == "Order A-1 has shipped."
    r = CliRunner().invoke(cli, ["import", "otel", str(DATA / "openai-v2-default.json"),
                                 "--out", str(tmp_path / "none.yaml")])
    assert r.exit_code == 2
    assert ("OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental with "
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY") in r.output


def test_import_reads_generate_content_spans_as_model_turns(tmp_path):
    """The Google GenAI instrumentation names its model turns generate_content (one of the
    conventions' inference operations, with chat and text_completion): under an agent's
    root span they were not read, and the trace was skipped as having no user message."""
    import yaml

    def attr(key, value):
        return {"key": key, "value": {"stringValue": value}}

    msg = lambda role, text: {"role": role, "parts": [{"type": "text", "content": text}]}
    spans = [
        {"traceId": "d" * 32, "spanId": "1" * 16, "name": "invoke_agent helper",
         "startTimeUnixNano": "1", "endTimeUnixNano": "9",
         "attributes": [attr("gen_ai.operation.name", "invoke_agent")]},
        {"traceId": "d" * 32, "spanId": "2" * 16, "parentSpanId": "1" * 16,
         "name": "generate_content gemini-2.5-flash", "startTimeUnixNano": "2",
         "endTimeUnixNano": "3", "attributes": [
             attr("gen_ai.operation.name", "generate_content"),
             attr("gen_ai.input.messages", json.dumps([msg("user", "Hola?")])),
             attr("gen_ai.output.messages", json.dumps([msg("assistant", "Hola!")]))]},
    ]
    path = tmp_path / "traces.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    out = tmp_path / "cases.yaml"
    r = CliRunner().invoke(cli, ["import", "otel", str(path), "--out", str(out)])
    assert r.exit_code == 0, r.output
    [case] = yaml.safe_load(out.read_text())
    assert case["input"] == "Hola?" and case["expected"] == "Hola!"
