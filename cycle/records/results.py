"""What evaluation produces: an agent's answer, verdicts, iteration results, run results.

Errors are kept apart from failures in every figure: an errored iteration
counts in ``errors`` and is never averaged in as a score. The aggregation
itself (``build_run_result``) is ``cycle.evals``' work; these are the values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any, Literal, Protocol

from msgspec import Struct, field
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from cycle.records.messages import ToolCall, Usage
from cycle.records.trace import TraceEvent

#: how an iteration (or a case) ended: judged (passed or failed), an error of the
#: infrastructure or the agent, or terminated by a limit (too many steps): each is
#: counted apart, and only judged iterations are averaged
Status = Literal["passed", "failed", "error", "terminated"]

_FROZEN = ConfigDict(frozen=True)


class Stats(BaseModel):
    """Summary of a sample. ``sd`` is the sample standard deviation (n-1);
    the interval is the t-based 95% confidence interval of the mean (None for n < 2)."""

    model_config = _FROZEN

    n: int
    mean: float | None
    sd: float | None
    min: float | None
    max: float | None
    ci_low: float | None
    ci_high: float | None
    #: the t interval passed the scale's bounds (0-100) and was cut to them: with few,
    #: spread samples the normal approximation says nothing past the bounds
    clipped: bool = False

    @property
    def half_width(self) -> float | None:
        """The interval's half width (None when it was clipped: no longer symmetric)."""
        if self.ci_low is None or self.ci_high is None or self.mean is None or self.clipped:
            return None
        return self.ci_high - self.mean

    def to_dict(self) -> dict[str, float | int | None]:
        return self.model_dump()


class AgentResult(BaseModel):
    """What the agent produced for one iteration of one case."""

    model_config = _FROZEN

    output: str
    structured: Any = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Field(default_factory=Usage)
    cost: float = 0.0
    #: seconds spent in model calls (provider latency); equals duration for other agents
    latency: float = 0.0
    #: wall seconds of the whole agent step
    duration: float = 0.0
    model: str | None = None
    #: what happened, in order (user message, model turns, tool calls, state, answer)
    trace: tuple[TraceEvent, ...] = ()
    #: the case's state at the end (scopes -> keys -> values)
    state: dict[str, Any] = Field(default_factory=dict)
    #: "terminated" when a limit (the step limit) ended the case before an answer
    ending: Literal["completed", "terminated"] = "completed"
    #: why it was terminated, or what ended a conversation early
    note: str = ""
    #: what the way it ended means for passing: the judge decides ("judged"), or a
    #: conversation's limit says "pass" or "fail" whatever the judge says
    verdict: Literal["judged", "pass", "fail"] = "judged"


class MemberVerdict(BaseModel):
    """One judge panel member's verdict on one criterion of one iteration."""

    model_config = _FROZEN

    #: the member's model name, as ``judge:`` gives it
    model: str
    score: float
    passed: bool
    reasoning: str


class Verdict(BaseModel):
    """One criterion's score for one iteration."""

    model_config = _FROZEN

    criterion_id: str
    kind: Literal["check", "llm"]
    score: float
    passed: bool
    weight: float
    required: bool
    reasoning: str
    #: a criterion judged on every turn: the turns (from 1) where it failed
    failed_turns: tuple[int, ...] = ()
    #: judged by a panel: each member's verdict, in the panel's order (the score above is
    #: their mean, the pass their majority); () for a single judge and for checks
    members: tuple[MemberVerdict, ...] = ()


class IterationResult(BaseModel):
    """One iteration of one case, judged or errored."""

    model_config = _FROZEN

    case_id: str
    iteration: int
    status: Status
    score: float | None
    passed: bool | None
    error: str | None = None
    input: Any = None
    output: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    #: provider latency of the agent's model calls (wall time for other agents)
    latency: float = 0.0
    agent_cost: float = 0.0
    judge_cost: float = 0.0
    #: the agent's tokens
    input_tokens: int = 0
    output_tokens: int = 0
    started_at: str = ""
    finished_at: str = ""
    verdicts: tuple[Verdict, ...] = ()
    trace: tuple[TraceEvent, ...] = ()
    state: dict[str, Any] = Field(default_factory=dict)


