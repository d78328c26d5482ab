"""The assertions of tool-forge's eval runner contract (seed 001), as one check over the trace.

An eval file's ``expect`` block is checked exactly as the contract writes it:
in its order (tools called / acceptable / not called, tool parameters, no tool
errors, non-empty, contains, contains-any, not-contains, matches, latency,
tokens), stopping at the first failure for the case's verdict and error
message. Template tokens were resolved when the file was read
(``cycle.formats.toolforge``): what could not be resolved is gone from
``expect`` and counted in ``skipped``.

The check scores the share of assertions that hold (all of them are looked at,
so an improver sees progress), and passes only when every one holds, which is
the contract's pass. ``assess`` gives the contract's own figures
(assertionsRun, assertionsSkipped, the first failure) for its result file.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from msgspec import Struct
from pydantic import BaseModel, ConfigDict, Field, model_validator

from cycle import patterns
from cycle.judge.checks import CheckOutcome, _Check
from cycle.records.trace import TraceEvent, called_tools

if TYPE_CHECKING:
    from cycle.judge.checks import CheckContext

#: ``toolsAcceptable: [["__none__"]]`` means: calling no tool is acceptable
NONE_CALLED = "__none__"
#: the contract's ``estimateTokens`` extension point: about four characters a token
CHARS_PER_TOKEN = 4


class ToolParam(BaseModel):
    """One ``toolParams`` assertion: a parameter of the first call of ``tool``."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    tool: str
    paramName: str
    assertion: Literal["equals", "contains", "oneOf", "exists", "notExists", "matches"]
    value: str | list[str] | None = None

    @model_validator(mode="after")
    def _value_fits(self) -> ToolParam:
        if self.assertion in ("exists", "notExists"):
            return self
        if self.value is None:
            raise ValueError(f"'{self.assertion}' needs a value")
        if self.assertion == "oneOf" and not isinstance(self.value, list):
            raise ValueError("'oneOf' needs a list of values")
        if self.assertion != "oneOf" and isinstance(self.value, list):
            raise ValueError(f"'{self.assertion}' needs one value, not a list")
        if self.assertion == "matches":
            js_regex(str(self.value))
        return self


class Expect(BaseModel):
    """An eval case's ``expect`` block: every assertion kind of the contract (section 3)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    toolsCalled: list[str] | None = None
    toolsAcceptable: list[list[str]] | None = None
    toolsNotCalled: list[str] | None = None
    toolParams: list[ToolParam] | None = None
    noToolErrors: bool | None = None
    responseNonEmpty: bool | None = None
    responseContains: list[str] | None = None
    responseContainsAny: list[list[str]] | None = None
    responseNotContains: list[str] | None = None
    responseMatches: list[str] | None = None
    maxLatencyMs: float | None = Field(None, ge=0)
    maxTokens: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _patterns_compile(self) -> Expect:
        for pattern in self.responseMatches or ():
            js_regex(pattern)
        return self


ASSERTION_KINDS: tuple[str, ...] = tuple(Expect.model_fields)


def js_regex(pattern: str) -> patterns.Pattern[str]:
    """A JavaScript ``new RegExp(pattern)`` as a Python pattern: the syntax both share, with
    JS named groups ``(?<name>...)`` spelled as Python's. A bad pattern raises ValueError."""
    source = re.sub(r"\(\?<(?![=!])(\w+)>", r"(?P<\1>", pattern)
    try:
        return patterns.compile_pattern(source)
    except patterns.error as e:
        raise ValueError(f"invalid regular expression {pattern!r}: {e}") from None


def _js_number(x: float) -> str:
    """JavaScript's ``String(number)``: 150 -> "150", 178.5 -> "178.5", 1e-7 -> "1e-7"."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    t = Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, t.digits))
    k, n = len(digits), len(digits) + int(t.exponent)  # value = 0.digits x 10^n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    return sign + digits[0] + ("." + digits[1:] if k > 1 else "") + ("e+" if e >= 0 else "e-") + str(abs(e))


_UNDEFINED = object()


def js_string(value: Any) -> str:
    """JavaScript's ``String(value)`` for JSON values (objects as ``JSON.stringify``: JS
    would say "[object Object]", which no assertion could usefully match)."""
    if value is _UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _js_number(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join("" if v is None else js_string(v) for v in value)
    return json_stringify(value)


def json_stringify(value: Any) -> str:
    """JavaScript's ``JSON.stringify`` (compact, keys in their order)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Call(Struct, frozen=True):
    """A tool call as the contract's ToolCallRecord sees it."""

    name: str
    params: dict[str, Any]
    success: bool


def calls_of(trace: tuple[TraceEvent, ...]) -> list[Call]:
    """The tool calls of a trace in call order, each failed when a tool_error answers it."""
    failed = {e.call_id for e in trace if e.kind == "tool_error"}
    return [Call(c.name, dict(c.arguments), c.id not in failed) for c in called_tools(trace)]


def latency_ms(trace: tuple[TraceEvent, ...], fallback: float) -> float:
    """The contract's latency, from sending the message to the complete response: the time of
    the trace's final event (stored with the trace, so a stored result is assessed the same),
    else ``fallback`` seconds."""
    final = next((e for e in reversed(trace) if e.kind == "final"), None)
    return (final.at if final is not None else fallback) * 1000.0


class Assessment(Struct, frozen=True):
    """The contract's verdict on one response."""

    #: every assertion held
    passed: bool
    #: the first failure, as the contract's result file writes it ("responseContains: ...")
    error: str | None
    #: assertions run up to and including the first failure (all, when it passed)
    run: int
    #: assertions skipped: unresolved tokens, and parameters of tools that were not called
    skipped: int
    #: assertions that hold, of all that were looked at (no short-circuit: for the score)
    held: int
    total: int


