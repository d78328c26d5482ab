"""Production traces to cases (``cycle import otel``): OTLP JSON traces of an LLM agent
become cycle cases that run offline at once.

Read: an OTLP/JSON export (``{"resourceSpans": [...]}``, as the OpenTelemetry SDK, the
collector's file exporter, ``cycle export otel`` and Phoenix write them; one request per
line in a ``.jsonl`` file works too). One trace is one case:

- **input**: the case's own input when the trace is cycle's (``cycle.case.input``), else
  the user turns: from the GenAI conventions' ``gen_ai.input.messages`` (the turn that saw
  the most of the conversation), OpenInference's ``llm.input_messages.N.message.*``, the
  older ``gen_ai.prompt.N.*``, or the span's message events (``gen_ai.content.prompt``,
  ``gen_ai.user.message`` and ``gen_ai.choice`` with ``gen_ai.event.content``, as Azure AI
  Inference and Semantic Kernel write them); several user turns make a conversation (the first as the
  input, the rest as ``conversation.follow_ups``);
- **mocks**: what each tool returned, from the ``execute_tool`` spans
  (``gen_ai.tool.call.arguments`` / ``.result``; OpenInference's ``tool.parameters`` and
  ``output.value``) or else from the messages' tool calls and their responses: one answer
  becomes ``value``, answers by argument a ``match`` table (exact arguments), repeated
  calls with the same arguments a ``sequence``; a failed call an ``error``;
- **expected**: the final answer (the root's output messages, else the last model turn's
  text), unless asked to leave it out.

State stays out (traces carry no initial state). What could not be read is said, never
dropped silently: a trace without a user message is skipped with a note.
"""

from __future__ import annotations

import base64
import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from cycle.errors import ConfigError
from cycle.yamlload import relocate, too_deep


