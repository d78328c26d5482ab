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
from typing import Any

from cycle.evals.stats import EMPTY, closest_to_mean, describe, percentile
from cycle.records import CaseStats, IterationResult, RoleUsage, RunResult, SuiteStats
from cycle.store.runs import RunLog


def case_stats(case_id: str, name: str, results: list[IterationResult]) -> CaseStats:
    turn_counts = [sum(1 for e in r.trace if e.kind == "user") for r in results if r.trace]
    turns = describe(turn_counts) if any(n > 1 for n in turn_counts) else None
    judged = [r for r in results if r.status in ("passed", "failed")]
    errors = sum(1 for r in results if r.status == "error")
    ended = [r for r in results if r.status == "terminated"]
    scores = [r.score for r in judged if r.score is not None]
    stats = describe(scores) if scores else EMPTY
    if not judged:
        # no score: the case ended by a limit (its transcript shows where) or in errors
        return CaseStats(case_id=case_id, name=name, iterations=len(results), errors=errors,
                         stats=stats, pass_rate=None, representative=ended[0] if ended else None,
                         status="terminated" if ended else "error", terminated=len(ended),
                         turns=turns)
    passes = sum(1 for r in judged if r.passed)
    rate = passes / len(judged)
    assert stats.mean is not None
    rep = judged[closest_to_mean(scores, stats.mean)]
    return CaseStats(case_id=case_id, name=name, iterations=len(results), errors=errors,
                     stats=stats, pass_rate=rate, representative=rep,
                     status="passed" if rate >= 0.5 else "failed", terminated=len(ended),
                     turns=turns)


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
        terminated=sum(1 for r in ordered if r.status == "terminated"),
    )
    return RunResult(run_id=run_id, status=status, threshold=threshold, cases=cases, suite=suite,
                     results=ordered, case_info=info, **meta)


def load_run(log: RunLog, run_id: str, *, case_info: dict[str, dict[str, Any]] | None = None
             ) -> RunResult:
    """Rebuild a stored run's RunResult (for reports, compare and the loop)."""
    row = log.require(run_id)
    threshold = float(row.config.get("pass_threshold", 70.0))
    info = case_info if case_info is not None else row.config.get("case_info", {})
    return build_run_result(
        run_id=run_id, status=row.status, threshold=threshold,
        results=log.load_results(run_id), usage=log.usage_by_role(run_id), case_info=info,
        prompt_id=row.prompt_id, version=row.version, agent_model=row.agent_model,
        judge_model=row.judge_model, judge_version=row.judge_version, offline=row.offline,
        started_at=row.started_at or "", finished_at=row.finished_at or "",
    )
