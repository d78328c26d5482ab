"""Acceptance rules: does a candidate version replace the incumbent?

Both versions are evaluated on the same cases and iterations, so the
comparison is paired per case (candidate mean minus incumbent mean):

- ``significant`` (default): the one-sided lower confidence bound of the paired
  per-case improvement lies above zero, and no required case that passed now fails.
- ``improved``: the mean paired improvement is above zero, and no required
  case that passed now fails.
- ``always``: the candidate is accepted whatever it scored.

The level is the caller's: a cycle explores at ``EXPLORE_ALPHA`` (one-sided
10%: a likely gain is kept to build on) and moves ``head`` only after a
confirmation on fresh samples at ``CONFIRM_ALPHA`` (one-sided 2.5%, the level of
the usual two-sided 95% interval), split over at most ``CONFIRM_LOOKS`` looks
(Bonferroni) when it runs more iterations on an inconclusive comparison. See
``cycle.loop.core`` for why that bounds a whole cycle's false promotions.

Held-out cases (``held_out``: cases the improver never saw) are reported apart
from the seen ones, and a candidate whose held-out cases got worse on average is
rejected: an edit that helps the cases shown to the improver by hurting the others
is overfitting, whatever the overall mean says.

A case that only errored in one version counts against that version: it is
paired as 0 there (a candidate cannot win by erroring on the cases it would
lose). A case that errored in both is left out.

Pairwise criteria (``pairwise: true``, cycle.loop.preference). A criterion whose scores
drift with the judge's mood may decide by direct comparison instead: each case's outputs
of both versions are judged against each other in both orders, a preference that follows
the position counts as a tie, and a one-sided exact sign test over the cases (a case
prefers the version most of its pairs prefer) must reach the same level ``alpha``
(``improved``: more cases prefer the candidate than the incumbent). Such a criterion
leaves the difference of scores: the paired test above runs on the weighted mean of the
other criteria. With both kinds, each test must pass (an intersection-union test: its
error rate is the level of each test, with no correction). With pairwise criteria only,
the pairwise tests alone decide; a required case that passed and fails now still
refuses the candidate, and the held-out split is not tested (no scores decide).

Two guards keep ``significant`` honest on small or noiseless suites: the
paired standard deviation is floored at ``MIN_SD`` points (identical
differences, as a deterministic model gives, would otherwise make a zero-width
interval "significant"), and fewer than ``MIN_CASES`` paired cases is too few
to test at all: the decision says so and how to fix it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import msgspec
from msgspec import Struct, field

if TYPE_CHECKING:
    from cycle.records import Stats

AcceptanceRule = Literal["significant", "improved", "always"]
RULES: tuple[str, ...] = ("significant", "improved", "always")

#: the paired standard deviation is at least this (points of score): differences below a
#: judge's resolution on one case are not evidence, however alike across cases
MIN_SD = 1.0
#: fewer paired cases than this cannot show a significant difference worth trusting
MIN_CASES = 3
#: one-sided error rate of a round's decision while exploring (head does not move)
EXPLORE_ALPHA = 0.10
#: one-sided error rate of the confirmation that moves head, over all its looks
CONFIRM_ALPHA = 0.025
#: looks the confirmation may take (the second after more iterations), each at alpha/looks
CONFIRM_LOOKS = 2


class Evaluation(Struct, frozen=True):
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
    #: case id -> mean agent cost per iteration (cycle.loop.cost); filled only when the
    #: cycle's objective is cost
    case_costs: dict[str, float] = field(default_factory=dict)


class PairwiseTest(Struct, frozen=True):
    """One pairwise criterion over the cases: how many prefer the candidate (``wins``),
    the incumbent (``losses``) or neither, the share of pairs whose verdict followed the
    position, and the one-sided sign test's p that the candidate is preferred."""

    criterion: str
    wins: int
    losses: int
    ties: int
    #: iteration pairs compared (each judged in both orders)
    pairs: int
    order_flips: float
    p_value: float

    def passes(self, rule: AcceptanceRule, alpha: float) -> bool:
        if rule == "improved":
            return self.wins > self.losses
        return self.wins > self.losses and self.p_value <= alpha

    def line(self) -> str:
        """``tone: 5 wins, 0 losses, 1 tie, 17% order flips, one-sided sign test p 0.031``"""
        return (f"{self.criterion}: {self.wins} wins, {self.losses} losses, "
                f"{self.ties} {'tie' if self.ties == 1 else 'ties'} (cases), "
                f"{self.order_flips:.0%} order flips, one-sided sign test p {self.p_value:.3g}")

    def to_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


