"""A stored run as OpenTelemetry traces, after the GenAI semantic conventions
(``cycle export otel``).

One trace per iteration: a root span for the case's iteration (``invoke_agent``, the
case, its status and score), a child span per model turn (``chat {model}``: the system,
the request model, the tokens, the finish reason) and per tool call (``execute_tool {tool}``: the tool, the
call id; an error status when it failed), and on the root, one ``gen_ai.evaluation.result``
event per criterion's verdict (its name, score, pass or fail label, and reasoning). Times
come from the iteration's start and each trace event's offset.

With ``content``, the spans also carry what was said, as the conventions' opt-in content
attributes: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` on every model turn
and on the root (the user turns and the final answer), ``gen_ai.tool.call.arguments`` /
``gen_ai.tool.call.result`` on every tool call (and the state it changed as
``cycle.tool.state``), and the case's input as ``cycle.case.input``: what ``cycle import otel`` turns back into cases. The spans are built and
encoded by the OpenTelemetry SDK and its OTLP exporter, written as OTLP JSON or sent to a
collector over OTLP/HTTP.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cycle.llm.http import maskable, scrub, url_secrets
from cycle.records import IterationResult, RunResult

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

_NS = 1_000_000_000


def _ns(iso: str) -> int | None:
    try:
        return int(datetime.fromisoformat(iso).timestamp() * _NS)
    except (TypeError, ValueError):
        return None


def _system(model: str | None) -> str:
    return (model or "unknown").partition(":")[0] or "unknown"


def spans_of(run: RunResult, *, content: bool = False) -> list[ReadableSpan]:
    """Every iteration of ``run`` as spans, made by the SDK (nothing leaves the process);
    ``content``: with the messages, tool arguments and results."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    kept = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({
        "service.name": "cycle", "cycle.run.id": run.run_id,
        "cycle.prompt.id": run.prompt_id or "", "cycle.prompt.version": run.version or ""}))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("cycle")
    for case_id in run.cases:
        for result in run.results_of(case_id):
            _iteration(tracer, trace, run, result, content)
    provider.shutdown()
    return list(kept.get_finished_spans())


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _text(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def _iteration(tracer: Any, trace: Any, run: RunResult, r: IterationResult,
               content: bool) -> None:
    from opentelemetry.trace import Status, StatusCode

    start = _ns(r.started_at) or _ns(run.started_at) or 0
    end = max(_ns(r.finished_at) or start, start)
    root = tracer.start_span(f"invoke_agent {run.prompt_id or 'agent'}", start_time=start,
                             attributes={
                                 "gen_ai.operation.name": "invoke_agent",
                                 "gen_ai.agent.name": run.prompt_id or "",
                                 "gen_ai.request.model": run.agent_model or "",
                                 "cycle.case.id": r.case_id, "cycle.iteration": r.iteration,
                                 "cycle.status": r.status,
                                 **({"cycle.score": r.score} if r.score is not None else {})})
    if r.status == "error":
        root.set_status(Status(StatusCode.ERROR, r.error or "error"))
    if content:
        users = [_text("user", e.text) for e in r.trace if e.kind == "user"]
        root.set_attributes({"cycle.case.input": _json(r.input),
                             "gen_ai.input.messages": _json(users),
                             "gen_ai.output.messages": _json([_text("assistant", r.output)])})
    parent = trace.set_span_in_context(root)
    previous = 0.0
    history: list[dict[str, Any]] = []  # the conversation so far, as a model turn saw it
    for n, event in enumerate(r.trace):
        at = start + int(event.at * _NS)
        if content and event.kind == "user":
            history.append(_text("user", event.text))
        if event.kind == "model":
            model = event.model or run.agent_model or ""
            attributes: dict[str, Any] = {
                # gen_ai.system is the older name of gen_ai.provider.name: readers know one or the other
                "gen_ai.operation.name": "chat", "gen_ai.system": _system(model),
                "gen_ai.provider.name": _system(model),
                "gen_ai.request.model": model.partition(":")[2] or model}
            if event.agent:  # which of an ADK tree's LlmAgents made the call
                attributes["gen_ai.agent.name"] = event.agent
            if event.finish_reason:
                attributes["gen_ai.response.finish_reasons"] = [event.finish_reason]
            if event.usage is not None:
                attributes["gen_ai.usage.input_tokens"] = event.usage.input_tokens
                attributes["gen_ai.usage.output_tokens"] = event.usage.output_tokens
            if event.tool_calls:
                attributes["cycle.tool_calls"] = [c.name for c in event.tool_calls]
            if content:
                said = {"role": "assistant", "parts": (
                    [{"type": "text", "content": event.text}] if event.text else []) + [
                    {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
                    for c in event.tool_calls]}
                attributes["gen_ai.input.messages"] = _json(history)
                attributes["gen_ai.output.messages"] = _json([said])
                history.append(said)
            span = tracer.start_span(f"chat {attributes['gen_ai.request.model']}", context=parent,
                                     start_time=start + int(previous * _NS), attributes=attributes)
            span.end(end_time=at)
        elif event.kind in ("tool_result", "tool_error"):
            span = tracer.start_span(f"execute_tool {event.tool}", context=parent,
                                     start_time=at - int(event.duration * _NS), attributes={
                                         "gen_ai.operation.name": "execute_tool",
                                         "gen_ai.tool.name": event.tool or "",
                                         "gen_ai.tool.call.id": event.call_id or ""})
            if event.kind == "tool_error":
                span.set_status(Status(StatusCode.ERROR, event.error or "error"))
                span.set_attribute("error.type", "tool_error")
            if content:
                answer = event.result if event.kind == "tool_result" else {"error": event.error}
                span.set_attributes({"gen_ai.tool.call.arguments": _json(event.arguments or {}),
                                     "gen_ai.tool.call.result": _json(answer)})
                after = r.trace[n + 1] if n + 1 < len(r.trace) else None
                if after is not None and after.kind == "state" and after.changes:
                    # what the call changed in the case's state (a mock's side effect)
                    span.set_attribute("cycle.tool.state", _json(after.changes))
                history.append({"role": "tool", "parts": [{
                    "type": "tool_call_response", "id": event.call_id, "response": answer}]})
            span.end(end_time=at)
        previous = event.at
    for v in r.verdicts:
        root.add_event("gen_ai.evaluation.result", timestamp=end, attributes={
            "gen_ai.evaluation.name": v.criterion_id,
            **({"gen_ai.evaluation.score.value": v.score} if v.score is not None else {}),
            "gen_ai.evaluation.score.label": "pass" if v.passed else "fail",
            "gen_ai.evaluation.explanation": v.reasoning or ""})
    root.end(end_time=end)


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The spans as an OTLP/JSON export request (the exporter's own protobuf encoding, in
    the OTLP JSON mapping: ids in hex, enums as numbers)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    data = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for span in _walk_spans(data):
        for key in ("traceId", "spanId", "parentSpanId"):
            if span.get(key):
                span[key] = base64.b64decode(span[key]).hex()
    return data


def _walk_spans(data: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for resource in data.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            yield from scope.get("spans", [])


def send(spans: Sequence[ReadableSpan], endpoint: str, *, timeout: float = 30.0) -> bool:
    """Send the spans to a collector over OTLP/HTTP (``endpoint``: its base URL, or the
    full ``.../v1/traces``); whether it took them."""
    from urllib.parse import urlparse

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    url = endpoint if urlparse(endpoint).path.rstrip("/") else endpoint.rstrip("/") + "/v1/traces"
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout)
    # the exporter logs its failures with requests' errors, which quote the URL: its
    # credentials (?token=, user:password@) are masked in them
    masking = _Masking(maskable(url_secrets(url)))
    logger = logging.getLogger(OTLPSpanExporter.__module__)
    logger.addFilter(masking)
    try:
        return exporter.export(spans) == SpanExportResult.SUCCESS
    except ValueError:
        # The exporter retries while its backoff fits before the deadline, then posts with
        # what is left, which the wait may have taken below zero: requests refuses such a
        # timeout with ValueError. The collector did not take the spans either way.
        return False
    finally:
        exporter.shutdown()
        logger.removeFilter(masking)


class _Masking(logging.Filter):
    """Masks ``secrets`` in the records of the logger it filters."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            record.msg, record.args = scrub(record.getMessage(), self.secrets), None
        return True