class CaseStats(BaseModel):
    """A case over its iterations."""

    model_config = _FROZEN

    case_id: str
    name: str
    iterations: int
    errors: int
    #: over the judged iterations' scores
    stats: Stats
    #: share of judged iterations that passed (None when none was judged)
    pass_rate: float | None
    status: Status
    #: iterations a limit ended before they were judged
    terminated: int = 0
    #: user turns per iteration (a conversation's length; 1 for a single exchange)
    turns: Stats | None = None
    #: the iteration of the representative run (see ``representative``)
    representative_iteration: int | None = None
    #: where the case's iterations are read from, when asked (the store, for a stored run)
    _source: ResultSource | None = PrivateAttr(None)

    @property
    def mean(self) -> float | None:
        return self.stats.mean

    @cached_property
    def representative(self) -> IterationResult | None:
        """The judged iteration closest to the mean (the representative run); for a case
        that ended by a limit, its first such iteration. Read when asked: a run of
        100,000 cases does not hold 100,000 results (and their traces) in memory."""
        if self.representative_iteration is None or self._source is None:
            return None
        return next((r for r in self._source.of(self.case_id)
                     if r.iteration == self.representative_iteration), None)


class RoleUsage(BaseModel):
    """Tokens and cost of one role's calls (agent or judge)."""

    model_config = _FROZEN

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cost_estimated: bool = False
    #: calls answered from the response cache (free, and no new sample of the model)
    cache_hits: int = 0
    #: attempts charged and then asked again (an answer that could not be used, billed):
    #: in ``cost`` and the tokens, not in ``calls`` (each call counts once)
    retried_charged: int = 0


class SuiteStats(BaseModel):
    """The whole suite."""

    model_config = _FROZEN

    cases: int
    passed: int
    failed: int
    #: cases with no judged iteration
    errored: int
    iterations: int
    #: errored iterations
    errors: int
    #: mean of case means, with the t interval across cases
    score: Stats
    #: passed cases / cases with a judged iteration
    pass_rate: float | None
    latency_p50: float | None
    latency_p90: float | None
    latency_p99: float | None
    #: seconds of every iteration's latency, summed
    latency_total: float = 0.0
    usage: dict[str, RoleUsage] = Field(default_factory=dict)
    #: iterations a limit ended (never averaged, never errors)
    terminated: int = 0
    #: cases every iteration of which a limit ended (neither passed, failed nor errored)
    terminated_cases: int = 0

    @property
    def cases_line(self) -> str:
        """"7: 2 passed, 4 failed, 0 errored, 1 terminated": every case counted once."""
        ended = f", {self.terminated_cases} terminated" if self.terminated_cases else ""
        return (f"{self.cases}: {self.passed} passed, {self.failed} failed, "
                f"{self.errored} errored{ended}")

    @property
    def cost(self) -> float:
        return sum(u.cost for u in self.usage.values())

    @property
    def cost_estimated(self) -> bool:
        return any(u.cost_estimated for u in self.usage.values())

    @property
    def cache_hits(self) -> int:
        return sum(u.cache_hits for u in self.usage.values())

    @property
    def retried_charged(self) -> int:
        """Attempts charged and asked again, every role's (in the cost, not the calls)."""
        return sum(u.retried_charged for u in self.usage.values())

    def role(self, name: str) -> RoleUsage:
        return self.usage.get(name, RoleUsage())


class WithPeople(Struct, frozen=True):
    """A judge's (or a panel member's) agreement with people's labels on one criterion."""

    labels: int
    kappa: float | None = None
    kappa_ci: tuple[float, float] | None = None
    #: judge minus person, in points
    bias: float | None = None


class MemberFigure(Struct, frozen=True):
    """One panel member on one criterion of a run."""

    model: str
    #: its mean score over the run's judged iterations
    mean: float | None
    #: its agreement with people (labels of every run of this judge), None without labels
    people: WithPeople | None = None


