"""A trace as text a person (or the judge, or the improver) reads: one line an event,
tool calls and results kept, long texts cut with a marker that says how much was cut."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cycle.records.trace import TraceEvent

#: characters kept of one text or value before it is cut
DEFAULT_CUT = 400


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


def transcript_lines(trace: Sequence[TraceEvent], *, limit: int = DEFAULT_CUT,
                     durations: bool = False) -> list[str]:
    """One line per event: ``user: ...``, ``assistant -> lookup(order=A-1)``,
    ``tool lookup -> {...}``, ``tool refund FAILED: ...``, ``state: ...``.

    ``durations`` adds each tool's time: for people only, since what a model is sent
    must not change from run to run (the response cache, the offline world)."""
    out: list[str] = []
    for e in trace:
        if e.kind == "user":
            out.append(f"user: {cut(e.text, limit)}")
        elif e.kind == "model":
            if e.text:
                out.append(f"assistant: {cut(e.text, limit)}")
            for c in e.tool_calls:
                args = ", ".join(f"{k}={_value(v, 80)}" for k, v in c.arguments.items())
                out.append(f"assistant -> {c.name}({args})")
        elif e.kind == "tool_result":
            took = f" ({e.duration:.2f} s)" if durations else ""
            out.append(f"tool {e.tool} -> {_value(e.result, limit)}{took}")
        elif e.kind == "tool_error":
            out.append(f"tool {e.tool} FAILED: {cut(e.error or '', limit)}")
        elif e.kind == "state":
            changes = ", ".join(f"{k} = {_value(v, 80)}" for k, v in (e.changes or {}).items())
            out.append(f"state: {changes}")
    return out


def has_behaviour(trace: Sequence[TraceEvent]) -> bool:
    """Whether the trace holds more than a question and an answer (tools, state, turns)."""
    return any(e.kind in ("tool_result", "tool_error", "state") for e in trace) or sum(
        1 for e in trace if e.kind == "user") > 1
