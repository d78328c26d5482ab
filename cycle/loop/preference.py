"""Pairwise acceptance: the judge's direct preference between two versions' outputs.

A criterion with ``pairwise: true`` decides a cycle's acceptance by comparison, not by
the difference of its scores (cycle.loop.acceptance says how the tests combine). Each
iteration a case has judged in both runs (the same iteration number: both versions
answered the same case as often) is one pair, judged on each pairwise criterion twice,
once in each order (cycle.judge.pairwise.compare): a preference that follows the
position is an order flip and counts as a tie. A case prefers the version most of its
pairs prefer; a case judged in one run only counts against the version that errored on
it (as the scored test pays it 0 there). Over the cases, the one-sided exact sign test.

The calls go through the judge's model with the round's scope: the budget caps them,
their cost is the round's "judge" cost, the journal replays them when a killed cycle
resumes, and the cache may answer them; the sample names both runs, so a confirmation's
fresh runs are judged afresh.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from cycle.judge.criteria import Criterion, weighted_score
from cycle.judge.pairwise import Pair, compare, sign_test_greater
from cycle.llm.model import Model
from cycle.loop.acceptance import Evaluation, PairwiseTest
from cycle.records import IterationResult, RunResult
from cycle.records.scope import CallScope


def judged(result: RunResult) -> dict[str, dict[int, IterationResult]]:
    """Case id -> iteration -> its judged result (errored iterations left out)."""
    out: dict[str, dict[int, IterationResult]] = {}
    for r in result.iter_results():
        if r.status != "error" and r.score is not None:
            out.setdefault(r.case_id, {})[r.iteration] = r
    return out


async def preferences(
    model: Model,
    criteria: Sequence[Criterion],
    before: RunResult,
    after: RunResult,
    old: Mapping[str, Mapping[int, IterationResult]],
    new: Mapping[str, Mapping[int, IterationResult]],
    *,
    expected: Mapping[str, Any],
    scope: CallScope,
    concurrency: int = 8,
) -> tuple[PairwiseTest, ...]:
    """Each pairwise criterion's comparison of ``after`` (the candidate) with ``before``;
    ``old`` and ``new``: their judged results (``judged``), read once by the caller."""
    gate = asyncio.Semaphore(max(1, concurrency))
    sample = f"{before.run_id}|{after.run_id}"

    async def one(c: Criterion, a: IterationResult, b: IterationResult) -> Pair:
        async with gate:
            return await compare(model, c.id, c.description, a, b,
                                 expected=expected.get(a.case_id), sample=sample, scope=scope)

    jobs = [one(c, old[k][i], new[k][i]) for c in criteria for k in sorted(set(old) & set(new))
            for i in sorted(set(old[k]) & set(new[k]))]
    pairs = list(await asyncio.gather(*jobs))
    ran = set(before.cases) & set(after.cases)
    only_old = {k for k in ran if k in old and k not in new}
    only_new = {k for k in ran if k in new and k not in old}
    return tuple(_test(c.id, [p for p in pairs if p.criterion == c.id], only_new, only_old)
                 for c in criteria)


def _test(criterion: str, pairs: Sequence[Pair], won: Iterable[str], lost: Iterable[str]
          ) -> PairwiseTest:
    net: dict[str, int] = {}
    for p in pairs:
        net[p.case] = net.get(p.case, 0) + {"head": 1, "base": -1, "tie": 0}[p.outcome]
    for k in won:
        net[k] = 1
    for k in lost:
        net[k] = -1
    wins = sum(1 for v in net.values() if v > 0)
    losses = sum(1 for v in net.values() if v < 0)
    return PairwiseTest(
        criterion=criterion, wins=wins, losses=losses, ties=len(net) - wins - losses,
        pairs=len(pairs), order_flips=sum(p.flipped for p in pairs) / len(pairs) if pairs else 0.0,
        p_value=sign_test_greater(wins, losses))


def scored_only(evaluation: Evaluation, results: Mapping[str, Mapping[int, IterationResult]],
                leave_out: set[str]) -> Evaluation:
    """``evaluation`` with each case's score the weighted mean of the criteria not in
    ``leave_out`` (the pairwise ones: their comparison decides for them); ``results``:
    the run's judged results (``judged``)."""
    means: dict[str, float] = {}
    for case_id, iterations in results.items():
        scores = [weighted_score([(v.score, v.weight) for v in r.verdicts
                                  if v.criterion_id not in leave_out]) for r in iterations.values()]
        if scores:
            means[case_id] = sum(scores) / len(scores)
    return msgspec.structs.replace(evaluation, case_scores=means)
