"""How often a cycle promotes a prompt that is not better, and finds one that is: the real
``Loop`` (exploring rounds, the confirmation, held-out cases, the store) on a world whose
truth is known.

    .venv/bin/python benchmarks/bench_acceptance.py             # ~10 min on 2 cores (6,000 cycles)
    .venv/bin/python benchmarks/bench_acceptance.py --quick     # a smoke run, ~1 min
    .venv/bin/python benchmarks/bench_acceptance.py --population 3   # rounds of 3 candidates
    .venv/bin/python benchmarks/bench_acceptance.py --search 200     # chain vs population
    .venv/bin/python benchmarks/bench_acceptance.py --cost           # improve.objective: cost

The world: each case has a true quality drawn once (uniform 35-65); a prompt version's
true score on a case is that plus the known effect of every edit it carries; the judge
returns the true score plus Gaussian noise (sd 10 per iteration, drawn from a hash of
the run, case and iteration, so a fresh evaluation is a fresh draw and a resumed one the
same). The improver is a stand-in whose edits have known effects:

- ``equal``: every edit changes nothing (5 rounds): how often does head move?
- ``better``: one edit, +5 on every case (1 round): how often does head move (power)?
- ``overfit``: one edit, +10 on the cases the improver was shown and -5 on the others
  (1 round, validation 0.25): how often is it promoted? (and without validation)

- ``cheaper-worse`` (``--cost``, improve.objective: cost, margin 2): every edit cuts the
  agent's cost by 30% and is truly worse by exactly the margin on every case (the hardest
  inferior candidate to refuse): how often does head move (5 rounds)? At most the
  confirmation's 2.5%.
- ``cheaper-equal`` (``--cost``): the edit cuts the cost by 30% and changes no score
  (1 round): how often does head move (power)?

- ``mixed`` (``--search``): edits help different cases (half specialists, +12 on a third of
  the cases each; a quarter harmful, -4; a quarter helping only the cases shown): the
  chain against a population, with and without merge, at about equal model calls, by
  the true gain of the version each cycle ends on.

Every cycle: 20 cases, 3 iterations, acceptance significant, low_score 100 (every case
is shown to the improver unless held out). Reported with the Monte Carlo standard error.
Drift: the reported final score minus the final version's true score (mean over cycles).
Cost: evaluations per cycle beyond the exploring ones (the confirmation, in units of one
evaluation of the suite, its extra iterations counted).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cycle.cases import TestCase
from cycle.events import EventBus
from cycle.judge import JudgeResult
from cycle.loop import Loop, LoopSettings, parse_stop
from cycle.loop.review import AutoReviewer
from cycle.records import AgentResult, Prompt, Suggestion
from cycle.records.scope import NO_SCOPE, CallScope
from cycle.store import Store

NOISE_SD = 10.0
MARK = re.compile(r"\[e:([\w-]+)\]")


@dataclass
class World:
    """The truth: per-case quality and the effect of every edit made so far."""

    quality: dict[str, float]
    effects: dict[str, dict[str, float]] = field(default_factory=dict)
    seed: int = 0
    #: the factor of every edit on the agent's cost (1: none)
    savings: dict[str, float] = field(default_factory=dict)

    def truth(self, system: str, case_id: str) -> float:
        return self.quality[case_id] + sum(self.effects[m].get(case_id, 0.0)
                                           for m in MARK.findall(system))

    def cost(self, system: str) -> float:
        """Dollars an agent call of this prompt costs: $0.001 times every edit's factor."""
        return 0.001 * math.prod(self.savings.get(m, 1.0) for m in MARK.findall(system))

    def suite_truth(self, system: str, cases: Any = None) -> float:
        cases = list(cases) if cases else list(self.quality)
        return sum(self.truth(system, c) for c in cases) / len(cases)


