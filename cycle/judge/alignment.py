"""How far one judge verdict agrees with people's labels of the same output: the score of a
case of ``cycle judge improve``, and the figures it reports on held-out labels.

A labelled output's *people's verdict* (``people_verdict``) is the mean of its labels'
scores (None when they gave pass/fail only) and whether it passed (at least half the
labelers passed it). A judge verdict agrees (``agreement``, 0-100) by the mean of two
halves: whether the pass/fail verdicts match (100 or 0), and how close the scores are
(100 minus the distance in points); with pass/fail labels only, the verdict match alone.
So a verdict that matches scores over 50 and one that does not scores at most 50; a
labelled output counts as agreed at ``AGREED_AT`` (the verdicts match and the scores are
within 50 points).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from cycle.judge.agreement import Rating, measure
from cycle.judge.checks import CheckOutcome

if TYPE_CHECKING:
    from cycle.judge.checks import CheckContext
    from cycle.store.human_labels import Label

#: a labelled output's agreement at which it counts as agreed (passes)
AGREED_AT = 75.0
#: the check that scores a case of ``cycle judge improve`` (a python check: the way a
#: user adds one)
CHECK = "cycle.judge.alignment:agreement"


def people_verdict(labels: Sequence[Label], pass_mark: float) -> dict[str, Any]:
    """What people said of one output on one criterion, as a case's ``expected``: their
    mean ``score`` (None without scores), ``passed``, the number of ``labels`` and their
    ``notes``. A label with a score but no pass/fail passes at ``pass_mark``."""
    scores = [x.score for x in labels if x.score is not None]
    passes = [x.passed if x.passed is not None else (x.score or 0.0) >= pass_mark
              for x in labels]
    return {"score": round(statistics.fmean(scores), 2) if scores else None,
            "passed": 2 * sum(passes) >= len(passes), "labels": len(labels),
            "notes": [x.note for x in labels if x.note]}


def verdict_of(answer: Any) -> tuple[float | None, bool | None]:
    """The (score, passed) of a judge verdict as ``cycle judge improve``'s judge answers:
    a mapping, or its JSON text; (None, None) when it is neither."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return None, None
    if not isinstance(answer, dict):
        return None, None
    score, passed = answer.get("score"), answer.get("passed")
    return (float(score) if isinstance(score, int | float) and not isinstance(score, bool)
            else None, passed if isinstance(passed, bool) else None)


def agreement_of(judge: tuple[float | None, bool | None], people: dict[str, Any]
                 ) -> tuple[float, str]:
    """The agreement (0-100) of a judge verdict with people's, and why."""
    score, passed = judge
    if passed is None:
        return 0.0, "the judge gave no verdict"
    match = 100.0 if passed == people["passed"] else 0.0

    def said(s: float | None, p: bool) -> str:
        return (f"{s:.0f} " if s is not None else "") + ("(pass)" if p else "(fail)")

    why = f"judge {said(score, passed)}, people {said(people['score'], people['passed'])}"
    if score is None or people["score"] is None:
        return match, why + ("" if match else ": the verdicts differ")
    close = 100.0 - abs(score - people["score"])
    return (match + close) / 2, why + (f": {abs(score - people['score']):.0f} points apart"
                                       + ("" if match else ", the verdicts differ"))


async def agreement(ctx: CheckContext) -> CheckOutcome:
    """The check of a ``cycle judge improve`` case: the judge's answer (its output) against
    people's verdict (the case's expected)."""
    value, why = agreement_of(verdict_of(ctx.structured or ctx.output), ctx.expected)
    return CheckOutcome(value, why)


class Figures(Struct, frozen=True):
    """A judge's agreement with people over some labelled outputs."""

    #: labelled outputs, and judge verdicts of them (several iterations each)
    outputs: int
    verdicts: int
    kappa: float | None
    kappa_ci: tuple[float, float] | None
    #: the share of verdicts whose pass/fail matches people's
    agreement: float | None
    #: mean |judge - people| in points, over the verdicts of outputs people scored
    mean_abs_error: float | None


def figures(pairs: Sequence[tuple[str, tuple[float | None, bool | None], dict[str, Any]]]
            ) -> Figures:
    """The figures of (labelled output's case id, judge verdict, people's verdict) pairs,
    kappa's interval bootstrapped over the outputs (cycle.judge.agreement)."""
    ratings = [Rating(output=("", case, 0), labeler="people", person_score=p["score"],
                      person_passed=p["passed"], judge_score=j[0], judge_passed=j[1])
               for case, j, p in pairs]
    a = measure(ratings, intervals=("kappa",))
    errors = [abs(r.judge_score - r.person_score) for r in ratings
              if r.judge_score is not None and r.person_score is not None]
    return Figures(outputs=a.outputs, verdicts=len(ratings), kappa=a.kappa,
                   kappa_ci=a.kappa_ci, agreement=a.agreement,
                   mean_abs_error=statistics.fmean(errors) if errors else None)
