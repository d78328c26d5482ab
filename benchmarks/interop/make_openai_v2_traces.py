"""Real spans of opentelemetry-instrumentation-openai-v2 around a tool-calling conversation
with a loopback fake OpenAI (no network), written as OTLP JSON the way the collector's file
exporter does (hex ids): tests/formats/data/otel/openai-v2-*.json were made with it.
Not part of the test suite; in a venv of its own (the versions that import together):
  python -m venv /tmp/otelv && /tmp/otelv/bin/pip install openai httpx opentelemetry-sdk \
      opentelemetry-instrumentation-openai-v2==2.4b0 opentelemetry-util-genai==0.4b0 \
      opentelemetry-exporter-otlp-proto-common
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true \
      /tmp/otelv/bin/python benchmarks/interop/make_openai_v2_traces.py default.json
  OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental \
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY \
      /tmp/otelv/bin/python benchmarks/interop/make_openai_v2_traces.py span-only.json
(opentelemetry-util-genai 1.3b0 does not import with openai-v2 2.4b0.) The first has no
message in any span (they went to log records), the second has gen_ai.input.messages and
gen_ai.output.messages on each chat span."""
import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

calls = []
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        calls.append(body)
        if not any(m["role"] == "tool" for m in body["messages"]):
            msg = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                   "function": {"name": "lookup_order", "arguments": json.dumps({"order": "A-1"})}}]}
            finish = "tool_calls"
        else:
            msg = {"role": "assistant", "content": "Order A-1 has shipped."}
            finish = "stop"
        out = {"id": "x", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
               "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
               "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        data = json.dumps(out).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)

srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exp = InMemorySpanExporter()
tp = TracerProvider(); tp.add_span_processor(SimpleSpanProcessor(exp)); trace.set_tracer_provider(tp)
OpenAIInstrumentor().instrument(tracer_provider=tp)
import openai

client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.server_port}/v1", api_key="k")
tools = [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object", "properties": {"order": {"type": "string"}}}}}]
messages = [{"role": "system", "content": "You help with orders."}, {"role": "user", "content": "Where is my order A-1?"}]
tracer = trace.get_tracer("app")
with tracer.start_as_current_span("invoke_agent support"):
    r = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
    call = r.choices[0].message.tool_calls[0]
    messages += [r.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"status": "shipped"})}]
    r = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
spans = exp.get_finished_spans()
doc = MessageToDict(encode_spans(spans))
for rs in doc["resourceSpans"]:
    for ss in rs["scopeSpans"]:
        for s in ss["spans"]:
            for k in ("traceId", "spanId", "parentSpanId"):
                if k in s: s[k] = base64.b64decode(s[k]).hex()
Path(sys.argv[1]).write_text(json.dumps(doc, indent=1))
for s in spans:
    print(s.name, sorted(s.attributes), [e.name for e in s.events])
