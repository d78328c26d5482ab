"""Acceptance rules: does a candidate version replace the incumbent?

Both versions are evaluated on the same cases and iterations, so the
comparison is paired per case (candidate mean minus incumbent mean):

- ``significant`` (default): the 95% interval of the paired per-case
  improvement lies above zero, and no required case that passed now fails.
- ``improved``: the mean paired improvement is above zero, and no required
  case that passed now fails.
- ``always``: the candidate is accepted whatever it scored.

A case that only errored in one version counts against that version: it is
paired as 0 there (a candidate cannot win by erroring on the cases it would
lose). A case that errored in both is left out.

Two guards keep ``significant`` honest on small or noiseless suites: the
paired standard deviation is floored at ``MIN_SD`` points (identical
differences, as a deterministic model gives, would otherwise make a zero-width
interval "significant"), and fewer than ``MIN_CASES`` paired cases is too few
to test at all: the decision says so and how to fix it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cycle.records import Stats

AcceptanceRule = Literal["significant", "improved", "always"]
RULES: tuple[str, ...] = ("significant", "improved", "always")

#: the paired standard deviation is at least this (points of score): differences below a
#: judge's resolution on one case are not evidence, however alike across cases
MIN_SD = 1.0
#: fewer paired cases than this cannot show a significant difference worth trusting
MIN_CASES = 3


@dataclass(frozen=True)
class Evaluation:
    """What the loop keeps of one evaluated version (one run)."""

    run_id: str
    version: str
    score: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    pass_rate: float | None = None
    #: case id -> mean score over its iterations (cases that only errored are absent)
    case_scores: dict[str, float] = field(default_factory=dict)
    #: case id -> whether the case passed (most of its iterations passed)
    case_passed: dict[str, bool] = field(default_factory=dict)
    #: cases run whose every iteration errored (no score): they count against this version
    errored_cases: frozenset[str] = frozenset()
    errors: int = 0
    cost: float = 0.0


@dataclass(frozen=True)
class AcceptanceDecision:
    """The verdict on a candidate, with the evidence shown to the user and the improver."""

    accepted: bool
    reason: str
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    #: required cases that passed with the incumbent and fail with the candidate
    regressions: tuple[str, ...] = ()


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f}"


def decide(
    rule: AcceptanceRule,
    incumbent: Evaluation,
    candidate: Evaluation,
    *,
    required: set[str] | frozenset[str] = frozenset(),
) -> AcceptanceDecision:
    """Apply ``rule`` to the paired per-case scores of the two evaluations."""
    before, after = paired_scores(incumbent, candidate)
    common = sorted(before)
    if rule == "always":
        delta = None
        low = high = None
        if common:
            stats = floored_difference(before, after)
            delta, low, high = _finite(stats.mean), _finite(stats.ci_low), _finite(stats.ci_high)
        return AcceptanceDecision(True, "accepted: the acceptance rule is 'always'", delta, low, high)
    if not common:
        return AcceptanceDecision(
            False,
            f"rejected: no case has a score in either run (candidate errors: {candidate.errors})",
        )
    stats = floored_difference(before, after)
    delta, low, high = _finite(stats.mean), _finite(stats.ci_low), _finite(stats.ci_high)
    charged = sorted(candidate.errored_cases & set(common))
    errors = f"; {len(charged)} case(s) that errored counted as 0" if charged else ""
    evidence = (f"paired improvement {_fmt(delta)} over {len(common)} cases, "
                f"95% CI [{_fmt(low)}, {_fmt(high)}]{errors}")
    regressions = tuple(
        sorted(
            c for c in required
            if incumbent.case_passed.get(c) is True and candidate.case_passed.get(c) is False
        )
    )
    if regressions:
        return AcceptanceDecision(
            False,
            f"rejected: required case(s) {', '.join(regressions)} passed before and fail now ({evidence})",
            delta, low, high, regressions,
        )
    if rule == "improved":
        ok = delta is not None and delta > 0
        verdict = "accepted: the mean improved" if ok else "rejected: the mean did not improve"
        return AcceptanceDecision(ok, f"{verdict} ({evidence})", delta, low, high)
    if rule == "significant":
        if low is None or len(common) < MIN_CASES:
            return AcceptanceDecision(
                False,
                f"rejected: {len(common)} paired case(s) are too few to test (at least "
                f"{MIN_CASES}; {evidence}): add cases, or set improve.acceptance: improved",
                delta, low, high,
            )
        ok = low > 0
        verdict = (
            "accepted: the improvement is significant" if ok
            else "rejected: the improvement is not significant (the interval reaches zero or below)"
        )
        return AcceptanceDecision(ok, f"{verdict} ({evidence})", delta, low, high)
    raise ValueError(f"unknown acceptance rule {rule!r}; known: {', '.join(RULES)}")


def paired_scores(incumbent: Evaluation, candidate: Evaluation
                  ) -> tuple[dict[str, float], dict[str, float]]:
    """Per-case scores of both versions over the cases either scored; a case that only
    errored in one version is 0 there (its errors count against it)."""
    ran_in_both = ((set(incumbent.case_scores) | incumbent.errored_cases)
                   & (set(candidate.case_scores) | candidate.errored_cases))
    ids = ran_in_both - (incumbent.errored_cases & candidate.errored_cases)
    return ({k: incumbent.case_scores.get(k, 0.0) for k in ids},
            {k: candidate.case_scores.get(k, 0.0) for k in ids})


def floored_difference(before: dict[str, float], after: dict[str, float]) -> Stats:
    """The paired difference ``after - before`` with its interval, the standard
    deviation floored at MIN_SD (and an interval even for identical differences)."""
    from cycle.evals.stats import describe, t_critical

    stats = describe([after[k] - before[k] for k in before])
    if stats.n < 2 or stats.mean is None:
        return stats
    sd = max(stats.sd or 0.0, MIN_SD)
    half = t_critical(stats.n - 1) * sd / math.sqrt(stats.n)
    return stats.model_copy(update={"sd": sd, "ci_low": stats.mean - half,
                                    "ci_high": stats.mean + half})


def detectable_gain(result_sds: list[float], cases: int, iterations: int) -> float | None:
    """The smallest true gain a paired comparison of two evaluations of this suite finds
    80% of the time at the 95% level: from the within-case spread of the baseline's
    iterations (each version's case mean has variance sd^2 / iterations)."""
    from cycle.evals.stats import t_80, t_critical

    if cases < 2:
        return None
    within = math.sqrt(sum(sd * sd for sd in result_sds) / len(result_sds)) if result_sds else 0.0
    sd_diff = max(math.sqrt(2.0 / max(iterations, 1)) * within, MIN_SD)
    return (t_critical(cases - 1) + t_80(cases - 1)) * sd_diff / math.sqrt(cases)
