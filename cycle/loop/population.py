"""A population of candidates a round (``improve.population: N``), chosen GEPA's way,
gated cycle's way.

Each round the improver proposes N candidates, each from its own parent: the parents are
taken from the Pareto frontier of every version the cycle evaluated in full (a version
survives on the frontier while it is the best on at least one case, so a candidate that
lost on average but won the cases another lost stays a parent). Each candidate's improver
is shown a share of its parent's weak cases (never more than half of them), and the
candidate is first screened on a small minibatch of the cases its improver was not shown
(never a held-out one), one iteration each, against its parent's scores on the same cases:
an edit that helps only the cases it was shown gains nothing there. Only the one that
gained most (and gained) gets the full evaluation, which the round's acceptance then
judges against the incumbent as it judges a round of one.

Why this costs the cycle's error control nothing: exploring only chooses what the
confirmation tests. Head moves only when the one best candidate beats head on fresh
samples of both at the confirmation's level, and fresh samples are independent of every
selection made on earlier ones, however many candidates were screened to find it. The
screens never touch held-out cases (selection on them would spend the check they make).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from cycle.loop.acceptance import Evaluation

#: scores this close count as a tie for the best on a case (both stay on the frontier)
TIE = 1e-9


def frontier(pool: Sequence[Evaluation], held_out: frozenset[str] = frozenset()
             ) -> list[tuple[Evaluation, int]]:
    """The versions of ``pool`` that are best (ties included) on at least one case, each
    with the number of cases it is best on; most cases first, the pool's order on ties.
    Held-out cases choose nothing (a choice made on them would spend their check)."""
    wins = [0] * len(pool)
    cases = {case for e in pool for case in e.case_scores} - held_out
    for case in cases:
        scored = [(e.case_scores[case], i) for i, e in enumerate(pool) if case in e.case_scores]
        top = max(score for score, _ in scored)
        for score, i in scored:
            if score >= top - TIE:
                wins[i] += 1
    ranked = sorted((i for i in range(len(pool)) if wins[i]), key=lambda i: (-wins[i], i))
    return [(pool[i], wins[i]) for i in ranked]


def parents(pool: Sequence[Evaluation], incumbent: str, n: int,
            held_out: frozenset[str] = frozenset()) -> list[Evaluation]:
    """``n`` parents for a round: the incumbent first (the chain's parent), then the other
    frontier versions by the cases they win, round again from the top when the frontier is
    smaller than ``n`` (a parent may have several children: the improver answers anew)."""
    front = [e for e, _ in frontier(pool, held_out)]
    first = next((e for e in pool if e.version == incumbent), None)
    order = ([first] if first is not None else []) + [e for e in front if e.version != incumbent]
    if not order:
        return []
    return [order[k % len(order)] for k in range(n)]


def shares(weak: Sequence[str], children: int) -> list[list[str]]:
    """What each of a parent's ``children`` is shown of its weak cases: child k every
    (children + 1)-th case from the k-th, so siblings see different evidence (GEPA's
    minibatch of traces) and one share is shown to none. No child sees more than half:
    the rest stay unseen by its improver, for its screen. A share left empty (fewer weak
    cases than children) is the first case."""
    return [list(weak[k::children + 1]) or list(weak[:1]) for k in range(children)]


def minibatch(case_ids: Sequence[str], weak: Sequence[str], size: int, salt: str,
              shown: Sequence[str] = ()) -> list[str]:
    """The cases a candidate is screened on: cases its improver was not ``shown`` (an edit
    that helps only what it saw gains nothing there), up to half of them its parent's other
    ``weak`` cases (where the edit should help if it generalises), the rest drawn from the
    others in an order fixed by ``salt`` (the cycle and round: a resume draws the same).
    The shown cases only when no other is left (a suite that small cannot screen apart)."""
    unseen = [c for c in case_ids if c not in set(shown)] or list(case_ids)
    size = min(size, len(unseen))
    known = set(unseen)
    chosen = [c for c in weak if c in known][: max(1, size // 2)]
    rest = sorted((c for c in unseen if c not in chosen),
                  key=lambda c: hashlib.blake2b(f"{salt}|{c}".encode(), digest_size=8).digest())
    return chosen + rest[: size - len(chosen)]


def screen_gain(candidate: Evaluation, parent: Evaluation, cases: Sequence[str]) -> float | None:
    """The candidate's mean gain over its parent on ``cases``: a case the candidate only
    errored on counts as a loss of the parent's whole score there. None: no case to compare."""
    gains = [candidate.case_scores.get(c, 0.0) - parent.case_scores[c]
             for c in cases if c in parent.case_scores
             and (c in candidate.case_scores or c in candidate.errored_cases)]
    return sum(gains) / len(gains) if gains else None
