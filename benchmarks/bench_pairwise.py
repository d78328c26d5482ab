"""Pairwise acceptance on a world whose truth is known: how often a cycle whose only
criterion is ``pairwise: true`` promotes a version that is not better, finds one that is,
and what a judge that favours the first answer shown does to both.

    .venv/bin/python benchmarks/bench_pairwise.py              # 4 worlds x 300 cycles
    .venv/bin/python benchmarks/bench_pairwise.py --quick      # a smoke run

The world is bench_acceptance's (20 cases, true quality uniform 35-65, an edit's effect
known, 3 iterations, acceptance significant), with the real ``Loop`` and store; the
judge's scores are the truth plus noise (sd 10) but decide nothing: the criterion is
pairwise. Asked to compare, the judge (a scripted model, through ``Model``: the
comparisons are journaled and costed like any judge call) sees the true difference of
the two answers plus noise (sd 10 x sqrt 2, as two scores' difference), plus ``bias``
points for the answer shown first; it answers "tie" within 2 points.

- ``equal``: every edit changes nothing (3 rounds): how often does head move?
- ``better``: one edit, +5 on every case (1 round): how often does head move (power)?
- the same two with a judge biased +15 points to the first answer shown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_acceptance import KnownImprover, NoisyJudge, TruthAgent, World, rate

from cycle.cases import TestCase
from cycle.judge.criteria import Criterion
from cycle.llm.registry import get_model
from cycle.loop import Loop, LoopSettings, parse_stop
from cycle.loop.review import AutoReviewer
from cycle.records import Prompt
from cycle.store import Store
from cycle.testing import script

PAIR_SD = 10.0 * math.sqrt(2)
TIE = 2.0
_BLOCK = re.compile(r"```json\s*(.*?)```", re.DOTALL)


class Comparer:
    """The scripted judge's answer to a comparison, from the current world's truth."""

    def __init__(self) -> None:
        self.world: World | None = None
        self.bias = 0.0
        self.rng = random.Random(0)
        self.calls = 0
        self.flips_seen = 0

    def __call__(self, messages, tools, config) -> dict[str, Any]:
        assert self.world is not None
        self.calls += 1
        block = json.loads(_BLOCK.findall(messages[-1].content)[-1])
        case = "c" + block["input"].split()[-1]
        diff = self.world.truth(block["first"], case) - self.world.truth(block["second"], case)
        seen = diff + self.rng.gauss(0.0, PAIR_SD) + self.bias
        winner = "first" if seen > TIE else "second" if seen < -TIE else "tie"
        return {"reasoning": "compared", "winner": winner}


COMPARER = Comparer()


class PairwiseJudge(NoisyJudge):
    """Scores as bench_acceptance's judge; its one criterion is pairwise, compared by the
    scripted model."""

    criteria = (Criterion(id="quality", description="The better answer.", kind="llm",
                          pairwise=True),)

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.model = get_model("scripted:pairwise", role="judge")


async def one_cycle(store: Store, seed: int, kind: str, *, bias: float, rounds: int,
                    cases: int = 20, iterations: int = 3) -> tuple[bool, bool, float]:
    """(head moved, a round kept a candidate, the share of order flips in round 1)."""
    rng = random.Random(seed)
    suite = [TestCase(id=f"c{i}", input=f"case {i}") for i in range(cases)]
    world = World({c.id: rng.uniform(35, 65) for c in suite}, seed=seed)
    COMPARER.world, COMPARER.bias, COMPARER.rng = world, bias, random.Random(seed)
    start = store.save_version(Prompt(id=f"p{seed}", system="You answer."), source="manual")
    judge = PairwiseJudge(world)
    loop = Loop(
        start=start, cases=suite, agent=TruthAgent, judge=judge,  # type: ignore[arg-type]
        improver=KnownImprover(world, kind, 5.0), reviewer=AutoReviewer(),  # type: ignore[arg-type]
        store=store, stop=parse_stop({"max_rounds": rounds}),
        settings=LoopSettings(low_score=100.0, iterations=iterations, concurrency=64,
                              timeout=None),
    )
    try:
        result = await loop.run()
    finally:
        await judge.model.aclose()
    rows = store.cycles.get_rounds(result.cycle_id)
    flips = next((r.pairwise[0]["order_flips"] for r in rows if r.pairwise), 0.0)
    return (result.final_version != result.initial_version,
            any(r.accepted for r in result.rounds if r.stage == "improve"), flips)


async def scenario(offset: int, n: int, **kw: Any) -> list[tuple[bool, bool, float]]:
    out = []
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "bench.db") as store:
        for seed in range(n):
            out.append(await one_cycle(store, offset * 1_000_000 + seed, **kw))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run with few cycles")
    parser.add_argument("--cycles", type=int, default=300, help="cycles per world")
    args = parser.parse_args()
    n = 20 if args.quick else args.cycles
    script("pairwise", COMPARER)
    worlds = {
        "equal candidates, 3 rounds: head moved": {"kind": "equal", "rounds": 3, "bias": 0.0},
        "a true +5, 1 round: head moved (power)": {"kind": "better", "rounds": 1, "bias": 0.0},
        "equal, judge +15 to the first answer: head moved": {"kind": "equal", "rounds": 3,
                                                             "bias": 15.0},
        "a true +5, judge +15 to the first answer: head moved": {"kind": "better",
                                                                 "rounds": 1, "bias": 15.0},
    }
    t0 = time.perf_counter()
    for offset, (label, kw) in enumerate(worlds.items()):
        t = time.perf_counter()
        out = asyncio.run(scenario(offset, n, **kw))
        flips = sum(f for _, _, f in out) / len(out)
        print(f"{label}: {rate([m for m, _, _ in out])}; a round kept a candidate in "
              f"{rate([e for _, e, _ in out])}; order flips {flips:.0%} of round 1's pairs "
              f"({time.perf_counter() - t:.0f} s)", flush=True)
    print(f"total {time.perf_counter() - t0:.0f} s; {COMPARER.calls} comparison calls")


if __name__ == "__main__":
    main()
