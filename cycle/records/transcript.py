"""A trace as text a person (or the judge, or the improver) reads: one line an event,
tool calls and results kept, long texts cut with a marker that says how much was cut."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cycle.records.trace import TraceEvent

#: characters kept of one text or value before it is cut (in what a model is sent)
DEFAULT_CUT = 400
#: what people read is not cut (the stored texts are already bounded: cycle.evals.runner)
NO_CUT = 10**9


def cut(text: str, limit: int = DEFAULT_CUT) -> str:
    """``text``, or its start and end with ``[... N characters cut ...]`` between."""
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 20)
    head, tail = text[: keep * 2 // 3], text[-(keep // 3):]
    return f"{head} [... {len(text) - len(head) - len(tail)} characters cut ...] {tail}"


def _value(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return cut(text, limit)


def transcript_lines(trace: Sequence[TraceEvent], *, limit: int | None = None,
                     for_people: bool = False) -> list[str]:
    """One line per event: ``user: ...``, ``assistant -> lookup(order=A-1)``,
    ``tool lookup -> {...}``, ``tool refund FAILED: ...``, ``state: ...``.

    ``for_people`` adds each tool's time and why the conversation ended (people only,
    since what a model is sent must not change from run to run: the response cache,
    the offline world), and cuts nothing unless ``limit`` says so: a report or a screen
    wraps a long answer, a model is sent at most ``DEFAULT_CUT`` characters of each."""
    return [line for e in trace for line in event_lines(e, limit, for_people)]


def tool_error_turns(trace: Sequence[TraceEvent]) -> list[int]:
    """The turns (from 1) in which a tool failed."""
    out: list[int] = []
    n = 0
    for e in trace:
        n += e.kind == "user"
        if e.kind == "tool_error" and max(n, 1) not in out:
            out.append(max(n, 1))
    return out


def event_lines(e: TraceEvent, limit: int | None = None, for_people: bool = False) -> list[str]:
    """The transcript lines of one event (a model turn may make several)."""
    if limit is None:
        limit = NO_CUT if for_people else DEFAULT_CUT
    if e.kind == "user":
        return [f"user: {cut(e.text, limit)}"]
    if e.kind == "model":
        # for people, which agent of several spoke (an ADK workflow's step): "assistant
        # [writer]"; what a model is sent stays as it was
        who = f"assistant [{e.agent}]" if e.agent and for_people else "assistant"
        out = [f"{who}: {cut(e.text, limit)}"] if e.text else []
        for c in e.tool_calls:
            args = ", ".join(f"{k}={_value(v, 80)}" for k, v in c.arguments.items())
            out.append(f"{who} -> {c.name}({args})")
        return out
    if e.kind == "tool_result":
        took = f" ({e.duration:.2f} s)" if for_people else ""
        return [f"tool {e.tool} -> {_value(e.result, limit)}{took}"]
    if e.kind == "tool_error":
        return [f"tool {e.tool} FAILED: {cut(e.error or '', limit)}"]
    if e.kind == "state":
        changes = ", ".join(f"{k} = {_value(v, 80)}" for k, v in (e.changes or {}).items())
        return [f"state: {changes}"]
    if e.kind == "final" and e.reason and for_people:
        return [f"ended: {e.reason}"]
    return []


def has_behaviour(trace: Sequence[TraceEvent]) -> bool:
    """Whether the trace holds more than a question and an answer (tools, state, turns)."""
    return any(e.kind in ("tool_result", "tool_error", "state") for e in trace) or sum(
        1 for e in trace if e.kind == "user") > 1
