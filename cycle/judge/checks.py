"""Deterministic checks: small evaluators that need no model.

Each check is a frozen pydantic model (it is configured in YAML) with
``evaluate(ctx) -> CheckOutcome``. A check scores 100 or 0, or a fraction
where that is natural (``contains``: the share of the substrings found).
Whether a check criterion *passes* is decided by the criterion's pass mark
(default 100: every substring found, the pattern matched...), see
``cycle.judge.criteria``.

String arguments may use the case's variables as Jinja2 templates, so one
suite-level check can follow each case: ``values: ["{{ order }}"]``.
``expected`` and ``input`` are variables too.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, ClassVar, Literal, Protocol

from msgspec import Struct
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from cycle import patterns
from cycle.aio import call_user_function
from cycle.errors import EvalError
from cycle.imports import OfProject, import_object
from cycle.prompts import render
from cycle.records import AgentResult, ToolCall, TraceEvent, Usage
from cycle.records.reading import json_in


class CaseView(Protocol):
    """What a check knows of a case (a ``cycle.cases.TestCase``)."""

    @property
    def id(self) -> str: ...
    @property
    def input(self) -> Any: ...
    @property
    def variables(self) -> dict[str, Any]: ...
    @property
    def expected(self) -> Any: ...


class CheckContext:
    """Everything a check may look at for one iteration of one case: a view of the case
    and of the agent's answer as they are (nothing copied; ``ctx.output``, ``ctx.trace``,
    ``ctx.variables``... read through)."""

    __slots__ = ("answer", "case")

    def __init__(self, case: CaseView, answer: AgentResult) -> None:
        self.case = case
        self.answer = answer

    @property
    def case_id(self) -> str:
        return self.case.id

    @property
    def input(self) -> Any:
        return self.case.input

    @property
    def variables(self) -> dict[str, Any]:
        """The template variables of the case (its input dict, plus ``input`` and
        ``expected``)."""
        return self.case.variables

    @property
    def expected(self) -> Any:
        return self.case.expected

    @property
    def output(self) -> str:
        return self.answer.output

    @property
    def structured(self) -> Any:
        """A structured answer (dict) when the agent returned one."""
        return self.answer.structured

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return self.answer.tool_calls

    @property
    def latency(self) -> float:
        """Seconds the agent's model calls took (provider latency)."""
        return self.answer.latency

    @property
    def duration(self) -> float:
        """Wall seconds of the whole agent step."""
        return self.answer.duration

    @property
    def usage(self) -> Usage:
        return self.answer.usage

    @property
    def cost(self) -> float:
        """The agent's cost in USD."""
        return self.answer.cost

    @property
    def trace(self) -> tuple[TraceEvent, ...]:
        """What happened, in order (cycle.records.trace)."""
        return self.answer.trace

    @property
    def state(self) -> dict[str, Any]:
        """The case's state at the end."""
        return self.answer.state


class CheckOutcome(Struct, frozen=True):
    """A check's score (0-100) and a short reason a person can read."""

    score: float
    reason: str


def _fill(value: str, ctx: CheckContext) -> str:
    # only strings that look like templates are rendered: plain text costs nothing
    if "{{" in value or "{%" in value:
        return render(value, ctx.variables, field="check")
    return value


_WHOLE = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")


def _templates_in(value: Any) -> list[str]:
    """The template strings in a field's value (nested in lists and mappings too)."""
    if isinstance(value, str):
        return [value] if "{{" in value or "{%" in value else []
    if isinstance(value, dict):
        return [t for v in value.values() for t in _templates_in(v)]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _templates_in(v)]
    return []


def fill_value(value: Any, ctx: CheckContext) -> Any:
    """A value a check compares with, its templates filled from the case: strings rendered
    (``"order {{ order }}"``), a string that is one placeholder replaced by the variable
    itself (``"{{ order }}"`` is the number 1234 when the case says 1234), mappings and
    lists filled inside. ``contains`` filled its values; ``tool_called`` args,
    ``state_value`` and ``event_count`` compared the literal text."""
    if isinstance(value, str):
        whole = _WHOLE.match(value)
        if whole and whole.group(1) in ctx.variables:
            return ctx.variables[whole.group(1)]
        return _fill(value, ctx)
    if isinstance(value, dict):
        return {k: fill_value(v, ctx) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_value(v, ctx) for v in value]
    return value