class TruthAgent:
    """Answers with its prompt's system text: the judge reads the edits from it."""

    name = "truth:agent"
    offline = True

    def __init__(self, prompt: Prompt, world: World | None = None, bus: Any = None) -> None:
        self.system = prompt.system
        self.world, self.bus = world, bus

    async def run(self, case: TestCase, *, iteration: int, scope: CallScope = NO_SCOPE) -> AgentResult:
        if self.bus is not None and self.world is not None:  # a priced call, as a model's
            from cycle.events import ModelCalled

            self.bus.emit(ModelCalled(model=self.name, role="agent", scope=scope,
                                      cost=self.world.cost(self.system)))
        return AgentResult(output=self.system)

    async def aclose(self) -> None:
        return None


class NoisyJudge:
    """The true score plus judge noise, drawn from (seed, run, case, iteration)."""

    name = "truth:judge"
    version = "1"
    offline = True
    threshold = 70.0
    criteria: tuple[Any, ...] = ()  # its score is the truth plus noise, no criterion's

    def __init__(self, world: World) -> None:
        self.world = world

    def register(self, store: Store) -> str:
        return self.version

    async def judge(self, case: TestCase, result: AgentResult, *, iteration: int = 0,
                    scope: CallScope = NO_SCOPE) -> JudgeResult:
        key = f"{self.world.seed}|{scope.run_id}|{case.id}|{iteration}".encode()
        rng = random.Random(int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big"))
        score = self.world.truth(result.output, case.id) + rng.gauss(0.0, NOISE_SD)
        score = max(0.0, min(100.0, score))
        return JudgeResult(score=score, passed=score >= self.threshold, verdicts=())


class KnownImprover:
    """Proposes one edit per round whose effect on each case the world records."""

    version = "known"
    offline = True

    def __init__(self, world: World, kind: str, gain: float) -> None:
        self.world, self.kind, self.gain = world, kind, gain
        self.count = 0

    async def propose(self, inp: Any, *, scope: CallScope = NO_SCOPE) -> list[Suggestion]:
        self.count += 1
        mark = f"{self.world.seed}-{self.count}"
        shown = {c.id for c in inp.low_cases}
        if self.kind == "equal":
            effect = dict.fromkeys(self.world.quality, 0.0)
        elif self.kind == "mixed":
            effect = self.mixed(mark, shown)
        elif self.kind == "better":
            effect = dict.fromkeys(self.world.quality, self.gain)
        elif self.kind.startswith("cheaper"):  # 30% cheaper; worse by the margin, or equal
            self.world.savings[mark] = 0.7
            effect = dict.fromkeys(self.world.quality, -self.gain if self.kind ==
                                   "cheaper-worse" else 0.0)
        else:  # overfit: helps what it saw, hurts the rest
            effect = {c: (10.0 if c in shown else -5.0) for c in self.world.quality}
        self.world.effects[mark] = effect
        return [Suggestion(type="system_prompt", priority="high", suggested_value=f" [e:{mark}]")]

    def mixed(self, mark: str, shown: set[str]) -> dict[str, float]:
        """An edit of a world where different edits help different cases: half of them a
        specialist (+12 on a third of the cases, drawn for the edit), a quarter harmful
        (-4 everywhere), a quarter helping only what the improver was shown (+10 there,
        -5 elsewhere)."""
        rng = random.Random(f"{self.world.seed}|{mark}")
        cases = sorted(self.world.quality)
        draw = rng.random()
        if draw < 0.5:
            helped = set(rng.sample(cases, len(cases) // 3))
            return {c: 12.0 if c in helped else 0.0 for c in cases}
        if draw < 0.75:
            return dict.fromkeys(cases, -4.0)
        return {c: 10.0 if c in shown else -5.0 for c in cases}


@dataclass
class Outcome:
    moved: bool
    explored: bool
    drift: float
    extra_evaluations: float
    screens: float = 0.0
    #: the final version's true score minus the starting one's
    true_gain: float = 0.0
    #: the same on the held-out cases alone (unseen by the improver: the future's cases)
    unseen_gain: float = 0.0
    #: model calls the cycle made: the improver's, and an agent and a judge call per
    #: case iteration (screens and confirmations included)
    calls: int = 0


async def one_cycle(store: Store, seed: int, kind: str, *, rounds: int, cases: int,
                    iterations: int, validation: float | None, gain: float = 5.0,
                    population: int = 1, merge: bool = True,
                    objective: str = "score") -> Outcome:
    from cycle.loop.holdout import held_out_cases

    rng = random.Random(seed)
    suite = [TestCase(id=f"c{i}", input=f"case {i}") for i in range(cases)]
    world = World({c.id: rng.uniform(35, 65) for c in suite}, seed=seed)
    start = store.save_version(Prompt(id=f"p{seed}", system="You answer."), source="manual")
    held = held_out_cases(suite, validation if validation else False)
    improver = KnownImprover(world, kind, gain)
    bus = EventBus()
    loop = Loop(
        start=start, cases=suite, agent=lambda p: TruthAgent(p, world, bus),  # type: ignore[arg-type,return-value]
        judge=NoisyJudge(world),  # type: ignore[arg-type]
        improver=improver, reviewer=AutoReviewer(),  # type: ignore[arg-type]
        store=store, stop=parse_stop({"max_rounds": rounds}), bus=bus,
        settings=LoopSettings(low_score=100.0, iterations=iterations, concurrency=64, timeout=None,
                              held_out=held, population=population, merge=merge,
                              objective=objective,  # type: ignore[arg-type]
                              margin=gain if objective == "cost" else 0.0),
    )
    result = await loop.run()
    final = store.get_version(start.prompt_id, result.final_version)
    drift = (result.final_score or 0.0) - world.suite_truth(final.prompt.system)
    confirm = [r.round for r in result.rounds if r.stage == "confirm"]
    extra = store.db.execute(  # the confirmation's two runs: <cycle>-rN and <cycle>-rN-baseline
        "SELECT count(*) FROM results WHERE run_id LIKE ?", (f"{result.cycle_id}-r{confirm[0]}%",)
    ).fetchone()[0] / (cases * iterations) if confirm else 0.0
    screens = store.db.execute(  # a population's screens: <cycle>-rN-sK, in suite evaluations
        "SELECT count(*) FROM results WHERE run_id LIKE ?", (f"{result.cycle_id}-r%-s%",)
    ).fetchone()[0] / (cases * iterations)
    judged = store.db.execute("SELECT count(*) FROM results WHERE run_id LIKE ?",
                              (f"{result.cycle_id}-%",)).fetchone()[0]
    return Outcome(moved=result.final_version != result.initial_version,
                   explored=any(r.accepted for r in result.rounds if r.stage == "improve"),
                   drift=drift, extra_evaluations=extra, screens=screens,
                   true_gain=world.suite_truth(final.prompt.system) - world.suite_truth(
                       start.prompt.system),
                   unseen_gain=world.suite_truth(final.prompt.system, held) - world.suite_truth(
                       start.prompt.system, held),
                   calls=improver.count + 2 * judged)


def rate(flags: list[bool]) -> str:
    n = len(flags)
    p = sum(flags) / n
    return f"{p:.1%} ± {math.sqrt(max(p * (1 - p), 1 / n) / n):.1%} (n={n})"


def mean_se(values: list[float]) -> str:
    n = len(values)
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / max(n - 1, 1))
    return f"{m:+.2f} ± {sd / math.sqrt(n):.2f}"


async def scenario(offset: int, n: int, **kw: Any) -> list[Outcome]:
    out: list[Outcome] = []
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "bench.db") as store:
        for seed in range(n):
            out.append(await one_cycle(store, offset * 1_000_000 + seed, **kw))
    return out


def search(n: int) -> None:
    """The chain against the population (with and without merge) in the mixed world, at
    about equal model calls, validation 0.25: the true gain of the version each cycle
    ends on."""
    arms = {  # rounds chosen so that every arm makes about 1,150 model calls a cycle
        "chain, 5 rounds": {"population": 1, "rounds": 5},
        "population 3 with merge, 4 rounds": {"population": 3, "rounds": 4},
        "population 3 without merge, 4 rounds": {"population": 3, "rounds": 4, "merge": False},
    }
    for offset, (label, kw) in enumerate(arms.items()):
        t = time.perf_counter()
        # the same worlds (seeds) for every arm: paired comparisons
        out = asyncio.run(scenario(10, n, kind="mixed", cases=20, iterations=3,
                                   validation=0.25, **kw))
        print(f"{label}: true gain of the final version {mean_se([o.true_gain for o in out])} "
              f"points (on the held-out cases {mean_se([o.unseen_gain for o in out])}); head moved {rate([o.moved for o in out])}; a worse version promoted "
              f"{rate([o.true_gain < 0 for o in out])}; model calls per cycle "
              f"{sum(o.calls for o in out) / len(out):.0f} ({time.perf_counter() - t:.0f} s)",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run with few cycles")
    parser.add_argument("--population", type=int, default=1,
                        help="candidates a round (improve.population; 1: the chain)")
    parser.add_argument("--cycles", type=int, help="cycles per world (default 3000/1000/1000)")
    parser.add_argument("--search", type=int, metavar="N",
                        help="only the search comparison: N cycles per arm in the mixed world")
    parser.add_argument("--cost", action="store_true",
                        help="only improve.objective: cost (margin 2): a cheaper, inferior "
                        "candidate's promotions and a cheaper, equal one's")
    args = parser.parse_args()
    if args.search:
        search(args.search)
        return
    n_equal, n_better, n_overfit = (40, 40, 40) if args.quick else (3000, 1000, 1000)
    if args.cycles:
        n_equal = n_better = n_overfit = args.cycles
    common = {"cases": 20, "iterations": 3, "population": args.population}
    t0 = time.perf_counter()
    cost = {"objective": "cost", "gain": 2.0, "validation": None}
    runs = {
        "cheaper and worse by the margin (2), 5 rounds: head moved": (
            "cheaper-worse", n_equal, {"kind": "cheaper-worse", "rounds": 5, **cost}),
        "cheaper and equal, 1 round: head moved (power)": (
            "cheaper-equal", n_better, {"kind": "cheaper-equal", "rounds": 1, **cost}),
    } if args.cost else {
        "equal candidates, 5 rounds: head moved": (
            "equal", n_equal, {"kind": "equal", "rounds": 5, "validation": None}),
        "a true +5, 1 round: head moved (power)": (
            "better", n_better, {"kind": "better", "rounds": 1, "validation": None}),
        "helps seen +10 / hurts unseen -5, validation 0.25: promoted": (
            "overfit", n_overfit, {"kind": "overfit", "rounds": 1, "validation": 0.25}),
        "the same edit without validation: promoted": (
            "overfit-blind", n_overfit, {"kind": "overfit", "rounds": 1, "validation": None}),
    }
    offsets = 20 if args.cost else 0  # other worlds than the score objective's
    results: dict[str, list[Outcome]] = {}
    for offset, (label, (_, n, kw)) in enumerate(runs.items(), start=offsets):
        t = time.perf_counter()
        results[label] = asyncio.run(scenario(offset, n, **common, **kw))
        out = results[label]
        print(f"{label}: {rate([o.moved for o in out])}; a round kept a candidate in "
              f"{rate([o.explored for o in out])}; drift of the final score {mean_se([o.drift for o in out])}; "
              f"confirmation {sum(o.extra_evaluations for o in out) / len(out):.2f} evaluations per cycle, "
              f"screens {sum(o.screens for o in out) / len(out):.2f} "
              f"({time.perf_counter() - t:.0f} s)", flush=True)
    everything = [o for out in results.values() for o in out]
    print(f"drift over every cycle: {mean_se([o.drift for o in everything])} points; "
          f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
