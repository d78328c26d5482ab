"""What a run produced: per-iteration results, per-case and per-suite statistics.

Errors are kept apart from failures in every figure: an errored iteration
counts in ``errors`` and is never averaged in as a score. A case whose every
iteration errored has no score and counts as errored, not failed.

A case **passes** when at least half of its judged iterations passed (each
iteration passes at the threshold and only if every required criterion
passed). The suite's score is the mean of the case means, with its 95% t
interval across cases.

The figures are built from a ``Tally`` per iteration (a few numbers): the runner keeps
one as each result is written to the store, and ``load_run`` reads them back with one
query. The results themselves (outputs, verdicts, traces) stay in the store and are read
a case at a time when a report or the loop asks (``RunResult.results_of``), so a run of
100,000 cases holds its figures in memory, not its results.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from cycle.records import CaseStats, IterationResult, RoleUsage, RunResult, SuiteStats
from cycle.stats import EMPTY, SCORE_SCALE, closest_to_mean, describe, percentile
from cycle.store.runs import RunLog, StoredResults


class Tally(Struct, frozen=True):
    """What the figures need of one iteration: not its output, verdicts or trace."""

    iteration: int
    status: str
    score: float | None
    passed: bool | None
    latency: float
    #: its latency counts in the percentiles (judged, or an error after an answer)
    answered: bool
    #: user turns in its trace (0: no trace)
    turns: int

    @classmethod
    def of(cls, r: IterationResult) -> Tally:
        return cls(r.iteration, r.status, r.score, r.passed, r.latency,
                   r.status != "error" or bool(r.output),
                   sum(1 for e in r.trace if e.kind == "user"))


def case_stats(case_id: str, name: str, tallies: list[Tally]) -> CaseStats:
    """One case's statistics over its iterations (in order)."""
    turn_counts = [t.turns for t in tallies if t.turns]
    turns = describe(turn_counts) if any(n > 1 for n in turn_counts) else None
    judged = [t for t in tallies if t.status in ("passed", "failed")]
    errors = sum(1 for t in tallies if t.status == "error")
    ended = [t for t in tallies if t.status == "terminated"]
    scored = [t for t in judged if t.score is not None]
    scores = [t.score for t in scored]
    stats = describe(scores, scale=SCORE_SCALE) if scores else EMPTY
    if not judged:
        # no score: the case ended by a limit (its transcript shows where) or in errors
        return CaseStats(case_id=case_id, name=name, iterations=len(tallies), errors=errors,
                         stats=stats, pass_rate=None,
                         representative_iteration=ended[0].iteration if ended else None,
                         status="terminated" if ended else "error", terminated=len(ended),
                         turns=turns)
    rate = sum(1 for t in judged if t.passed) / len(judged)
    rep = scored[closest_to_mean(scores, stats.mean)].iteration \
        if scored and stats.mean is not None else None
    return CaseStats(case_id=case_id, name=name, iterations=len(tallies), errors=errors,
                     stats=stats, pass_rate=rate, representative_iteration=rep,
                     status="passed" if rate >= 0.5 else "failed", terminated=len(ended),
                     turns=turns)


class CaseTable(Mapping[str, CaseStats]):
    """Case id -> CaseStats, built when read from the cases' tallies (a run of 100,000
    cases keeps 100,000 small lists, not 100,000 models); the representative iteration
    of each is read from the source when asked."""

    def __init__(self, tallies: Mapping[str, list[Tally]], info: Mapping[str, Mapping[str, Any]],
                 source: Any) -> None:
        self._tallies = tallies
        self._info = info
        self._source = source

    def __getitem__(self, case_id: str) -> CaseStats:
        tallies = self._tallies.get(case_id)
        if tallies is None:
            # a bare KeyError: 'refund' in a gate's test says nothing of the ids there are
            known = list(itertools.islice(self._tallies, 10))
            more = ", ..." if len(self._tallies) > len(known) else ""
            raise KeyError(f"no case {case_id!r} in this run; its cases: "
                           f"{', '.join(known) or 'none'}{more}")
        stats = case_stats(case_id, str(self._info.get(case_id, {}).get("name") or case_id),
                           tallies)
        stats._source = self._source
        return stats

    def __iter__(self) -> Iterator[str]:
        return iter(self._tallies)

    def reading(self, source: Any) -> CaseTable:
        """The same cases, their results read from ``source``."""
        return CaseTable(self._tallies, self._info, source)

    def __len__(self) -> int:
        return len(self._tallies)