class AcceptanceDecision(Struct, frozen=True):
    """The verdict on a candidate, with the evidence shown to the user and the improver."""

    accepted: bool
    reason: str
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    #: required cases that passed with the incumbent and fail with the candidate
    regressions: tuple[str, ...] = ()
    #: the one-sided lower confidence bound of the improvement at the decision's level
    bound: float | None = None
    #: the mean improvement on the cases the improver saw, and on the held-out ones
    seen_delta: float | None = None
    held_out_delta: float | None = None
    #: rejected only because the bound reaches zero while the mean gained: more
    #: iterations could decide it
    inconclusive: bool = False
    #: the reason without its "accepted: " or "rejected: "
    because: str = ""
    #: with the cost objective: the paired mean agent cost per case, candidate minus
    #: incumbent, and the candidate's (cycle.loop.cost)
    cost_delta: float | None = None
    cost: float | None = None
    #: each pairwise criterion's comparison (none: scores alone decided)
    pairwise: tuple[PairwiseTest, ...] = ()


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f}"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def decide(
    rule: AcceptanceRule,
    incumbent: Evaluation,
    candidate: Evaluation,
    *,
    required: set[str] | frozenset[str] = frozenset(),
    held_out: set[str] | frozenset[str] = frozenset(),
    alpha: float = CONFIRM_ALPHA,
    pairwise: Sequence[PairwiseTest] = (),
    absolute: bool = True,
) -> AcceptanceDecision:
    """Apply ``rule`` to the paired per-case scores of the two evaluations; ``alpha`` is
    the one-sided error rate of ``significant`` (2.5%: the 95% interval's lower end).
    ``pairwise``: the pairwise criteria's comparisons, each of which must pass too (the
    evaluations' scores then leave those criteria out); ``absolute``: False when every
    criterion is pairwise (the scores decide nothing but the required cases)."""
    scored = _decide_scores(rule, incumbent, candidate, required=required, held_out=held_out,
                            alpha=alpha)
    if not pairwise or rule == "always":
        return scored
    tests = tuple(pairwise)
    failing = [t for t in tests if not t.passes(rule, alpha)]
    level = f"{alpha:.4g}"
    evidence = "; ".join(t.line() for t in tests)
    # more iterations can decide it when every failing comparison leans to the candidate
    leaning = bool(failing) and all(t.wins > t.losses for t in failing)
    few = [t.criterion for t in failing if t.wins > t.losses and 0.5 ** (t.wins + t.losses) > alpha
           and rule == "significant"]
    short = (f"; {', '.join(few)}: too few cases prefer either version for the sign test to "
             f"reach {level} even if all did (add cases)") if few else ""

    def verdict(ok: bool, because: str, *, inconclusive: bool = False) -> AcceptanceDecision:
        return msgspec.structs.replace(
            scored, accepted=ok, reason=("accepted: " if ok else "rejected: ") + because,
            because=because, inconclusive=inconclusive, pairwise=tests)

    if scored.regressions:
        return verdict(False, f"{scored.because}; pairwise: {evidence}")
    test = "preferred" if rule == "improved" else f"preferred at one-sided {level}"
    if not absolute:
        if failing:
            return verdict(False, f"the judge did not prefer the candidate pairwise "
                                  f"({', '.join(t.criterion for t in failing)} not {test}; "
                                  f"{evidence}){short}", inconclusive=leaning)
        return verdict(True, f"the judge prefers the candidate pairwise ({test}; {evidence})")
    if not scored.accepted:
        return verdict(False, f"{scored.because}; pairwise: {evidence}",
                       inconclusive=scored.inconclusive and (not failing or leaning))
    if failing:
        return verdict(False, f"the scored criteria gained, but the judge did not prefer the "
                              f"candidate pairwise ({', '.join(t.criterion for t in failing)} "
                              f"not {test}; {evidence}){short}; scored: {scored.because}",
                       inconclusive=leaning)
    return verdict(True, f"{scored.because}, and the judge prefers the candidate pairwise "
                         f"({test}; {evidence})")


