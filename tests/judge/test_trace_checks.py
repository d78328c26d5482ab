"""Checks over the trace: every kind passing and failing, on a trace a user would see."""

import pytest
from pydantic import TypeAdapter, ValidationError

from cycle.judge.criteria import CheckSpec
from cycle.records import ToolCall, TraceEvent
from cycle.testing.checks import check_context

SPEC = TypeAdapter(CheckSpec)


def call(name: str, i: int, **args) -> ToolCall:
    return ToolCall(id=f"c{i}", name=name, arguments=args)


# lookup twice (one with a float amount), then refund; the refund tool failed once
TRACE = (
    TraceEvent(kind="user", text="Refund A-1"),
    TraceEvent(kind="model", tool_calls=(call("lookup", 1, order="A-1"),
                                         call("lookup", 2, order="B-2", amount=19.999))),
    TraceEvent(kind="tool_result", tool="lookup", call_id="c1", arguments={"order": "A-1"},
               result={"status": "shipped"}),
    TraceEvent(kind="tool_result", tool="lookup", call_id="c2",
               arguments={"order": "B-2", "amount": 19.999}, result={}),
    TraceEvent(kind="model", tool_calls=(call("refund", 3, order="A-1", amount=20),)),
    TraceEvent(kind="tool_error", tool="refund", call_id="c3", arguments={"order": "A-1"},
               error="bank down"),
    TraceEvent(kind="state", changes={"session.refunded": "A-1"}),
    TraceEvent(kind="model", text="Done."),
    TraceEvent(kind="final", text="Done."),
)
STATE = {"session": {"refunded": "A-1", "refund": {"status": "sent"}}, "user": {"tier": "gold"}}


async def check(spec: dict) -> tuple[float, str]:
    outcome = await SPEC.validate_python(spec).aevaluate(
        check_context("Done.", trace=TRACE, state=STATE))
    return outcome.score, outcome.reason


@pytest.mark.parametrize(("spec", "passes"), [
    ({"type": "tool_called", "tool": "refund"}, True),
    ({"type": "tool_called", "tool": "cancel"}, False),
    ({"type": "tool_called", "tool": "lookup", "min_times": 2}, True),
    ({"type": "tool_called", "tool": "lookup", "min_times": 3}, False),
    ({"type": "tool_use", "tool": "refund", "args": {"order": "A-1"}}, True),  # GoGrid's name
    ({"type": "tool_called", "tool": "refund", "args": {"order": "A-2"}}, False),
    ({"type": "tool_called", "tool": "refund", "args": {"order": "A-1"}, "match": "exact"}, False),
    ({"type": "tool_called", "tool": "refund", "args": {"order": "A-1", "amount": 20},
      "match": "exact"}, True),
    ({"type": "tool_called", "tool": "lookup", "args": {"amount": 20}}, False),
    ({"type": "tool_called", "tool": "lookup", "args": {"amount": 20}, "tolerance": 0.01}, True),
    ({"type": "tool_called", "tool": "lookup", "args": {"order": "^B-\\d$"}, "match": "regex"}, True),
    ({"type": "tool_called", "tool": "lookup", "args": {"order": "^C"}, "match": "regex"}, False),
    ({"type": "tool_called", "tool": "refund", "match": "schema", "args": {
        "type": "object", "properties": {"amount": {"type": "number", "minimum": 10}},
        "required": ["amount"]}}, True),
    ({"type": "tool_called", "tool": "refund", "match": "schema", "args": {
        "type": "object", "properties": {"amount": {"type": "number", "maximum": 10}}}}, False),
    ({"type": "tools_called", "tools": ["lookup", "refund"]}, True),
    ({"type": "tools_called", "tools": ["lookup", "cancel"]}, False),
    ({"type": "only_tools", "tools": ["lookup", "refund"]}, True),
    ({"type": "only_tools", "tools": ["lookup"]}, False),
    ({"type": "tool_not_called", "tool": "cancel"}, True),
    ({"type": "tool_not_called", "tool": "refund"}, False),
    ({"type": "tool_not_called", "tool": "refund", "args": {"order": "Z"}}, True),
    ({"type": "tool_order", "tools": ["lookup", "refund"]}, True),
    ({"type": "tool_order", "tools": ["refund", "lookup"]}, False),
    ({"type": "tool_order", "tools": ["lookup", "lookup", "refund"], "mode": "exact"}, True),
    ({"type": "tool_order", "tools": ["lookup", "refund"], "mode": "exact"}, False),
    ({"type": "tool_order", "tools": ["refund", "lookup", "lookup"], "mode": "any_order"}, True),
    ({"type": "tool_order", "tools": ["refund", "cancel"], "mode": "any_order"}, False),
    ({"type": "no_tool_errors"}, False),
    ({"type": "event_count", "kind": "model", "max": 3}, True),
    ({"type": "event_count", "kind": "model", "max": 2}, False),
    ({"type": "event_count", "kind": "tool_result", "where": {"tool": "lookup"}, "min": 2}, True),
    ({"type": "event_count", "kind": "tool_error", "max": 0}, False),
    ({"type": "state_value", "path": "session.refunded", "equals": "A-1"}, True),
    ({"type": "state_value", "path": "session.refund.status", "equals": "sent"}, True),
    ({"type": "state_value", "path": "session.refund.status", "equals": "held"}, False),
    ({"type": "state_value", "path": "user.tier"}, True),
    ({"type": "state_value", "path": "user.name"}, False),
    ({"type": "exact_match", "value": "Done."}, True),  # GoGrid's name for exact
])
async def test_each_check_passes_and_fails(spec, passes):
    score, reason = await check(spec)
    assert (score == 100) is passes, reason
    assert reason