def _norm(text: str, *, case_sensitive: bool, collapse_whitespace: bool = False) -> str:
    if collapse_whitespace:
        text = " ".join(text.split())
    return text if case_sensitive else text.casefold()


class _Check(OfProject):
    """A check kind: its fields, ``evaluate``, and what a run's preflight must try first
    (its own declaration: a new check kind touches nothing else)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    #: the fields filled from the case's variables when it is evaluated (``{{ order }}``)
    rendered: ClassVar[tuple[str, ...]] = ()
    #: the fields naming Python objects by import path, loaded when it is evaluated
    imported: ClassVar[tuple[str, ...]] = ()
    def load(self, path: str, *, what: str) -> Any:
        """The object at the import path ``path``, a module of the check's project
        imported as that project's (see ``cycle.imports``)."""
        return import_object(path, what=what, project=self._project)

    def templates(self) -> list[tuple[str, str]]:
        """(field, template) of each template the check renders: the preflight renders
        them with every case's variables before any call is paid for."""
        return [(name, t) for name in self.rendered for t in _templates_in(getattr(self, name))]

    def imports(self) -> list[tuple[str, str]]:
        """(field, import path) of each object the check loads: imported before the run."""
        return [(name, path) for name in self.imported if (path := getattr(self, name))]

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:  # pragma: no cover - abstract
        raise NotImplementedError

    async def aevaluate(self, ctx: CheckContext) -> CheckOutcome:
        """Async entry point; only the python check may actually await."""
        return self.evaluate(ctx)


class ExactMatch(_Check):
    """The output equals a value (the case's ``expected`` when no value is given)."""

    type: Literal["exact", "exact_match"] = "exact"
    rendered: ClassVar[tuple[str, ...]] = ("value",)
    value: str | None = Field(None, description="The text to match; default: the case's expected.")
    case_sensitive: bool = Field(True, description="Compare case-sensitively.")
    normalize_whitespace: bool = Field(
        False, description="Trim and collapse runs of whitespace before comparing."
    )

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        want = _fill(self.value, ctx) if self.value is not None else ctx.expected
        if want is None:
            raise EvalError(f"case '{ctx.case_id}': exact check has no value and no expected output")
        a = _norm(ctx.output, case_sensitive=self.case_sensitive,
                  collapse_whitespace=self.normalize_whitespace)
        b = _norm(str(want), case_sensitive=self.case_sensitive,
                  collapse_whitespace=self.normalize_whitespace)
        if self.normalize_whitespace:
            a, b = a.strip(), b.strip()
        if a == b:
            return CheckOutcome(100.0, "output matches exactly")
        return CheckOutcome(0.0, f"output differs from {str(want)[:80]!r}")


class _Substrings(_Check):
    rendered: ClassVar[tuple[str, ...]] = ("values",)
    values: list[str] = Field(min_length=1, description="Substrings to look for.")
    case_sensitive: bool = Field(False, description="Match case-sensitively.")

    def _found(self, ctx: CheckContext) -> tuple[list[str], list[str]]:
        text = _norm(ctx.output, case_sensitive=self.case_sensitive)
        found: list[str] = []
        missing: list[str] = []
        for raw in self.values:
            value = _fill(raw, ctx)
            (found if _norm(value, case_sensitive=self.case_sensitive) in text else missing).append(value)
        return found, missing


class Contains(_Substrings):
    """Scores the share of ``values`` found in the output (100 when all are)."""

    type: Literal["contains"] = "contains"

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        found, missing = self._found(ctx)
        score = 100.0 * len(found) / (len(found) + len(missing))
        if not missing:
            return CheckOutcome(score, "all expected text found")
        return CheckOutcome(score, "missing: " + ", ".join(repr(m) for m in missing))


class ContainsAny(_Substrings):
    """100 when at least one of ``values`` is in the output."""

    type: Literal["contains_any"] = "contains_any"

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        found, _ = self._found(ctx)
        if found:
            return CheckOutcome(100.0, f"found {found[0]!r}")
        return CheckOutcome(0.0, "none of " + ", ".join(repr(_fill(v, ctx)) for v in self.values))