def _q(values: list[str]) -> str:
    return "[" + ", ".join(values) + "]"


def assess(expect: Expect, *, response: str, calls: list[Call], duration_ms: float,
           stubs: list[str] | None, skipped: int = 0) -> Assessment:
    """Check ``response`` (the final text) and ``calls`` against ``expect``, in the contract's
    order. ``stubs``: the tools the case stubs (stub mode), None in routing-only mode."""
    units: list[tuple[bool, str]] = []  # (holds, the failure message), in order
    names = [c.name for c in calls]
    if expect.toolsCalled is not None:
        units.append((names == expect.toolsCalled,
                      f"toolsCalled: expected {_q(expect.toolsCalled)} but got {_q(names)}"))
    if expect.toolsAcceptable is not None:
        sets = [s for s in expect.toolsAcceptable if s != [NONE_CALLED]]
        if len(sets) < len(expect.toolsAcceptable):
            sets.append([])
        ok = any(set(names) == set(s) for s in sets)
        units.append((ok, f"toolsAcceptable: got {_q(names)}, acceptable: "
                          + " or ".join(_q(s) for s in sets)))
    for forbidden in expect.toolsNotCalled or ():
        units.append((forbidden not in names, f"toolsNotCalled: {forbidden} was called"))
    for p in expect.toolParams or ():
        call = next((c for c in calls if c.name == p.tool), None)
        if call is None:
            skipped += 1  # the routing assertions say whether it should have been called
            continue
        raw = call.params.get(p.paramName, _UNDEFINED)
        actual = js_string(raw)
        where = f"toolParams: {p.tool}.{p.paramName}"
        if p.assertion == "equals":
            units.append((actual == p.value, f"{where} expected {p.value!r} but got {actual!r}"))
        elif p.assertion == "contains":
            units.append((str(p.value) in actual,
                          f"{where} expected to contain {p.value!r} but got {actual!r}"))
        elif p.assertion == "oneOf":
            units.append((actual in list(p.value or ()),
                          f"{where} expected one of {p.value!r} but got {actual!r}"))
        elif p.assertion == "exists":
            units.append((raw is not _UNDEFINED, f"{where} expected to exist but was not passed"))
        elif p.assertion == "notExists":
            units.append((raw is _UNDEFINED, f"{where} expected not to exist but got {actual!r}"))
        else:
            units.append((patterns.search(js_regex(str(p.value)), actual) is not None,
                          f"{where} expected to match /{p.value}/ but got {actual!r}"))
    if expect.noToolErrors:
        if stubs is not None:
            bad = [n for n in names if n not in stubs]
            units.append((not bad, f"noToolErrors: called {_q(bad)}, not stubbed by the case"))
        else:
            # tools that ran and failed; where none ran (routing only) this holds trivially
            bad = [c.name for c in calls if not c.success]
            units.append((not bad, f"noToolErrors: {_q(bad)} failed"))
    if expect.responseNonEmpty:
        units.append((bool(response.strip()), "responseNonEmpty: the response is empty"))
    for value in expect.responseContains or ():
        units.append((value in response,
                      f"responseContains: expected {value!r} in response but not found"))
    for group in expect.responseContainsAny or ():
        units.append((any(v in response for v in group),
                      f"responseContainsAny: none of {group!r} found in response"))
    for value in expect.responseNotContains or ():
        units.append((value not in response, f"responseNotContains: found {value!r} in response"))
    for pattern in expect.responseMatches or ():
        units.append((patterns.search(js_regex(pattern), response) is not None,
                      f"responseMatches: /{pattern}/ does not match the response"))
    if expect.maxLatencyMs is not None:
        units.append((duration_ms <= expect.maxLatencyMs,
                      f"maxLatencyMs: took {duration_ms:.0f}ms, limit {expect.maxLatencyMs:g}ms"))
    if expect.maxTokens is not None:
        tokens = estimate_tokens(response)
        units.append((tokens <= expect.maxTokens,
                      f"maxTokens: about {tokens} tokens, limit {expect.maxTokens}"))
    first = next((i for i, (ok, _) in enumerate(units) if not ok), None)
    return Assessment(
        passed=first is None, error=None if first is None else units[first][1],
        run=len(units) if first is None else first + 1, skipped=skipped,
        held=sum(ok for ok, _ in units), total=len(units))


def estimate_tokens(text: str) -> int:
    """The contract's ``estimateTokens``: about four characters a token, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class ToolforgeCheck(_Check):
    """A tool-forge eval case's ``expect`` block, checked as its runner contract says."""

    type: Literal["toolforge"] = "toolforge"
    expect: Expect = Field(description="The case's assertions (tokens already resolved).")
    stubs: list[str] | None = Field(
        None, description="The tools the case stubs (stub mode); none: routing-only mode.")
    skipped: int = Field(0, ge=0, description="Assertions skipped for unresolved tokens.")
    skipped_tokens: list[str] = Field(default_factory=list,
                                      description="The tokens that did not resolve.")

    def assess(self, ctx: CheckContext) -> Assessment:
        return assess(self.expect, response=ctx.output, calls=calls_of(ctx.trace),
                      duration_ms=latency_ms(ctx.trace, ctx.duration), stubs=self.stubs,
                      skipped=self.skipped)

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        a = self.assess(ctx)
        if a.passed:
            return CheckOutcome(100.0, f"all {a.run} assertions passed"
                                + (f" ({a.skipped} skipped)" if a.skipped else ""))
        return CheckOutcome(100.0 * a.held / a.total, a.error or "failed")