async def test_reasons_say_what_happened():
    assert (await check({"type": "tool_order", "tools": ["refund", "lookup"]}))[1] == (
        "calls: lookup -> lookup -> refund; expected refund -> lookup (in_order)")
    assert "bank down" in (await check({"type": "no_tool_errors"}))[1]
    score, reason = await check({"type": "tools_called", "tools": ["lookup", "cancel"]})
    assert score == 50 and reason == "not called: cancel"


def test_a_clean_trace_has_no_tool_errors_and_bad_specs_are_refused():
    assert all(e.kind != "tool_error" for e in TRACE[:5])
    with pytest.raises(ValidationError, match="unknown event kind"):
        SPEC.validate_python({"type": "event_count", "kind": "tools", "max": 1})
    with pytest.raises(ValidationError, match="min, max or both"):
        SPEC.validate_python({"type": "event_count", "kind": "model"})


@pytest.mark.parametrize(("spec", "passes"), [
    ({"type": "tool_use", "tool": "refund", "args": {"order": "{{ order }}"}}, True),
    ({"type": "tool_called", "tool": "refund", "args": {"amount": "{{ amount }}"}}, True),
    ({"type": "tool_called", "tool": "refund", "args": {"order": "{{ other }}"}}, False),
    ({"type": "tool_called", "tool": "lookup", "args": {"order": "{{ order[0] }}-1"}}, True),
    ({"type": "tool_not_called", "tool": "refund", "args": {"order": "{{ order }}"}}, False),
    ({"type": "state_value", "path": "session.refunded", "equals": "{{ order }}"}, True),
    ({"type": "state_value", "path": "session.refunded", "equals": "{{ other }}"}, False),
    ({"type": "event_count", "kind": "tool_error", "where": {"tool": "{{ tool }}"}, "min": 1},
     True),
])
async def test_checks_fill_the_case_s_variables_where_they_compare(spec, passes):
    """Issue 31: tool_use args and state_value equals compared the literal '{{ order }}'
    while contains filled it. A lone placeholder is the variable itself (the number 20)."""
    variables = {"order": "A-1", "amount": 20, "other": "Z-9", "tool": "refund"}
    outcome = await SPEC.validate_python(spec).aevaluate(check_context(
        "Done.", variables=variables, trace=TRACE, state=STATE))
    assert (outcome.score == 100.0) is passes, outcome.reason
