"""cycle export otel against the OTLP protobuf schema (opentelemetry-proto, a dependency
of the OTLP exporter cycle declares): a stored run of examples/agent-tools exported with
and without --content is parsed into ExportTraceServiceRequest by protobuf's json_format
(unknown fields and wrong types fail), and the OTLP/JSON rules where it differs from proto3
JSON are checked by hand: trace and span ids lowercase hex (not base64), 64-bit integers
(times, intValue) as strings, kind and status code as integers, one AnyValue field a value;
and every gen_ai.* key is one opentelemetry-semantic-conventions (0.65b0) defines.
Run: PYTHONPATH=. python benchmarks/interop/check_otlp_json.py (about 5 s)."""
import json
import re
import tempfile
from pathlib import Path

from click.testing import CliRunner
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from cycle.cli import cli
from tests.stored import copied, run

tmp = Path(tempfile.mkdtemp())
project = copied("agent-tools", tmp)
store = project / "s.db"
run_id = run(store, project / "cycle.yaml", "-n", "1")
for flags in ([], ["--content"]):
    out = tmp / f"t{len(flags)}.json"
    r = CliRunner().invoke(cli, ["--store", str(store), "export", "otel", run_id, *flags, "--out", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    data = json.loads(text)
    msg = json_format.Parse(text, ExportTraceServiceRequest())  # strict: unknown fields fail
    spans = [s for rs in msg.resource_spans for ss in rs.scope_spans for s in ss.spans]
    raw = [s for rs in data["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    print(flags, "parsed", len(spans), "spans")
    # OTLP JSON specifics: ids hex (proto3 JSON would be base64), times strings
    for s, p in zip(raw, spans):
        # OTLP/JSON: ids are hex, not proto3-JSON base64 (json_format reads them as base64)
        assert re.fullmatch("[0-9a-f]{32}", s["traceId"]) and re.fullmatch("[0-9a-f]{16}", s["spanId"]), s
        if "parentSpanId" in s: assert re.fullmatch("[0-9a-f]{16}", s["parentSpanId"])
        assert isinstance(s["startTimeUnixNano"], str) and isinstance(s["endTimeUnixNano"], str), (s["startTimeUnixNano"])
        assert isinstance(s.get("kind", 0), int), s.get("kind")
        for e in s.get("events", []):
            assert isinstance(e["timeUnixNano"], str)
        def walk(attrs, where):
            for a in attrs:
                v = a["value"]
                assert len(v) == 1 and next(iter(v)) in {"stringValue","boolValue","intValue","doubleValue","arrayValue","kvlistValue","bytesValue"}, (where, a)
                if "intValue" in v: assert isinstance(v["intValue"], str), (where, a)
        walk(s.get("attributes", []), s["name"])
        for e in s.get("events", []): walk(e.get("attributes", []), e["name"])
        st = s.get("status", {})
        if "code" in st: assert isinstance(st["code"], int), st


# every gen_ai.* key written is one the GenAI conventions define (the
# opentelemetry-semantic-conventions package's incubating gen_ai attributes)
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes

known = {v for k, v in vars(gen_ai_attributes).items() if k.startswith("GEN_AI_")
         and isinstance(v, str)}
keys = {a["key"] for rs in data["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
        for item in [s, *s.get("events", [])] for a in item.get("attributes", [])}
unknown = sorted(k for k in keys if k.startswith("gen_ai.") and k not in known)
assert not unknown, unknown
print("gen_ai keys all in the conventions:", len([k for k in keys if k.startswith("gen_ai.")]))
print("OK")