class Span(Struct):
    """One span as read: ids, name, start time, attributes (decoded, the resource's
    underneath), its status."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int
    attributes: dict[str, Any]
    error: str | None = None


class Imported(Struct):
    """The cases read from the traces, and what could not be read."""

    cases: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    traces: int = 0


# -- reading OTLP JSON ---------------------------------------------------------

def _shape(value: Any, kind: type, where: str) -> Any:
    """``value`` if it is a ``kind`` (None: an empty one), else a ConfigError naming where
    it is in the export: a part of another shape was an internal error (``'int' object
    has no attribute 'get'``)."""
    if value is None:
        return kind()
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ConfigError(f"expected a {'list' if kind is list else 'mapping'}, got "
                          f"{json.dumps(value)[:60]}", field=where,
                          hint="OTLP JSON is expected, as the OpenTelemetry SDK exports it.")
    return value


def _number(value: Any, kind: type, where: str) -> Any:
    try:
        return kind(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"expected a number, got {json.dumps(value)[:60]}",
                          field=where) from None


def _value(v: Any, where: str) -> Any:
    """An OTLP AnyValue as Python."""
    v = _shape(v, dict, where)
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        return _number(v["intValue"], int, f"{where}.intValue")
    if "doubleValue" in v:
        return _number(v["doubleValue"], float, f"{where}.doubleValue")
    if "arrayValue" in v:
        values = _shape(_shape(v["arrayValue"], dict, f"{where}.arrayValue").get("values"), list,
                        f"{where}.arrayValue.values")
        return [_value(x, f"{where}.arrayValue.values[{i}]") for i, x in enumerate(values)]
    if "kvlistValue" in v:
        return _attributes(_shape(v["kvlistValue"], dict, f"{where}.kvlistValue").get("values"),
                           f"{where}.kvlistValue.values")
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _attributes(items: Any, where: str) -> dict[str, Any]:
    out = {}
    for i, a in enumerate(_shape(items, list, where)):
        a = _shape(a, dict, f"{where}[{i}]")
        if "key" in a:
            out[str(a["key"])] = _value(a.get("value"), f"{where}[{i}].value")
    return out


def _id(value: Any) -> str:
    """A trace or span id as hex (OTLP JSON writes hex; a protobuf dump writes base64)."""
    text = str(value or "")
    if re.fullmatch(r"[0-9a-fA-F]+", text):
        return text.lower()
    try:
        return base64.b64decode(text).hex()
    except ValueError:
        return text


def _requests(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist", file=str(path),
                          hint="Give the OTLP JSON file the traces were exported to.") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not text: OTLP JSON is expected (not OTLP protobuf)",
                          file=str(path)) from None
    try:
        whole = json.loads(text)
        return whole if isinstance(whole, list) else [whole]
    except RecursionError:
        raise too_deep(str(path), "JSON") from None
    except json.JSONDecodeError as first:
        requests = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                requests.append(json.loads(line))
            except RecursionError:
                raise too_deep(str(path), "JSON", n) from None
            except json.JSONDecodeError as e:
                raise ConfigError(f"{path} is neither one JSON document nor JSON lines: "
                                  f"line {n}: {e.msg}", file=str(path),
                                  line=n if requests else first.lineno) from None
        return requests


def read_spans(path: Path) -> list[Span]:
    """Every span of an OTLP JSON file (one export request, a list of them, or one a line)."""
    spans = []
    for request in _requests(path):
        if not isinstance(request, dict) or not isinstance(request.get("resourceSpans"), list):
            raise ConfigError(f"{path} is not an OTLP JSON trace export: it needs "
                              "'resourceSpans'", file=str(path),
                              hint="Export with the OTLP JSON format (e.g. cycle export otel "
                              "--content, or the collector's file exporter).")
        try:
            spans += _request_spans(request["resourceSpans"])
        except ConfigError as e:
            raise relocate(e, file=str(path), line=None) from None
    return spans


def _request_spans(resources: list[Any]) -> list[Span]:
    spans = []
    for r, resource in enumerate(resources):
        at = f"resourceSpans[{r}]"
        resource = _shape(resource, dict, at)
        base = _attributes(_shape(resource.get("resource"), dict, f"{at}.resource")
                           .get("attributes"), f"{at}.resource.attributes")
        key = "scopeSpans" if resource.get("scopeSpans") else "instrumentationLibrarySpans"
        for c, scope in enumerate(_shape(resource.get(key), list, f"{at}.{key}")):
            where = f"{at}.{key}[{c}]"
            for n, s in enumerate(_shape(_shape(scope, dict, where).get("spans"), list,
                                         f"{where}.spans")):
                span = f"{where}.spans[{n}]"
                s = _shape(s, dict, span)
                status = _shape(s.get("status"), dict, f"{span}.status")
                failed = status.get("code") in (2, "STATUS_CODE_ERROR")
                spans.append(Span(
                    trace_id=_id(s.get("traceId")), span_id=_id(s.get("spanId")),
                    parent_id=_id(s.get("parentSpanId")), name=str(s.get("name") or ""),
                    start=_number(s.get("startTimeUnixNano") or 0, int,
                                  f"{span}.startTimeUnixNano"),
                    attributes=_with_event_messages(
                        {**base, **_attributes(s.get("attributes"), f"{span}.attributes")},
                        _shape(s.get("events"), list, f"{span}.events"), f"{span}.events"),
                    error=(status.get("message") or "error") if failed else None))
    return spans


# the GenAI conventions' message events before 1.37 (Azure AI Inference, Semantic Kernel
# and others put them on the span): one event a message, its JSON in gen_ai.event.content
_EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}


def _event_text(content: Any) -> str:
    """A message's content as text: a string, parts, or Azure's ``{"text": {"value": ...}}``."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        text = content.get("text", content.get("content", content.get("value")))
        return _event_text(text.get("value") if isinstance(text, dict) else text)
    if isinstance(content, list):
        return "".join(_event_text(p.get("text", p.get("content")) if isinstance(p, dict) else p)
                       for p in content)
    return "" if content is None else json.dumps(content)


def _event_message(body: Any, role: str) -> dict[str, Any]:
    """A chat message of the older shape (``{role, content, tool_calls, tool_call_id}``) as
    the conventions' ``{role, parts}``, tool calls and their answers as parts."""
    if not isinstance(body, dict):
        return {"role": role, "parts": [{"type": "text", "content": _event_text(body)}]}
    role = str(body.get("role") or role)
    parts: list[dict[str, Any]] = []
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": body.get("tool_call_id", body.get("id")),
                      "response": body.get("content")})
    elif body.get("content") not in (None, ""):
        parts.append({"type": "text", "content": _event_text(body["content"])})
    for call in body.get("tool_calls") or ():
        if isinstance(call, dict):
            function = call.get("function") if isinstance(call.get("function"), dict) else call
            parts.append({"type": "tool_call", "id": call.get("id"),
                          "name": function.get("name"), "arguments": function.get("arguments")})
    return {"role": role, "parts": parts}


