"""Checks over the trace: which tools were called, with which arguments, in which order,
whether any failed, how many events of a kind, and what the case's state ended as.

Metrics are decoupled from execution: each check reads ``ctx.trace`` (and
``ctx.state``), whatever agent produced them. Names follow seed 004 (GoGrid)
where it has one: ``tool_use`` is ``tool_called`` with argument matching.

Argument matching (``match``): ``exact`` (the arguments equal ``args``),
``subset`` (every key of ``args`` is there with that value; the default),
``regex`` (every value of ``args`` is a pattern the argument's text must
match), ``schema`` (``args`` is a JSON schema the arguments satisfy). Numbers
compare within ``tolerance`` (absolute) in exact and subset matching.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, model_validator

from cycle.judge.checks import CheckOutcome, _Check, fill_value
from cycle.query import MISSING, lookup
from cycle.records.reading import Match, arguments_match, close_enough, value_text
from cycle.records.trace import KINDS, TraceEvent, called_tools, tool_events
from cycle.words import plural

if TYPE_CHECKING:
    from cycle.judge.checks import CheckContext

class ToolCalled(_Check):
    """The agent called ``tool`` (at least ``min_times``; with ``args``, with matching
    arguments). ``tool_use`` is the same check by its GoGrid name."""

    type: Literal["tool_called", "tool_use"] = "tool_called"
    rendered: ClassVar[tuple[str, ...]] = ("args",)
    tool: str = Field(description="The tool's name.")
    args: dict[str, Any] | None = Field(None, description="Arguments a call must match.")
    match: Match = Field("subset", description="How arguments match: exact, subset, regex, schema.")
    tolerance: float = Field(0.0, ge=0, description="Numbers match within this (exact, subset).")
    min_times: int = Field(1, ge=1, description="Calls needed (matching ones, with args).")

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        calls = [c for c in called_tools(ctx.trace) if c.name == self.tool]
        if self.args is not None:
            want = fill_value(self.args, ctx)
            matching = [c for c in calls if arguments_match(
                c.arguments, want, match=self.match, tolerance=self.tolerance)]
            if len(matching) >= self.min_times:
                return CheckOutcome(100.0, f"{self.tool} called {len(matching)}x with matching "
                                           "arguments")
            seen = "; ".join(value_text(c.arguments) for c in calls[:3]) or "never called"
            return CheckOutcome(0.0, f"{self.tool} not called with arguments matching "
                                     f"{value_text(want)} ({self.match}); calls: {seen}"[:300])
        if len(calls) >= self.min_times:
            return CheckOutcome(100.0, f"{self.tool} called {len(calls)}x")
        names = ", ".join(dict.fromkeys(c.name for c in called_tools(ctx.trace))) or "none"
        return CheckOutcome(0.0, f"{self.tool} called {len(calls)}x, needed {self.min_times} "
                                 f"(tools called: {names})")


class ToolsCalled(_Check):
    """Every tool in ``tools`` was called (the score is the share that was)."""

    type: Literal["tools_called"] = "tools_called"
    tools: list[str] = Field(min_length=1, description="Tools that must all be called.")

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        called = {c.name for c in called_tools(ctx.trace)}
        missing = [t for t in self.tools if t not in called]
        score = 100.0 * (len(self.tools) - len(missing)) / len(self.tools)
        return CheckOutcome(score, "all called" if not missing else f"not called: {', '.join(missing)}")


class OnlyTools(_Check):
    """No tool outside ``tools`` was called."""

    type: Literal["only_tools"] = "only_tools"
    tools: list[str] = Field(description="The tools that may be called.")

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        other = sorted({c.name for c in called_tools(ctx.trace)} - set(self.tools))
        return CheckOutcome(0.0 if other else 100.0,
                            f"also called: {', '.join(other)}" if other else "only allowed tools")


class ToolNotCalled(_Check):
    """``tool`` was never called (with ``args``: never with matching arguments)."""

    type: Literal["tool_not_called"] = "tool_not_called"
    rendered: ClassVar[tuple[str, ...]] = ("args",)
    tool: str = Field(description="The tool that must not be called.")
    args: dict[str, Any] | None = Field(None, description="Only calls matching these count.")
    match: Match = Field("subset", description="How arguments match.")

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        want = None if self.args is None else fill_value(self.args, ctx)
        calls = [c for c in called_tools(ctx.trace) if c.name == self.tool and (
            want is None or arguments_match(c.arguments, want, match=self.match))]
        if calls:
            return CheckOutcome(0.0, f"{self.tool} was called {len(calls)}x: "
                                     f"{value_text(calls[0].arguments)}"[:300])
        return CheckOutcome(100.0, f"{self.tool} not called")


class ToolOrder(_Check):
    """The tools were called in this order (``in_order``: as a subsequence, other calls
    between allowed; ``exact``: nothing else; ``any_order``: all of them, in any order)."""

    type: Literal["tool_order"] = "tool_order"
    tools: list[str] = Field(min_length=1, description="Tool names, in the expected order.")
    mode: Literal["in_order", "exact", "any_order"] = Field("in_order", description="How strict.")

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        seq = [c.name for c in called_tools(ctx.trace)]
        if self.mode == "exact":
            ok = seq == self.tools
        elif self.mode == "any_order":
            ok = sorted(seq) == sorted(self.tools) if len(seq) == len(self.tools) else all(
                seq.count(t) >= self.tools.count(t) for t in set(self.tools))
        else:
            it = iter(seq)
            ok = all(any(name == want for name in it) for want in self.tools)
        shown = " -> ".join(seq) or "no tool called"
        return CheckOutcome(100.0 if ok else 0.0,
                            f"calls: {shown}" + ("" if ok else f"; expected {' -> '.join(self.tools)}"
                                                 f" ({self.mode})"))


class NoToolErrors(_Check):
    """No tool call failed (a mock's error, arguments that break the schema, a crash)."""

    type: Literal["no_tool_errors"] = "no_tool_errors"

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        errors = [e for e in tool_events(ctx.trace) if e.kind == "tool_error"]
        if not errors:
            return CheckOutcome(100.0, "no tool error")
        first = errors[0]
        return CheckOutcome(0.0, f"{len(errors)} tool error(s); first: {first.tool}: {first.error}"[:300])


class _Bounded(_Check):
    """A count that must lie within [``min``, ``max``] (at least one of them given)."""

    #: the smallest count there can be (shown when no min is given)
    FLOOR: ClassVar[int] = 0
    min: int | None = None
    max: int | None = None

    @model_validator(mode="after")
    def _bounded(self) -> _Bounded:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        return self

    def _within(self, n: int) -> tuple[float, str]:
        """(score, "allowed lo..hi") for a count of ``n``."""
        ok = (self.min is None or n >= self.min) and (self.max is None or n <= self.max)
        low = self.min if self.min is not None else self.FLOOR
        return 100.0 if ok else 0.0, f"allowed {low}..{self.max if self.max is not None else '∞'}"


class EventCount(_Bounded):
    """The number of trace events of ``kind`` (those matching ``where``) is within
    [``min``, ``max``]. ``where`` compares event fields: ``{tool: refund}``."""

    type: Literal["event_count"] = "event_count"
    rendered: ClassVar[tuple[str, ...]] = ("where",)
    kind: str = Field(description="user, model, tool_result, tool_error, state or final.")
    where: dict[str, Any] = Field(default_factory=dict, description="Field values an event must have.")
    min: int | None = Field(None, ge=0, description="At least this many.")
    max: int | None = Field(None, ge=0, description="At most this many.")

    @model_validator(mode="after")
    def _known_kind(self) -> EventCount:
        if self.kind not in KINDS:
            raise ValueError(f"unknown event kind {self.kind!r}; kinds: {', '.join(KINDS)}")
        return self

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        where = fill_value(self.where, ctx)

        def matches(e: TraceEvent) -> bool:
            return all(getattr(e, k, None) == v for k, v in where.items())

        n = sum(1 for e in ctx.trace if e.kind == self.kind and matches(e))
        score, bound = self._within(n)
        return CheckOutcome(score, f"{plural(n, self.kind + ' event')} ({bound})")


class StateValue(_Check):
    """The case's final state has ``equals`` at ``path`` (``session.refund.status``);
    without ``equals``, the path only has to exist."""

    type: Literal["state_value"] = "state_value"
    rendered: ClassVar[tuple[str, ...]] = ("equals",)
    path: str = Field(min_length=1, description="Dotted path in the state: scope.key[.key...].")
    equals: Any = Field(None, description="The value expected there (left out: the path exists).")

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        got = lookup(ctx.state, self.path)
        if got is MISSING:
            return CheckOutcome(0.0, f"state has no {self.path}")
        want = fill_value(self.equals, ctx)
        if "equals" not in self.model_fields_set or close_enough(got, want, 0.0):
            return CheckOutcome(100.0, f"{self.path} = {value_text(got)}"[:200])
        return CheckOutcome(0.0, f"{self.path} = {value_text(got)}, expected {value_text(want)}"[:300])


class TurnCount(_Bounded):
    """The conversation took between ``min`` and ``max`` user turns (the first input counts)."""

    FLOOR: ClassVar[int] = 1
    type: Literal["turn_count"] = "turn_count"
    min: int | None = Field(None, ge=1, description="At least this many user turns.")
    max: int | None = Field(None, ge=1, description="At most this many user turns.")

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        n = sum(1 for e in ctx.trace if e.kind == "user")
        score, bound = self._within(n)
        return CheckOutcome(score, f"{plural(n, 'user turn')} ({bound})")
