"""Cost as an objective (``improve.objective: cost``): the cheapest version that is not
worse than the incumbent by more than ``improve.margin`` points.

A candidate replaces the incumbent when both hold:

- **cheaper**: its mean agent cost per case, paired over the cases both versions ran, is
  below the incumbent's. A case's agent cost is the mean over its iterations of what the
  stored calls of the agent role were billed (``RunLog.agent_case_costs``: the provider's
  reported tokens at the price table's prices; answers from the response cache cost
  nothing). The judge's, the simulated users' and the improver's calls are left out:
  they are not what the prompt costs in production.
- **not worse** (non-inferiority): the one-sided lower confidence bound of the paired
  per-case score difference (candidate minus incumbent) at the decision's level lies above
  ``-margin``. The null hypothesis is "worse by the margin or more", so a false
  acceptance is promoting such a candidate, and the same levels bound it as they bound a
  false gain with the score objective: a round explores at one-sided 10%, head moves
  after a confirmation on fresh samples at 2.5% over its looks (cycle.loop.core).

The score rule's guards hold here too: the paired standard deviation is floored at
``MIN_SD``, fewer than ``MIN_CASES`` paired cases is too few to test, a required case that
passed must not fail, and a case that errored in one version only is 0 there. Held-out
cases that lost more than the margin on average reject the candidate (an edit that saves
on the cases the improver saw by hurting the others).

``frontier`` gives the versions no other version beats on both score and cost, which the
reports show.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from msgspec import Struct

from cycle.loop.acceptance import (
    MIN_CASES,
    AcceptanceDecision,
    AcceptanceRule,
    Evaluation,
    paired_difference,
)
from cycle.records import Prompt, Suggestion

Objective = Literal["score", "cost"]


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f}"


def money(x: float) -> str:
    """Dollars per case: small figures keep their digits."""
    return f"${x:.6f}".rstrip("0").rstrip(".") if x else "$0"


def paired_costs(incumbent: Evaluation, candidate: Evaluation) -> tuple[float, float] | None:
    """The mean agent cost per case of each version over the cases both ran (None: no
    case in common)."""
    common = sorted(set(incumbent.case_costs) & set(candidate.case_costs))
    if not common:
        return None
    n = len(common)
    return (sum(incumbent.case_costs[k] for k in common) / n,
            sum(candidate.case_costs[k] for k in common) / n)


def mean_cost(evaluation: Evaluation) -> float | None:
    """A version's mean agent cost per case (None: no case's cost is known)."""
    costs = evaluation.case_costs
    return sum(costs.values()) / len(costs) if costs else None


def decide_cheaper(
    rule: AcceptanceRule,
    incumbent: Evaluation,
    candidate: Evaluation,
    *,
    margin: float,
    required: set[str] | frozenset[str] = frozenset(),
    held_out: set[str] | frozenset[str] = frozenset(),
    alpha: float,
) -> AcceptanceDecision:
    """The cost objective's verdict: accepted when the candidate is cheaper per case and
    (``significant``) the one-sided bound of its paired score difference at ``alpha`` is
    above ``-margin``; ``improved``: its mean difference is above ``-margin``; ``always``:
    accepted."""
    common, delta, low, high, bound, seen, unseen = paired_difference(
        incumbent, candidate, alpha=alpha, held_out=held_out)
    costs = paired_costs(incumbent, candidate)
    cost_delta = costs[1] - costs[0] if costs else None

    def verdict(ok: bool, because: str, *, inconclusive: bool = False,
                regressions: tuple[str, ...] = ()) -> AcceptanceDecision:
        reason = ("accepted: " if ok else "rejected: ") + because
        return AcceptanceDecision(ok, reason, delta, low, high, regressions, bound, seen, unseen,
                                  inconclusive, because, cost_delta=cost_delta,
                                  cost=costs[1] if costs else None)

    if rule == "always":
        return verdict(True, "the acceptance rule is 'always'")
    if not common or costs is None:
        return verdict(False, f"no case has a score and a cost in both runs "
                              f"(candidate errors: {candidate.errors})")
    was, now = costs
    share = f" ({(now - was) / was * 100:+.0f}%)" if was > 0 else ""
    cost_text = f"agent cost per case {money(was)} -> {money(now)}{share}"
    level = f"{(1 - alpha) * 100:.2f}".rstrip("0").rstrip(".") + "%"
    one_sided = f", one-sided {level} bound {_fmt(bound)}" if rule == "significant" else ""
    split = f"; seen {_fmt(seen)}, held-out {_fmt(unseen)}" if unseen is not None else ""
    charged = sorted(candidate.errored_cases & set(common))
    errors = f"; {len(charged)} case(s) that errored counted as 0" if charged else ""
    evidence = (f"{cost_text}; paired score difference {_fmt(delta)} over {len(common)} "
                f"cases, 95% CI [{_fmt(low)}, {_fmt(high)}]{one_sided}, margin "
                f"-{margin:g}{split}{errors}")
    regressions = tuple(sorted(
        c for c in required
        if incumbent.case_passed.get(c) is True and candidate.case_passed.get(c) is False))
    if regressions:
        return verdict(False, f"required case(s) {', '.join(regressions)} passed before and "
                              f"fail now ({evidence})", regressions=regressions)
    if not now < was:
        return verdict(False, f"not cheaper ({evidence})")
    if unseen is not None and unseen < -margin:
        return verdict(False, f"the held-out cases (never shown to the improver) lost more "
                              f"than the margin ({evidence})")
    if rule == "improved":
        ok = delta is not None and delta > -margin
        text = "cheaper, and the mean score is within the margin" if ok else (
            "cheaper, but the mean score fell by more than the margin")
        return verdict(ok, f"{text} ({evidence})")
    if bound is None or len(common) < MIN_CASES:
        return verdict(False, f"{len(common)} paired case(s) are too few to test "
                              f"(at least {MIN_CASES}; {evidence}): add cases, or set "
                              "improve.acceptance: improved")
    if bound > -margin:
        return verdict(True, f"cheaper and not worse by more than the margin ({evidence})")
    return verdict(False, "cheaper, but not shown to be within the margin (the one-sided "
                          f"bound reaches -{margin:g} or below; {evidence})",
                   inconclusive=delta is not None and delta > -margin)


class Point(Struct, frozen=True):
    """One evaluated version on the score/cost plane."""

    version: str
    score: float | None
    cost: float | None


def frontier(points: Sequence[Point]) -> set[str]:
    """The versions no other beats on both: none has a score at least as high and a cost
    at least as low, one of them strictly. A version without a score or a cost is not on it."""
    known = [p for p in points if p.score is not None and p.cost is not None]
    out = set()
    for p in known:
        assert p.score is not None and p.cost is not None
        beaten = any(
            q.score >= p.score and q.cost <= p.cost and (q.score > p.score or q.cost < p.cost)
            for q in known if q is not p and q.score is not None and q.cost is not None)
        if not beaten:
            out.add(p.version)
    return out


def model_switch(prompt: Prompt, model: str, margin: float) -> Suggestion:
    """The cycle's own suggestion to run the same prompt on ``model`` (its params.model):
    a ``parameters`` edit the reviewer decides like any other."""
    current = prompt.params.get("model")
    return Suggestion(
        type="parameters", priority="high",
        current_value=json.dumps({"model": current}) if current else "",
        suggested_value=json.dumps({"model": model}),
        reasoning=f"the same prompt on {model} (improve.models): kept if its agent cost per "
                  f"case is lower and its score is not worse by more than {margin:g} points",
        expected_improvement="a lower agent cost per case",
    )


def switched_model(value: str) -> str | None:
    """The model a ``parameters`` suggestion moves the prompt to, when that is all it does."""
    try:
        update = json.loads(value)
    except ValueError:
        return None
    if isinstance(update, dict) and set(update) == {"model"} and isinstance(update["model"], str):
        return update["model"]
    return None