class MemoryResults:
    """A run's results held in a list (a run without a store, and tests)."""

    def __init__(self, results: Iterable[IterationResult]) -> None:
        self.by_case: dict[str, list[IterationResult]] = {}
        for r in sorted(results, key=lambda r: (r.case_id, r.iteration)):
            self.by_case.setdefault(r.case_id, []).append(r)

    def of(self, case_id: str) -> list[IterationResult]:
        return self.by_case.get(case_id, [])

    def tallies(self) -> dict[str, list[Tally]]:
        return {k: [Tally.of(r) for r in rs] for k, rs in self.by_case.items()}

    def criterion_means(self) -> dict[str, float]:
        scores: dict[str, list[float]] = {}
        for rs in self.by_case.values():
            for r in rs:
                for v in r.verdicts:
                    scores.setdefault(v.criterion_id, []).append(v.score)
        return {k: sum(v) / len(v) for k, v in scores.items()}


def summarize(
    *,
    run_id: str,
    status: str,
    threshold: float,
    tallies: Mapping[str, list[Tally]],
    source: Any,
    usage: Mapping[str, RoleUsage] | None = None,
    case_info: Mapping[str, Mapping[str, Any]] | None = None,
    **meta: Any,
) -> RunResult:
    """The run's figures from its iterations' tallies (case id -> tallies)."""
    info = {k: dict(v) for k, v in (case_info or {}).items()}
    # keep the order the cases were given in, when known
    order = [k for k in info if k in tallies] + [k for k in tallies if k not in info]
    if isinstance(source, StoredResults):
        source.follow(order)  # reports ask for the cases in this order: read ahead in it
    by_case = {k: sorted(tallies[k], key=lambda t: t.iteration) for k in order}
    cases = CaseTable(by_case, info, source)
    means: dict[str, float] = {}
    passed = failed = errored = iterations = errors = terminated = terminated_cases = 0
    latencies: list[float] = []
    total = 0.0
    for k, ts in by_case.items():
        c = case_stats(k, k, ts)
        if c.stats.mean is not None:
            means[k] = c.stats.mean
        passed += c.status == "passed"
        failed += c.status == "failed"
        errored += c.status == "error"
        terminated_cases += c.status == "terminated"
        iterations += len(ts)
        errors += c.errors
        terminated += c.terminated
        latencies.extend(t.latency for t in ts if t.answered)
        total += sum(t.latency for t in ts)
    latencies.sort()
    suite = SuiteStats(
        cases=len(by_case), passed=passed, failed=failed, errored=errored,
        iterations=iterations, errors=errors, score=describe(list(means.values()), scale=SCORE_SCALE),
        pass_rate=(passed / (passed + failed)) if passed + failed else None,
        latency_p50=percentile(latencies, 50), latency_p90=percentile(latencies, 90),
        latency_p99=percentile(latencies, 99), latency_total=total, usage=dict(usage or {}),
        terminated=terminated, terminated_cases=terminated_cases,
    )
    return RunResult(run_id=run_id, status=status, threshold=threshold, cases=cases,
                     suite=suite, source=source, case_info=info, case_means=means, **meta)


def build_run_result(*, results: Iterable[IterationResult], **kwargs: Any) -> RunResult:
    """Aggregate iteration results held in memory (see ``summarize`` for the rest)."""
    source = MemoryResults(results)
    return summarize(tallies=source.tallies(), source=source, **kwargs)


def detached(result: RunResult) -> RunResult:
    """The run with every result read into memory, to use once its store is closed (a
    pytest session, a script): for small runs; a large one is read from its store."""
    source = MemoryResults(result.iter_results())
    cases = result.cases
    assert isinstance(cases, CaseTable)
    return replace(result, source=source, cases=cases.reading(source))


def stored_tallies(log: RunLog, run_id: str) -> dict[str, list[Tally]]:
    """Case id -> the tallies of a stored run's iterations (one query, no traces parsed)."""
    out: dict[str, list[Tally]] = {}
    for case_id, *row in log.tally_rows(run_id):
        out.setdefault(case_id, []).append(Tally(*row))
    return out


def load_run(log: RunLog, run_id: str, *, case_info: dict[str, dict[str, Any]] | None = None
             ) -> RunResult:
    """A stored run's RunResult (for reports, compare and the loop): its figures in
    memory, its results read from the store when asked."""
    row = log.require(run_id)
    threshold = float(row.config.get("pass_threshold", 70.0))
    info = case_info if case_info is not None else row.config.get("case_info", {})
    return summarize(
        run_id=run_id, status=row.status, threshold=threshold,
        tallies=stored_tallies(log, run_id), source=StoredResults(log, run_id),
        usage=log.usage_by_role(run_id), case_info=info,
        prompt_id=row.prompt_id, version=row.version, agent_model=row.agent_model,
        judge_model=row.judge_model, judge_version=row.judge_version, offline=row.offline,
        started_at=row.started_at or "", finished_at=row.finished_at or "",
    )