def _with_event_messages(attributes: dict[str, Any], events: list[Any],
                         where: str) -> dict[str, Any]:
    """The span's attributes with the messages its events carry, when its attributes do not:
    ``gen_ai.content.prompt``/``.completion`` (``gen_ai.prompt``/``gen_ai.completion``,
    JSON message lists), one ``gen_ai.{role}.message`` event a message and ``gen_ai.choice``
    (``gen_ai.event.content``), and ``gen_ai.client.inference.operation.details``."""
    found: dict[str, list[dict[str, Any]]] = {"input": [], "output": []}
    for n, event in enumerate(events):
        event = _shape(event, dict, f"{where}[{n}]")
        name = str(event.get("name") or "")
        a = _attributes(event.get("attributes"), f"{where}[{n}].attributes")
        if name == "gen_ai.client.inference.operation.details":
            for direction in ("input", "output"):
                key = f"gen_ai.{direction}.messages"
                if key in a:
                    attributes.setdefault(key, a[key])
        elif name in ("gen_ai.content.prompt", "gen_ai.content.completion"):
            direction, key = (("input", "gen_ai.prompt") if name.endswith("prompt")
                              else ("output", "gen_ai.completion"))
            body = _loads(a.get(key))
            for m in body if isinstance(body, list) else [] if body is None else [body]:
                found[direction].append(_event_message(
                    m, "user" if direction == "input" else "assistant"))
        elif name in _EVENT_ROLES:
            body = _loads(a.get("gen_ai.event.content", a.get("content")))
            if not isinstance(body, dict) or "content" not in body and "tool_calls" not in body:
                body = {"content": body}
            found["input"].append(_event_message({**body, "role": _EVENT_ROLES[name]},
                                                 _EVENT_ROLES[name]))
        elif name == "gen_ai.choice":
            body = _loads(a.get("gen_ai.event.content", a.get("message")))
            message = body.get("message", body) if isinstance(body, dict) else body
            found["output"].append(_event_message(message, "assistant"))
    for direction, messages in found.items():
        key = f"gen_ai.{direction}.messages"
        flat = "gen_ai.prompt." if direction == "input" else "gen_ai.completion."
        if messages and key not in attributes and not any(k.startswith(flat) for k in attributes):
            attributes[key] = messages
    return attributes


# -- what the spans say --------------------------------------------------------

def _loads(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError):  # kept as the text it is
            return value
    return value


_MODEL_TURNS = ("chat", "generate_content", "text_completion")


def _operation(span: Span) -> str:
    a = span.attributes
    op = a.get("gen_ai.operation.name")
    if op:
        return str(op)
    kind = str(a.get("openinference.span.kind") or "").upper()
    if kind == "LLM":
        return "chat"
    if kind == "TOOL":
        return "execute_tool"
    return span.name.partition(" ")[0]