class PanelFigure(Struct, frozen=True):
    """How a judge panel's members agreed on one LLM criterion of a run: Krippendorff's
    alpha over the members (interval metric on the 0-100 scores), with its 95% interval,
    each member's mean and, where people labelled outputs, each one's and the panel's
    agreement with them."""

    criterion: str
    #: iterations the members scored
    outputs: int
    alpha: float | None
    alpha_ci: tuple[float, float] | None
    members: tuple[MemberFigure, ...]
    #: the panel's own (its mean and majority) agreement with people
    people: WithPeople | None = None


class ResultSource(Protocol):
    """Where a run's iteration results are read from: the store (a stored run) or a list."""

    def of(self, case_id: str) -> list[IterationResult]:
        """The iterations of one case, in order."""

    def criterion_means(self) -> dict[str, float]:
        """Criterion id -> mean score over every verdict of the run."""


class RunResult(Struct, frozen=True, eq=False):
    """A finished (or stopped) run, as reports and the loop read it.

    The figures (suite and per-case statistics) are in memory; the iteration results
    are read from ``source`` when asked (a stored run: a hundred cases a read), so that a run of any size
    costs memory for its figures only."""

    run_id: str
    status: str
    threshold: float
    #: case id -> its statistics, in the order the cases were given (built when read)
    cases: Mapping[str, CaseStats]
    suite: SuiteStats
    source: ResultSource
    prompt_id: str | None = None
    version: str | None = None
    agent_model: str | None = None
    judge_model: str | None = None
    judge_version: str | None = None
    #: results came from the offline (or scripted) model: every report says so
    offline: bool = False
    started_at: str = ""
    finished_at: str = ""
    #: case id -> its TestCase data for reports (name, description, tags, expected)
    case_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: why the run stopped early (budget reached, --stop-on-first-failure), if it did
    stop_reason: str | None = None
    #: case id -> mean score, for the cases that were judged (the loop pairs these)
    case_means: dict[str, float] = field(default_factory=dict)
    #: the judge's agreement with people, or that it has none (cycle.judge.calibration.judge_line);
    #: None when no LLM criterion ran or nobody asked
    judge_note: str | None = None
    #: judged by a panel: how its members agreed, per LLM criterion (cycle.judge.panel);
    #: () for a single judge or when nobody asked
    panel: tuple[PanelFigure, ...] = ()

    @property
    def score(self) -> float | None:
        return self.suite.score.mean

    def __repr__(self) -> str:
        # short: a pytest assertion on a run shows this, not every result's trace
        s = self.suite
        score = "-" if self.score is None else f"{self.score:.1f}"
        return (f"RunResult({self.run_id!r}, score={score}, {s.passed} passed, {s.failed} "
                f"failed, {s.errored} errored)")

    def results_of(self, case_id: str) -> list[IterationResult]:
        """The iterations of ``case_id`` (none: an empty list)."""
        return self.source.of(case_id)

    def iter_results(self) -> Iterator[IterationResult]:
        """Every iteration, case by case: read as it goes, never all at once."""
        for case_id in self.cases:
            yield from self.source.of(case_id)

    @property
    def results(self) -> list[IterationResult]:
        """Every iteration in one list: for small runs and tests (``iter_results`` streams)."""
        return list(self.iter_results())

    @property
    def exit_code(self) -> int:
        """0 all passed, 1 some failed (or a limit ended them), 3 errors prevented judging
        part of the run."""
        if self.suite.errors:
            return 3
        if self.suite.failed or self.suite.terminated:
            return 1
        return 0

    def summary(self) -> dict[str, Any]:
        """The figures stored with the run (runs.summary) and printed by --json."""
        s = self.suite
        return {
            "score": s.score.mean,
            "ci_low": s.score.ci_low,
            "ci_high": s.score.ci_high,
            "pass_rate": s.pass_rate,
            "cases": s.cases,
            "passed": s.passed,
            "failed": s.failed,
            "errored": s.errored,
            "iterations": s.iterations,
            "errors": s.errors,
            "terminated": s.terminated,
            "terminated_cases": s.terminated_cases,
            "latency_p50": s.latency_p50,
            "latency_p90": s.latency_p90,
            "latency_p99": s.latency_p99,
            "cost": s.cost,
            "cost_estimated": s.cost_estimated,
            "usage": {k: v.model_dump() for k, v in s.usage.items()},
            "offline": self.offline,
            "stop_reason": self.stop_reason,
        }