class NotContains(_Substrings):
    """100 when none of ``values`` is in the output."""

    type: Literal["not_contains"] = "not_contains"

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        found, _ = self._found(ctx)
        if not found:
            return CheckOutcome(100.0, "no forbidden text found")
        return CheckOutcome(0.0, "found forbidden: " + ", ".join(repr(f) for f in found))


class Regex(_Check):
    """100 when the pattern matches somewhere in the output (``re.search``, with a time
    limit: cycle.patterns)."""

    type: Literal["regex"] = "regex"
    rendered: ClassVar[tuple[str, ...]] = ("pattern",)
    pattern: str = Field(description="A Python regular expression.")
    ignore_case: bool = Field(False, description="Match case-insensitively.")
    multiline: bool = Field(False, description="^ and $ match at every line.")

    #: a patterns.Pattern (Any: pydantic reads the annotation, and regex loads on first use)
    _compiled: Any = PrivateAttr(None)

    @model_validator(mode="after")
    def _compile(self) -> Regex:
        # compiled once here, not per case; a templated pattern is compiled per case
        if "{{" not in self.pattern:
            try:
                self._compiled = patterns.compile_pattern(self.pattern, self._flags)
            except patterns.error as e:
                raise ValueError(f"invalid regular expression: {e}") from e
        return self

    @property
    def _flags(self) -> int:
        return ((patterns.IGNORECASE if self.ignore_case else 0)
                | (patterns.MULTILINE if self.multiline else 0))

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        compiled = self._compiled or patterns.compile_pattern(_fill(self.pattern, ctx),
                                                              self._flags)
        m = patterns.search(compiled, ctx.output)
        if m:
            return CheckOutcome(100.0, f"matched {m.group(0)[:60]!r}")
        return CheckOutcome(0.0, f"no match for /{compiled.pattern}/")


def _parse_json_output(ctx: CheckContext) -> Any:
    return ctx.structured if ctx.structured is not None else json_in(ctx.output)


class JsonSchema(_Check):
    """100 when the output is JSON valid against a JSON schema or a pydantic model."""

    type: Literal["json_schema"] = "json_schema"
    imported: ClassVar[tuple[str, ...]] = ("model",)
    json_schema: dict[str, Any] | None = Field(
        None, alias="schema", description="A JSON schema the output must satisfy."
    )
    model: str | None = Field(
        None, description="A pydantic model by import path (package.module:Model) instead."
    )

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, populate_by_name=True)

    @model_validator(mode="after")
    def _one_source(self) -> JsonSchema:
        if (self.json_schema is None) == (self.model is None):
            raise ValueError("give exactly one of 'schema' and 'model'")
        if self.json_schema is not None:
            # an invalid schema would fail every case, after paying for every answer
            import jsonschema

            try:
                jsonschema.Draft202012Validator.check_schema(self.json_schema)
            except jsonschema.SchemaError as e:
                where = "/".join(str(p) for p in e.absolute_path) or "(root)"
                raise ValueError(f"invalid JSON schema at {where}: {e.message}") from None
        return self

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        try:
            data = _parse_json_output(ctx)
        except (json.JSONDecodeError, ValueError) as e:
            return CheckOutcome(0.0, f"output is not JSON: {e}")
        if self.model is not None:
            from pydantic import ValidationError

            model = self.load(self.model, what="check.model")
            try:
                model.model_validate(data)
            except ValidationError as e:
                first = e.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "(root)"
                return CheckOutcome(0.0, f"{where}: {first['msg']}")
            return CheckOutcome(100.0, f"valid {model.__name__}")
        import jsonschema

        validator = jsonschema.Draft202012Validator(self.json_schema or {})
        error = jsonschema.exceptions.best_match(validator.iter_errors(data))
        if error is None:
            return CheckOutcome(100.0, "matches the schema")
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        return CheckOutcome(0.0, f"{where}: {error.message}")


class MaxLatency(_Check):
    """100 when the agent's model calls took at most ``seconds``."""

    type: Literal["max_latency"] = "max_latency"
    seconds: float = Field(gt=0, description="The most provider latency allowed, in seconds.")

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        ok = ctx.latency <= self.seconds
        return CheckOutcome(100.0 if ok else 0.0, f"latency {ctx.latency:.2f}s (limit {self.seconds:g}s)")


