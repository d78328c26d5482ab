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

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent-tools"


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory) -> tuple[Path, str]:
    project = tmp_path_factory.mktemp("otel") / "agent-tools"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".cycle", "reports"))
    store = project / "s.db"
    r = CliRunner().invoke(cli, ["--store", str(store), "run", str(project / "cycle.yaml"),
                                 "-n", "1", "--no-reports", "-q"])
    assert r.exit_code in (0, 1), r.output
    with Store.open(store) as s:
        return store, s.runs.recent(limit=1)[0].id


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
    assert attributes(chat)["gen_ai.system"] == "offline"
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