def _parts_text(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    return "".join(str(p.get("content", "")) for p in parts or ()
                   if isinstance(p, dict) and p.get("type", "text") == "text")


def _messages(span: Span, direction: str) -> list[dict[str, Any]]:
    """A span's input or output messages as ``{role, parts}``, from whichever convention
    it follows (GenAI, OpenInference, the older flattened ``gen_ai.prompt.N``)."""
    a = span.attributes
    found = _loads(a.get(f"gen_ai.{direction}.messages"))
    if isinstance(found, list):
        return [m for m in found if isinstance(m, dict)]
    prefix = {"input": ("llm.input_messages.", "gen_ai.prompt."),
              "output": ("llm.output_messages.", "gen_ai.completion.")}[direction]
    rows: dict[int, dict[str, Any]] = {}
    for key, value in a.items():
        for p in prefix:
            if key.startswith(p):
                index, _, rest = key[len(p):].partition(".")
                if index.isdigit():
                    rows.setdefault(int(index), {})[rest.removeprefix("message.")] = value
    return [{"role": row.get("role", "user" if direction == "input" else "assistant"),
             "parts": [{"type": "text", "content": str(row.get("content", ""))}]}
            for _, row in sorted(rows.items())]


def _user_turns(messages: Sequence[dict[str, Any]]) -> list[str]:
    return [_parts_text(m.get("parts", m.get("content"))) for m in messages
            if m.get("role") == "user"]


Call = tuple[str, Any, Any, "str | None", dict[str, Any]]
"""A tool call as the trace shows it: tool, arguments, result, error, state it changed."""


def _tool_calls_in(messages: Sequence[dict[str, Any]]) -> list[Call]:
    """Each tool call in ``messages`` that has a response (no state: messages carry none)."""
    calls: dict[str, tuple[str, Any]] = {}
    out = []
    for m in messages:
        for part in m.get("parts") or ():
            if not isinstance(part, dict):
                continue
            if part.get("type") == "tool_call" and part.get("id"):
                calls[str(part["id"])] = (str(part.get("name") or ""), _loads(part.get("arguments")))
            elif part.get("type") == "tool_call_response" and str(part.get("id")) in calls:
                name, args = calls.pop(str(part["id"]))
                response = _loads(part.get("response"))
                error = response.get("error") if isinstance(response, dict) and \
                    set(response) == {"error"} else None
                out.append((name, args, None if error else response, error, {}))
    return out


def _tool_spans(spans: Sequence[Span]) -> list[Call]:
    out = []
    for s in spans:
        if _operation(s) != "execute_tool":
            continue
        a = s.attributes
        name = a.get("gen_ai.tool.name") or a.get("tool.name") or s.name.partition(" ")[2]
        if "gen_ai.tool.call.result" not in a and "output.value" not in a and s.error is None:
            continue  # no content captured: the messages may have it
        args = _loads(a.get("gen_ai.tool.call.arguments", a.get("tool.parameters")))
        result = _loads(a.get("gen_ai.tool.call.result", a.get("output.value")))
        state = _loads(a.get("cycle.tool.state"))
        state = state if isinstance(state, dict) else {}
        if s.error is not None:
            error = result.get("error") if isinstance(result, dict) and "error" in result else None
            out.append((str(name), args, None, str(error or s.error), state))
        else:
            out.append((str(name), args, result, None, state))
    return out


def mocks_of(calls: Sequence[Call], unmocked: list[str]) -> dict[str, dict[str, Any]]:
    """Mocks that answer each tool as it answered in the trace (and change the state as
    it did); the tools that cannot be are added to ``unmocked``."""
    by_tool: dict[str, list[tuple[dict[str, Any], Any, str | None, dict[str, Any]]]] = {}
    for name, args, result, error, state in calls:
        by_tool.setdefault(name, []).append(
            (args if isinstance(args, dict) else {}, result, error, state))
    mocks: dict[str, dict[str, Any]] = {}
    for name, seen in by_tool.items():
        def answer(result: Any, error: str | None, state: dict[str, Any]) -> dict[str, Any]:
            return {"error": error} if error else {"value": result, **(
                {"state": state} if state else {})}

        outcomes = {json.dumps([r, e, st], sort_keys=True, default=str) for _, r, e, st in seen}
        if len(outcomes) == 1:
            _, result, error, state = seen[0]
            mocks[name] = answer(result, error, state)
            continue
        by_args: dict[str, tuple[dict[str, Any], Any, str | None, dict[str, Any]]] = {}
        for args, result, error, state in seen:
            key = json.dumps(args, sort_keys=True, default=str)
            if key in by_args and by_args[key][1:] != (result, error, state):
                by_args = {}
                break
            by_args[key] = (args, result, error, state)
        if by_args:
            mocks[name] = {"match": [{"args": args, "match": "exact", **answer(r, e, st)}
                                     for args, r, e, st in by_args.values()]}
        elif not any(e for _, _, e, _ in seen):  # the same arguments, different answers
            mocks[name] = {"sequence": [r for _, r, _, _ in seen]}
        else:
            # a sequence holds values only: a tool that failed and answered to the same
            # arguments cannot be replayed as it was; said, never approximated
            unmocked.append(name)
    return mocks


def case_of(trace_id: str, spans: Sequence[Span], *, expected: bool,
            unmocked: list[str]) -> dict[str, Any] | str:
    """The case a trace makes, or why it makes none; the tools no mock can replay are
    added to ``unmocked``."""
    spans = sorted(spans, key=lambda s: s.start)
    ids = {s.span_id for s in spans}
    root = next((s for s in spans if not s.parent_id or s.parent_id not in ids), spans[0])
    # a model turn: chat, or generate_content (the Google GenAI instrumentation's) and
    # text_completion, the conventions' other inference operations
    chats = [s for s in spans if _operation(s) in _MODEL_TURNS]
    inputs = [_messages(s, "input") for s in chats] + [_messages(root, "input")]
    seen = max(inputs, key=lambda ms: len(_user_turns(ms)))
    turns = [t for t in _user_turns(seen) if t]
    if not turns and isinstance(root.attributes.get("input.value"), str):
        turns = [root.attributes["input.value"]]
    stored = root.attributes.get("cycle.case.input")
    if not turns and stored is None:
        # the OpenTelemetry GenAI instrumentations (openai-v2 2.4b0) put the messages in
        # the spans only in the latest conventions with SPAN_ONLY (or SPAN_AND_EVENT);
        # CAPTURE_MESSAGE_CONTENT=true alone sends them as log records, not in a trace
        return ("no user message (capture content in the spans: OTEL_SEMCONV_STABILITY_OPT_IN="
                "gen_ai_latest_experimental with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_"
                "CONTENT=SPAN_ONLY, or cycle export otel --content)")
    case_id = root.attributes.get("cycle.case.id")
    iteration = root.attributes.get("cycle.iteration")
    name = f"{case_id}-{iteration}" if case_id is not None and iteration is not None else (
        str(case_id) if case_id is not None else f"trace-{trace_id[:12]}")
    case: dict[str, Any] = {"id": name, "tags": ["otel"],
                            "input": _loads(stored) if stored is not None else turns[0]}
    if len(turns) > 1:
        case["conversation"] = {"follow_ups": turns[1:]}
    calls = _tool_spans(spans) or [c for s in chats[-1:] for c in _tool_calls_in(_messages(s, "input"))]
    mocks = mocks_of(calls, unmocked)
    if mocks:
        case["mocks"] = mocks
    if unmocked:
        # the case is kept (its input and answer are real) and the gap is named, in the
        # case and by the command
        case["description"] = (f"not mocked: {', '.join(unmocked)} (it failed on some calls "
                               "and answered others with the same arguments)")
    if expected:
        final = _parts_text(next((m.get("parts") for m in _messages(root, "output")), None))
        if not final and chats:
            final = "".join(_parts_text(m.get("parts")) for m in _messages(chats[-1], "output"))
        if not final and isinstance(root.attributes.get("output.value"), str):
            final = root.attributes["output.value"]
        if final:
            case["expected"] = final
    return case


def _where(rule: str) -> tuple[str, str, str | None]:
    for op in ("!=", "="):
        key, sep, value = rule.partition(op)
        if sep:
            return key.strip(), op, value.strip()
    return rule.strip(), "has", None


def matches(spans: Sequence[Span], rules: Sequence[str]) -> bool:
    """Every ``--where`` rule holds on some span of the trace: ``key=value``,
    ``key!=value`` (no span has it), or ``key`` (some span has the attribute)."""
    for rule in rules:
        key, op, value = _where(rule)
        values = [str(s.attributes[key]) for s in spans if key in s.attributes]
        if op == "has" and not values:
            return False
        if op == "=" and value not in values:
            return False
        if op == "!=" and value in values:
            return False
    return True


def import_traces(path: Path, *, where: Sequence[str] = (), sample: int | None = None,
                  seed: int = 0, expected: bool = True) -> Imported:
    """The cases of the traces in ``path`` that match ``where`` (``sample``: at most that
    many, drawn with ``seed``), in the order the traces started."""
    by_trace: dict[str, list[Span]] = {}
    for s in read_spans(path):
        by_trace.setdefault(s.trace_id, []).append(s)
    chosen = [(t, spans) for t, spans in by_trace.items() if matches(spans, where)]
    chosen.sort(key=lambda item: min(s.start for s in item[1]))
    if sample is not None and sample < len(chosen):
        picked = set(random.Random(seed).sample(range(len(chosen)), sample))
        chosen = [item for n, item in enumerate(chosen) if n in picked]
    out = Imported(traces=len(by_trace))
    used: set[str] = set()
    for trace_id, spans in chosen:
        unmocked: list[str] = []
        case = case_of(trace_id, spans, expected=expected, unmocked=unmocked)
        if isinstance(case, str):
            out.notes.append(f"trace {trace_id}: skipped, {case}")
            continue
        if unmocked:
            out.notes.append(f"trace {trace_id}: {case['description']}; mock it in the case "
                             "or in cycle.yaml")
        base, n = case["id"], 2
        while case["id"] in used:
            case["id"], n = f"{base}-{n}", n + 1
        used.add(case["id"])
        out.cases.append(case)
    return out
