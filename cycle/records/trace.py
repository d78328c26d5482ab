"""The trace of one case iteration: what happened, in order.

A trace is a tuple of ``TraceEvent``s: the user's message, each model turn (its
text, the tool calls it asked for, usage and cost), each tool call's result or
error (with its duration), each change of the case's state, and the final
answer. Checks, the judge, the improver, the reports and the TUI all read it;
it is stored with the iteration's result.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from cycle.records.messages import ToolCall, Usage

EventKind = Literal["user", "model", "tool_result", "tool_error", "state", "final"]

#: the kinds a user may name in a check, and what each holds
KINDS: dict[str, str] = {
    "user": "a user message (text)",
    "model": "a model turn (text, tool_calls, usage, cost, finish_reason; agent: which "
             "of an ADK agent's LlmAgents made it)",
    "tool_result": "a tool call that returned (tool, call_id, arguments, result, duration)",
    "tool_error": "a tool call that failed (tool, call_id, arguments, error, duration)",
    "state": "a change of the case's state (changes: {'scope.key': value})",
    "final": "the final answer (text; reason: why a conversation ended)",
}


class TraceEvent(BaseModel):
    """One event of a trace. Which fields are set depends on ``kind`` (see ``KINDS``)."""

    model_config = ConfigDict(frozen=True)

    kind: EventKind
    #: seconds since the iteration started
    at: float = 0.0
    text: str = ""
    #: a model turn's tool calls
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    cost: float = 0.0
    model: str | None = None
    #: why the model stopped (the provider's word: "stop", "tool_calls", "length"...)
    finish_reason: str | None = None
    #: the agent whose model turn it is, where an agent has several (an ADK tree's
    #: LlmAgent: a workflow's step, a sub-agent handed off to)
    agent: str | None = None
    #: a tool call's outcome
    tool: str | None = None
    call_id: str | None = None
    arguments: dict[str, Any] | None = None
    result: Any = None
    error: str | None = None
    duration: float = 0.0
    #: a state change: dotted key ("session.refunded") -> new value
    changes: dict[str, Any] | None = None
    #: the final event of a conversation: why it ended
    reason: str | None = None


Trace = tuple[TraceEvent, ...]


def tool_events(trace: Trace) -> list[TraceEvent]:
    """The tool calls that ran (returned or failed), in order."""
    return [e for e in trace if e.kind in ("tool_result", "tool_error")]


def called_tools(trace: Trace) -> list[ToolCall]:
    """Every tool call the agent asked for, in order (also the ones that failed)."""
    return [c for e in trace if e.kind == "model" for c in e.tool_calls]
