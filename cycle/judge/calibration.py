"""What people's labels say about trusting the judge: the corrected score, and the gate a
cycle's head move must pass.

**The corrected score** (prediction-powered inference, Angelopoulos et al. 2023): over a
run's N judged outputs and the n of them people labelled, a criterion's mean is estimated
as the judge's mean over all N plus the mean of (person - judge) over the n labelled ones;
its 95% interval adds the two variances (the judge's spread over N, the judge's error over
n), so it holds the judge's error as well as the sampling noise. It assumes the labelled
outputs are a random sample of the run's (``cycle judge sample`` draws them so, stratified)
and that the person is the truth; with no labels there is nothing to correct.

**The gate** (``improve.judge.min_agreement``): head moves only while every LLM criterion's
kappa with people has its 95% lower bound at or over the floor. Otherwise the reason says
which criterion, its figures, and how many more labels would settle it (the interval
narrows as 1/sqrt(n)): or that more labels will not help because the judge's agreement
itself is under the floor.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from msgspec import Struct

from cycle.judge.agreement import Rating, measure

Z95 = 1.959963984540054


def ratings_of(labelled: Sequence[Any]) -> dict[str, list[Rating]]:
    """Labels beside the judge's verdicts (``cycle.store.human_labels.Labelled``) as
    ratings, by criterion."""
    out: dict[str, list[Rating]] = {}
    for x in labelled:
        out.setdefault(x.label.criterion, []).append(Rating(
            output=(x.label.run, x.label.case, x.label.iteration), labeler=x.label.labeler,
            person_score=x.label.score, person_passed=x.label.passed,
            judge_score=x.judge_score, judge_passed=x.judge_passed))
    return dict(sorted(out.items()))


class Corrected(Struct, frozen=True):
    """A criterion's mean as judged, and as corrected with people's labels."""

    judged: float
    corrected: float
    ci: tuple[float, float]
    #: outputs judged, and of them labelled with a score
    n_judged: int
    n_labelled: int


def corrected_mean(judged: Sequence[float], ratings: Sequence[Rating]) -> Corrected | None:
    """The prediction-powered estimate of a criterion's mean on 0-100 (``judged``: the
    judge's score of every output; ``ratings``: the labelled ones, several labelers of one
    output averaged). None with fewer than two labelled scores."""
    by_output: dict[tuple[str, str, int], list[Rating]] = {}
    for r in ratings:
        if r.person_score is not None and r.judge_score is not None:
            by_output.setdefault(r.output, []).append(r)
    errors = [statistics.fmean(r.person_score for r in rs) - rs[0].judge_score  # type: ignore[operator, misc]
              for rs in by_output.values()]
    if len(errors) < 2 or len(judged) < 2:
        return None
    mean = statistics.fmean(judged)
    estimate = mean + statistics.fmean(errors)
    half = Z95 * math.sqrt(statistics.variance(judged) / len(judged)
                           + statistics.variance(errors) / len(errors))
    return Corrected(judged=mean, corrected=estimate, ci=(estimate - half, estimate + half),
                     n_judged=len(judged), n_labelled=len(errors))


def labels_to_settle(kappa: float, low: float, n: int, floor: float) -> int | None:
    """About how many more labels would lift kappa's lower bound to ``floor`` if kappa
    stayed where it is (the interval's half-width shrinks as 1/sqrt(n)); None when kappa
    itself is at or under the floor: no number of labels would."""
    if kappa <= floor:
        return None
    needed = n * ((kappa - low) / (kappa - floor)) ** 2
    return max(1, math.ceil(needed - n))


def gate(labelled: Sequence[Any], criteria: Sequence[str], floor: float) -> str | None:
    """Why the judge may not yet decide a head move (``criteria``: its LLM criteria),
    or None when each one's kappa lower bound is at or over ``floor``."""
    by = ratings_of(labelled)
    problems = []
    for c in criteria:
        ratings = by.get(c, [])
        if not ratings:
            problems.append(f"{c}: no human labels (label some: cycle judge sample RUN_ID "
                            "--n 50, then cycle judge labels import FILE)")
            continue
        a = measure(ratings)
        if a.kappa is None:
            problems.append(f"{c}: kappa undefined on {a.n} labels (one verdict only): label "
                            "outputs the judge passes and fails")
        elif a.kappa_ci is None:
            problems.append(f"{c}: {a.outputs} labelled outputs give no interval yet")
        elif a.kappa_ci[0] < floor:
            more = labels_to_settle(a.kappa, a.kappa_ci[0], a.n, floor)
            settle = (f"about {more} more labels would settle it" if more is not None else
                      "more labels will not lift it: improve the judge's rubric or use "
                      "another judge")
            problems.append(f"{c}: kappa {a.kappa:.2f}, lower bound {a.kappa_ci[0]:.2f} < "
                            f"{floor:.2f} on {a.n} labels ({settle})")
    return "; ".join(problems) or None
