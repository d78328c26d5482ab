"""Acceptance rules: does a candidate version replace the incumbent?

Both versions are evaluated on the same cases and iterations, so the
comparison is paired per case (candidate mean minus incumbent mean):

- ``significant`` (default): the 95% interval of the paired per-case
  improvement lies above zero, and no required case that passed now fails.
- ``improved``: the mean paired improvement is above zero, and no required
  case that passed now fails.
- ``always``: the candidate is accepted whatever it scored.

Cases that errored in either run are left out of the pairing (an error is not
a score).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

AcceptanceRule = Literal["significant", "improved", "always"]
RULES: tuple[str, ...] = ("significant", "improved", "always")


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
    from cycle.evals.stats import paired_difference

    common = sorted(set(incumbent.case_scores) & set(candidate.case_scores))
    if rule == "always":
        delta = None
        low = high = None
        if common:
            stats = paired_difference(incumbent.case_scores, candidate.case_scores)
            delta, low, high = _finite(stats.mean), _finite(stats.ci_low), _finite(stats.ci_high)
        return AcceptanceDecision(True, "accepted: the acceptance rule is 'always'", delta, low, high)
    if not common:
        return AcceptanceDecision(
            False,
            f"rejected: no case has a score in both runs (candidate errors: {candidate.errors})",
        )
    stats = paired_difference(incumbent.case_scores, candidate.case_scores)
    delta, low, high = _finite(stats.mean), _finite(stats.ci_low), _finite(stats.ci_high)
    evidence = f"paired improvement {_fmt(delta)} over {len(common)} cases, 95% CI [{_fmt(low)}, {_fmt(high)}]"
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
        if low is None:
            return AcceptanceDecision(
                False,
                f"rejected: too few paired cases for an interval ({evidence}); "
                "use acceptance: improved for suites this small",
                delta, low, high,
            )
        ok = low > 0
        verdict = (
            "accepted: the improvement is significant" if ok
            else "rejected: the improvement is not significant (the interval reaches zero or below)"
        )
        return AcceptanceDecision(ok, f"{verdict} ({evidence})", delta, low, high)
    raise ValueError(f"unknown acceptance rule {rule!r}; known: {', '.join(RULES)}")