class MaxTokens(_Check):
    """100 when the agent used at most ``tokens`` (output tokens, or total with ``total: true``)."""

    type: Literal["max_tokens"] = "max_tokens"
    tokens: int = Field(gt=0, description="The most tokens allowed.")
    total: bool = Field(False, description="Count input and output tokens, not output only.")

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        used = ctx.usage.total_tokens if self.total else ctx.usage.output_tokens
        what = "total" if self.total else "output"
        return CheckOutcome(100.0 if used <= self.tokens else 0.0,
                            f"{used} {what} tokens (limit {self.tokens})")


class CostWithin(_Check):
    """100 when the agent's cost stayed within ``usd``."""

    type: Literal["cost_within"] = "cost_within"
    usd: float = Field(ge=0, description="The most the agent may spend on one case, in USD.")

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        ok = ctx.cost <= self.usd
        return CheckOutcome(100.0 if ok else 0.0, f"cost ${ctx.cost:.6f} (limit ${self.usd:g})")


class CompletedWithin(_Check):
    """100 when the whole agent step (wall time, tools included) took at most ``seconds``."""

    type: Literal["completed_within"] = "completed_within"
    seconds: float = Field(gt=0, description="The most wall time allowed, in seconds.")

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:
        ok = ctx.duration <= self.seconds
        return CheckOutcome(100.0 if ok else 0.0, f"took {ctx.duration:.2f}s (limit {self.seconds:g}s)")


class PythonCheck(_Check):
    """A function by import path, called with the CheckContext (sync or async).

    It returns a bool (100/0), a number (0-100), a ``(score, reason)`` pair or
    a ``CheckOutcome``. An exception it raises makes the case an error.
    """

    type: Literal["python"] = "python"
    imported: ClassVar[tuple[str, ...]] = ("function",)
    function: str = Field(description="package.module:function taking a CheckContext.")
    #: the environment's keys, read at the check's first use (0.1 ms a read: not a case's)
    _secrets: tuple[str, ...] | None = PrivateAttr(None)

    def evaluate(self, ctx: CheckContext) -> CheckOutcome:  # pragma: no cover - use aevaluate
        raise NotImplementedError("python checks are evaluated with aevaluate")

    async def aevaluate(self, ctx: CheckContext) -> CheckOutcome:
        from cycle.llm.http import environment_secrets, scrub

        fn = self.load(self.function, what="check.function")
        value = await call_user_function(fn, ctx, what=f"check {self.function}")
        outcome = _outcome(value, self.function)
        if self._secrets is None:
            self._secrets = environment_secrets()
        # its reason is the user's code speaking, which may quote the environment's keys
        # (its exception is masked where the runner keeps the iteration's error)
        reason = scrub(outcome.reason, self._secrets)
        return outcome if reason is outcome.reason else CheckOutcome(outcome.score, reason)


def _outcome(value: Any, name: str) -> CheckOutcome:
    if isinstance(value, CheckOutcome):
        if isinstance(value.score, bool) or not isinstance(value.score, int | float):
            raise EvalError(f"check {name} returned a CheckOutcome whose score is "
                            f"{type(value.score).__name__}; expected a number from 0 to 100")
        return CheckOutcome(_bounded(value.score, name), value.reason)
    if isinstance(value, bool):
        return CheckOutcome(100.0 if value else 0.0, f"{name} returned {value}")
    if isinstance(value, int | float):
        return CheckOutcome(_bounded(value, name), f"{name} returned {value}")
    if isinstance(value, tuple) and len(value) == 2:
        score, reason = value
        inner = _outcome(score, name)
        return CheckOutcome(inner.score, str(reason))
    raise EvalError(f"check {name} returned {type(value).__name__}; expected bool, number or (score, reason)")


def _bounded(score: float, name: str) -> float:
    """A check's number as a 0-100 score; NaN is an error (min(100, nan) is 100: a ratio
    of 0/0 passed with full marks)."""
    if math.isnan(score):
        raise EvalError(f"check {name} returned NaN, not a score: an error, not a verdict")
    return max(0.0, min(100.0, float(score)))