def _decide_scores(
    rule: AcceptanceRule,
    incumbent: Evaluation,
    candidate: Evaluation,
    *,
    required: set[str] | frozenset[str],
    held_out: set[str] | frozenset[str],
    alpha: float,
) -> AcceptanceDecision:
    """``decide`` on the paired per-case scores alone."""
    common, delta, low, high, bound, seen, unseen = paired_difference(
        incumbent, candidate, alpha=alpha, held_out=held_out)

    def verdict(ok: bool, because: str, *, inconclusive: bool = False,
                regressions: tuple[str, ...] = ()) -> AcceptanceDecision:
        reason = ("accepted: " if ok else "rejected: ") + because
        return AcceptanceDecision(ok, reason, delta, low, high, regressions, bound, seen, unseen,
                                  inconclusive, because)

    if rule == "always":
        return verdict(True, "the acceptance rule is 'always'")
    if not common:
        return verdict(False, f"no case has a score in either run "
                              f"(candidate errors: {candidate.errors})")
    charged = sorted(candidate.errored_cases & set(common))
    errors = f"; {len(charged)} case(s) that errored counted as 0" if charged else ""
    level = f"{(1 - alpha) * 100:.2f}".rstrip("0").rstrip(".") + "%"
    one_sided = f", one-sided {level} bound {_fmt(bound)}" if rule == "significant" else ""
    split = (f"; seen {_fmt(seen)}, held-out {_fmt(unseen)}" if unseen is not None else "")
    evidence = (f"paired improvement {_fmt(delta)} over {len(common)} cases, "
                f"95% CI [{_fmt(low)}, {_fmt(high)}]{one_sided}{split}{errors}")
    regressions = tuple(
        sorted(
            c for c in required
            if incumbent.case_passed.get(c) is True and candidate.case_passed.get(c) is False
        )
    )
    if regressions:
        return verdict(False, f"required case(s) {', '.join(regressions)} passed "
                              f"before and fail now ({evidence})", regressions=regressions)
    if unseen is not None and unseen <= 0 and (delta or 0) > 0:
        return verdict(False, f"the held-out cases (never shown to the improver) did "
                              f"not gain: the gain is overfitting to the cases it saw ({evidence})")
    if rule == "improved":
        ok = delta is not None and delta > 0
        text = "the mean improved" if ok else "the mean did not improve"
        return verdict(ok, f"{text} ({evidence})")
    if rule == "significant":
        if bound is None or len(common) < MIN_CASES:
            return verdict(False, f"{len(common)} paired case(s) are too few to test "
                                  f"(at least {MIN_CASES}; {evidence}): add cases, or set "
                                  "improve.acceptance: improved")
        if bound > 0:
            return verdict(True, f"the improvement is significant ({evidence})")
        return verdict(False, "the improvement is not significant (the one-sided "
                              f"bound reaches zero or below; {evidence})",
                       inconclusive=delta is not None and delta > 0)
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


class PairedDifference(NamedTuple):
    """The paired per-case score difference (candidate minus incumbent) a rule decides on."""

    #: the cases paired (paired_scores), sorted
    common: list[str]
    delta: float | None
    #: its two-sided 95% interval
    low: float | None
    high: float | None
    #: its one-sided lower bound at the decision's alpha (None: under two cases)
    bound: float | None
    #: its mean over the cases shown to the improver, and over the held-out ones (None:
    #: nothing held out)
    seen: float | None
    unseen: float | None


def paired_difference(incumbent: Evaluation, candidate: Evaluation, *, alpha: float,
                      held_out: set[str] | frozenset[str]) -> PairedDifference:
    """The figures of the paired score difference, the standard deviation floored
    (floored_difference), the bound by Student's t at one-sided ``alpha``."""
    from cycle.stats import t_quantile

    before, after = paired_scores(incumbent, candidate)
    common = sorted(before)
    stats = floored_difference(before, after) if common else None
    delta = _finite(stats.mean) if stats else None
    bound = None
    if stats is not None and stats.n >= 2 and delta is not None and stats.sd is not None:
        bound = delta - t_quantile(1 - alpha, stats.n - 1) * stats.sd / math.sqrt(stats.n)
    diffs = {k: after[k] - before[k] for k in common}
    return PairedDifference(
        common, delta, _finite(stats.ci_low) if stats else None,
        _finite(stats.ci_high) if stats else None, bound,
        _mean([d for k, d in diffs.items() if k not in held_out]) if held_out else None,
        _mean([d for k, d in diffs.items() if k in held_out]) if held_out else None)


def floored_difference(before: dict[str, float], after: dict[str, float]) -> Stats:
    """The paired difference ``after - before`` with its interval, the standard
    deviation floored at MIN_SD (and an interval even for identical differences)."""
    from cycle.stats import describe, t_critical

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
    from cycle.stats import t_80, t_critical

    if cases < 2:
        return None
    within = math.sqrt(sum(sd * sd for sd in result_sds) / len(result_sds)) if result_sds else 0.0
    sd_diff = max(math.sqrt(2.0 / max(iterations, 1)) * within, MIN_SD)
    return (t_critical(cases - 1) + t_80(cases - 1)) * sd_diff / math.sqrt(cases)
