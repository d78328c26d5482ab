"""What a run produced: per-iteration results, per-case and per-suite statistics.

Errors are kept apart from failures in every figure: an errored iteration
counts in ``errors`` and is never averaged in as a score. A case whose every
iteration errored has no score and counts as errored, not failed.

A case **passes** when at least half of its judged iterations passed (each
iteration passes at the threshold and only if every required criterion
passed). The suite's score is the mean of the case means, with its 95% t
interval across cases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from cycle.evals.stats import EMPTY, Stats, closest_to_mean, describe, percentile
from cycle.judge import Verdict
from cycle.llm.base import ToolCall

Status = Literal["passed", "failed", "error"]


@dataclass(frozen=True)
class IterationResult:
    """One iteration of one case, judged or errored."""

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


@dataclass(frozen=True)
class CaseStats:
    """A case over its iterations."""

    case_id: str
    name: str
    iterations: int
    errors: int
    #: over the judged iterations' scores
    stats: Stats
    #: share of judged iterations that passed (None when none was judged)
    pass_rate: float | None
    #: the judged iteration closest to the mean (the representative run)
    representative: IterationResult | None
    status: Status

    @property
    def mean(self) -> float | None:
        return self.stats.mean


@dataclass(frozen=True)
class RoleUsage:
    """Tokens and cost of one role's calls (agent or judge)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cost_estimated: bool = False
    #: calls answered from the response cache (free, and no new sample of the model)
    cache_hits: int = 0


@dataclass(frozen=True)
class SuiteStats:
    """The whole suite."""

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
    usage: dict[str, RoleUsage] = field(default_factory=dict)

    @property
    def cost(self) -> float:
        return sum(u.cost for u in self.usage.values())

    @property
    def cost_estimated(self) -> bool:
        return any(u.cost_estimated for u in self.usage.values())

    @property
    def cache_hits(self) -> int:
        return sum(u.cache_hits for u in self.usage.values())

    def role(self, name: str) -> RoleUsage:
        return self.usage.get(name, RoleUsage())


@dataclass(frozen=True)
class RunResult:
    """A finished (or stopped) run, as reports and the loop read it."""

    run_id: str
    status: str
    threshold: float
    cases: dict[str, CaseStats]
    suite: SuiteStats
    results: list[IterationResult]
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

    @property
    def score(self) -> float | None:
        return self.suite.score.mean

    @property
    def case_means(self) -> dict[str, float]:
        """Case id -> mean score, for the cases that were judged (the loop pairs these)."""
        return {k: c.stats.mean for k, c in self.cases.items() if c.stats.mean is not None}

    @property
    def exit_code(self) -> int:
        """0 all passed, 1 some failed, 3 errors prevented judging part of the run."""
        if self.suite.errors:
            return 3
        if self.suite.failed:
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
            "latency_p50": s.latency_p50,
            "latency_p90": s.latency_p90,
            "latency_p99": s.latency_p99,
            "cost": s.cost,
            "cost_estimated": s.cost_estimated,
            "usage": {k: vars(v) for k, v in s.usage.items()},
            "offline": self.offline,
            "stop_reason": self.stop_reason,
        }


def case_stats(case_id: str, name: str, results: list[IterationResult]) -> CaseStats:
    judged = [r for r in results if r.status != "error"]
    errors = len(results) - len(judged)
    scores = [r.score for r in judged if r.score is not None]
    stats = describe(scores) if scores else EMPTY
    if not judged:
        return CaseStats(case_id, name, len(results), errors, stats, None, None, "error")
    passes = sum(1 for r in judged if r.passed)
    rate = passes / len(judged)
    assert stats.mean is not None
    rep = judged[closest_to_mean(scores, stats.mean)]
    return CaseStats(case_id, name, len(results), errors, stats, rate, rep,
                     "passed" if rate >= 0.5 else "failed")


def build_run_result(
    *,
    run_id: str,
    status: str,
    threshold: float,
    results: Iterable[IterationResult],
    usage: Mapping[str, RoleUsage] | None = None,
    case_info: Mapping[str, Mapping[str, Any]] | None = None,
    **meta: Any,
) -> RunResult:
    """Aggregate iteration results into case and suite statistics."""
    ordered = sorted(results, key=lambda r: (r.case_id, r.iteration))
    info = {k: dict(v) for k, v in (case_info or {}).items()}
    by_case: dict[str, list[IterationResult]] = {}
    for r in ordered:
        by_case.setdefault(r.case_id, []).append(r)
    # keep the order the cases were given in, when known
    order = [k for k in info if k in by_case] + [k for k in by_case if k not in info]
    cases = {
        k: case_stats(k, str(info.get(k, {}).get("name") or k), by_case[k]) for k in order
    }
    means = [c.stats.mean for c in cases.values() if c.stats.mean is not None]
    latencies = [r.latency for r in ordered if r.status != "error" or r.output]
    passed = sum(1 for c in cases.values() if c.status == "passed")
    failed = sum(1 for c in cases.values() if c.status == "failed")
    errored = sum(1 for c in cases.values() if c.status == "error")
    suite = SuiteStats(
        cases=len(cases), passed=passed, failed=failed, errored=errored,
        iterations=len(ordered), errors=sum(1 for r in ordered if r.status == "error"),
        score=describe(means), pass_rate=(passed / (passed + failed)) if passed + failed else None,
        latency_p50=percentile(latencies, 50), latency_p90=percentile(latencies, 90),
        latency_p99=percentile(latencies, 99), usage=dict(usage or {}),
    )
    return RunResult(run_id=run_id, status=status, threshold=threshold, cases=cases, suite=suite,
                     results=ordered, case_info=info, **meta)
