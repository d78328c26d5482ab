"""What people's labels buy (issue 35), by Monte Carlo on known-truth worlds.

    .venv/bin/python benchmarks/bench_judge.py [--sims 1000]

A run of N outputs whose true scores are uniform on 20-90 (the prompt's true mean: 55);
a judge that adds ``bias`` points on long answers (half of them) plus Gaussian noise
(sd 8); people who score the truth, labelling n outputs drawn at random.

1. **Coverage and width of the corrected score** (cycle.judge.calibration.corrected_mean)
   at n = 25, 50, 100, 200 labels of N = 500: the share of runs whose 95% interval holds
   the true mean, and its width against the judged mean's own interval (which is blind to
   the judge's error).
2. **The gate** (improve.judge.min_agreement 0.6): how often a judge's kappa lower bound
   on n labels lets it decide (the gate open), for an honest judge and a biased one, and
   how often its judged mean is more than 2 points off the truth in those runs.
3. **Whole cycles** (the real Loop and store, bench_acceptance's stand-ins): a judge that
   gives +8 to answers carrying a "verbose" edit whose true effect is nothing, and an
   improver that proposes it; how often head moves without labels and with
   ``improve.judge.confirm_labels`` 20 and 50 (people: the truth plus noise, sd 5,
   labelling random outputs of each fresh run when the cycle asks); and the power the
   correction costs on an honest judge and a true +5.

4. **cycle judge improve** (the real command's pieces: ``cycle run``, ``cycle judge labels
   import``, cycle.assemble.judge_cycle's Loop on a SQLite store, the offline model) on
   the labelled world (cycle.testing.offline.labelled): 40 cases, each asking for the
   order number and for a next step with probability one half; the rubric asks for a next
   step only; people get each verdict the wrong way round 5% of the time. Per seed (the
   world's and the split's): held-out kappa and mean absolute error before and after,
   whether head moved. Two worlds: people also require the order number (a rule to
   learn), or they follow the rubric (nothing to learn: a move would be a false
   promotion).

Each share is printed with its Monte Carlo standard error, sqrt(p(1-p)/sims); each mean
with its standard error, sd/sqrt(sims).
"""

from __future__ import annotations

import argparse
import random
import statistics

from cycle.judge.agreement import Rating, interval, kappa
from cycle.judge.calibration import PASS_AT, Z95, corrected_mean

TRUE_MEAN = 55.0


def world(rng: random.Random, *, n_judged: int, n_labelled: int, bias: float,
          noise: float = 8.0) -> tuple[list[float], list[Rating]]:
    truth = [rng.uniform(20, 90) for _ in range(n_judged)]
    judged = [min(100.0, max(0.0, t + (bias if rng.random() < 0.5 else 0.0)
                             + rng.gauss(0, noise))) for t in truth]
    ratings = [Rating(output=("r", f"c{i}", 0), labeler="person", person_score=truth[i],
                      person_passed=truth[i] >= PASS_AT, judge_score=judged[i],
                      judge_passed=judged[i] >= PASS_AT)
               for i in rng.sample(range(n_judged), n_labelled)]
    return judged, ratings


def share(hits: int, sims: int) -> str:
    p = hits / sims
    return f"{p:.3f} ± {(p * (1 - p) / sims) ** 0.5:.3f}"


def coverage(sims: int, bias: float) -> None:
    print(f"\n1. corrected score, N = 500 outputs, judge bias +{bias:g} on half, {sims} runs each")
    print(f"{'labels':>6}  {'corrected coverage':>20}  {'judged coverage':>18}  "
          f"{'width corrected/judged':>22}")
    for n in (25, 50, 100, 200):
        rng = random.Random(n)
        held = naive = 0
        ratios = []
        for _ in range(sims):
            judged, ratings = world(rng, n_judged=500, n_labelled=n, bias=bias)
            c = corrected_mean(judged, ratings)
            assert c is not None
            held += c.ci[0] <= TRUE_MEAN <= c.ci[1]
            half = Z95 * statistics.stdev(judged) / len(judged) ** 0.5
            naive += abs(c.judged - TRUE_MEAN) <= half
            ratios.append((c.ci[1] - c.ci[0]) / (2 * half))
        print(f"{n:>6}  {share(held, sims):>20}  {share(naive, sims):>18}  "
              f"{statistics.median(ratios):>22.2f}")


def gate(sims: int, floor: float = 0.6) -> None:
    print(f"\n2. the gate (kappa lower bound >= {floor}), N = 500, {sims} runs each")
    print(f"{'judge':>18}  {'labels':>6}  {'gate open':>14}  {'open and >2 points off':>24}")
    for name, bias, noise in (("honest, sd 8", 0.0, 8.0), ("+8 on long, sd 8", 8.0, 8.0),
                              ("+8 on long, sd 20", 8.0, 20.0)):
        for n in (25, 50, 100):
            rng = random.Random(n * 1000 + int(bias) * 100 + int(noise))
            opened = wrong = 0
            for _ in range(sims):
                judged, ratings = world(rng, n_judged=500, n_labelled=n, bias=bias, noise=noise)
                k = kappa(ratings)
                # the bootstrap the gate reads (cycle.judge.agreement.measure)
                ci = interval(ratings, kappa, random.Random(0)) if k is not None else None
                if ci is not None and ci[0] >= floor:
                    opened += 1
                    wrong += abs(statistics.fmean(judged) - TRUE_MEAN) > 2
            print(f"{name:>18}  {n:>6}  {share(opened, sims):>14}  {share(wrong, sims):>24}")


# -- 3. whole cycles: a judge that likes verbose answers, an improver that makes them ----

VERBOSE = "[verbose]"


def _cycle_parts(world, bias: float, gain: float):  # type: ignore[no-untyped-def]
    """The stand-ins of bench_acceptance, with a judge that scores one LLM criterion and
    gives ``bias`` points to an answer carrying the verbose edit, whose true effect is
    ``gain`` on every case."""
    import hashlib

    from bench_acceptance import NOISE_SD, NoisyJudge

    from cycle.judge import JudgeResult
    from cycle.judge.criteria import Criterion
    from cycle.records import Suggestion, Verdict
    from cycle.records.scope import NO_SCOPE

    class VerboseLovingJudge(NoisyJudge):
        criteria = (Criterion(id="quality", description="", kind="llm", pass_mark=70.0),)

        async def judge(self, case, result, *, iteration=0, scope=NO_SCOPE):  # type: ignore[no-untyped-def]
            key = f"{self.world.seed}|{scope.run_id}|{case.id}|{iteration}".encode()
            rng = random.Random(int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big"))
            score = (self.world.truth(result.output, case.id) + rng.gauss(0.0, NOISE_SD)
                     + (bias if VERBOSE in result.output else 0.0))
            score = max(0.0, min(100.0, score))
            verdict = Verdict(criterion_id="quality", kind="llm", score=score, passed=score >= 70,
                              weight=1.0, required=False, reasoning="")
            return JudgeResult(score=score, passed=score >= 70, verdicts=(verdict,))

    class VerboseImprover:
        version = "verbose"
        offline = True

        async def propose(self, inp, *, scope=NO_SCOPE):  # type: ignore[no-untyped-def]
            mark = f"{world.seed}-v"
            world.effects[mark] = dict.fromkeys(world.quality, gain)
            return [Suggestion(type="system_prompt", priority="high",
                               suggested_value=f" [e:{mark}] {VERBOSE}")]

    return VerboseLovingJudge(world), VerboseImprover()


async def _one_cycle(store, seed: int, *, bias: float, gain: float, labels: int | None,  # type: ignore[no-untyped-def]
                     person_sd: float = 5.0) -> bool:
    """One cycle of one improving round; with ``labels``, people (the truth plus noise)
    label that many random outputs of each fresh run when the cycle asks, and it resumes.
    Whether head moved."""
    from bench_acceptance import TruthAgent, World

    from cycle.cases import TestCase
    from cycle.loop import Loop, LoopSettings, parse_stop
    from cycle.loop.review import AutoReviewer
    from cycle.records import Prompt
    from cycle.store.human_labels import Label

    rng = random.Random(seed)
    suite = [TestCase(id=f"c{i}", input=f"case {i}") for i in range(20)]
    world = World({c.id: rng.uniform(35, 65) for c in suite}, seed=seed)
    start = store.save_version(Prompt(id=f"p{seed}", system="You answer."), source="manual")
    judge, improver = _cycle_parts(world, bias, gain)

    def loop() -> Loop:
        return Loop(start=start, cases=suite, agent=TruthAgent, judge=judge,  # type: ignore[arg-type]
                    improver=improver, reviewer=AutoReviewer(), store=store,  # type: ignore[arg-type]
                    stop=parse_stop({"max_rounds": 1}),
                    settings=LoopSettings(low_score=100.0, iterations=3, concurrency=64,
                                          timeout=None, confirm_labels=labels))

    result = await loop().run()
    if result.status == "interrupted":  # waiting for people's labels of the fresh runs
        for run in store.runs.recent(cycle_id=result.cycle_id, limit=None):
            if run.round != 2:
                continue
            outputs = store.human_labels.outputs(run.id)
            store.human_labels.add([
                Label(run=run.id, case=o["case"], iteration=o["iteration"], criterion="quality",
                      score=max(0.0, min(100.0, world.truth(o["output"], o["case"])
                                         + rng.gauss(0.0, person_sd))), labeler="person")
                for o in rng.sample(outputs, labels or 0)])
        result = await loop().run(resume=result.cycle_id)
    return result.final_version != result.initial_version


def whole_cycles(sims: int) -> None:
    import asyncio
    import sys
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cycle.store import Store

    print(f"\n3. whole cycles (20 cases x 3 iterations, one improving round), {sims} each: "
          "head moved")
    print(f"{'world':>44}  {'no labels':>14}  {'20 labels':>14}  {'50 labels':>14}")
    for name, bias, gain in (("judge +8 on verbose, true gain 0 (false)", 8.0, 0.0),
                             ("honest judge, true gain +5 (power)", 0.0, 5.0)):
        cells = []
        for labels in (None, 20, 50):
            async def run(bias: float = bias, gain: float = gain,
                          labels: int | None = labels) -> int:
                moved = 0
                for seed in range(sims):
                    # a store per cycle: a cycle's start measures its judge over every label
                    # of the store (bootstrapped), which would grow with each cycle here
                    with tempfile.TemporaryDirectory() as tmp, \
                            Store.open(Path(tmp) / "b.db") as store:
                        moved += await _one_cycle(store, 7_000_000 + seed, bias=bias, gain=gain,
                                                  labels=labels)
                return moved
            cells.append(share(asyncio.run(run()), sims))
        print(f"{name:>44}  {cells[0]:>14}  {cells[1]:>14}  {cells[2]:>14}", flush=True)


def _judge_cycle(folder, seed: int, people: str, flip: float) -> tuple[float, float, float,  # type: ignore[no-untyped-def]
                                                                       float, bool]:
    """One world of ``cycle judge improve``: held-out (kappa before, after, mean absolute
    error before, after) and whether head moved."""
    import json

    from click.testing import CliRunner

    from cycle import aio
    from cycle.assemble.config import load_config
    from cycle.assemble.improve import load_improve_config
    from cycle.assemble.judge_cycle import build_judge_loop, held_out_figures, labelled_set
    from cycle.cli import cli
    from cycle.loop.review import AutoReviewer
    from cycle.store import Store
    from cycle.testing.offline.labelled import RULES, people_labels, write_project

    config = write_project(folder, cases=40, seed=seed)
    store_path = folder / "s.db"
    runner = CliRunner()
    r = runner.invoke(cli, ["--store", str(store_path), "run", str(config), "--no-reports", "-q"])
    assert r.exit_code in (0, 1), r.output
    with Store.open(store_path) as store:
        run_id = store.runs.recent(limit=1)[0].id
        lines = people_labels(store.human_labels.outputs(run_id), run_id, RULES[people],
                              flip=flip, rng=random.Random(seed))
    labels = folder / "labels.jsonl"
    labels.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = runner.invoke(cli, ["--store", str(store_path), "judge", "labels", "import", str(labels)])
    assert r.exit_code == 0, r.output
    loaded = load_config(config)
    with Store.open(store_path) as store:
        labelled = labelled_set(store, loaded, run_id, held_out=0.3, seed=seed)
        loop = build_judge_loop(loaded, labelled, store=store, reviewer=AutoReviewer(),
                                improve=load_improve_config(loaded), rounds=3)
        result = aio.run(loop.run())
        h = held_out_figures(store, result, labelled)
    assert h is not None
    return (h.before.kappa or 0.0, h.after.kappa or 0.0, h.before.mean_abs_error or 0.0,
            h.after.mean_abs_error or 0.0, result.final_version != result.initial_version)


def judge_improve(sims: int, flip: float = 0.05) -> None:
    import tempfile
    from pathlib import Path

    def mean(xs: list[float]) -> str:
        return f"{statistics.fmean(xs):+.3f} ± {statistics.stdev(xs) / len(xs) ** 0.5:.3f}"

    print(f"\n4. cycle judge improve, 40 labelled outputs (12 held out), people wrong {flip:.0%} "
          f"of the time, {sims} worlds each")
    print(f"{'people':>32}  {'head moved':>14}  {'kappa before':>12}  {'kappa gain':>16}  "
          f"{'error before':>12}  {'error change':>16}")
    for name, people in (("also need the order number", "needs_order"),
                         ("follow the rubric (nothing)", "next_step")):
        rows = []
        for seed in range(sims):
            with tempfile.TemporaryDirectory() as tmp:
                rows.append(_judge_cycle(Path(tmp), 9_000 + seed, people, flip))
        kb, ka, eb, ea, moved = zip(*rows, strict=True)
        print(f"{name:>32}  {share(sum(moved), sims):>14}  {statistics.fmean(kb):>12.3f}  "
              f"{mean([a - b for a, b in zip(ka, kb, strict=True)]):>16}  "
              f"{statistics.fmean(eb):>12.1f}  "
              f"{mean([a - b for a, b in zip(ea, eb, strict=True)]):>16}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--gate-sims", type=int, default=200,
                        help="runs per gate row (each bootstraps kappa 1,000 times)")
    parser.add_argument("--cycle-sims", type=int, default=200, help="cycles per world and labels")
    parser.add_argument("--judge-sims", type=int, default=40,
                        help="worlds of cycle judge improve per kind of people")
    parser.add_argument("--only", choices=("coverage", "gate", "cycles", "judge-improve"))
    args = parser.parse_args()
    if args.only in (None, "coverage"):
        coverage(args.sims, bias=8.0)
    if args.only in (None, "gate"):
        gate(args.gate_sims)
    if args.only in (None, "cycles"):
        whole_cycles(args.cycle_sims)
    if args.only in (None, "judge-improve"):
        judge_improve(args.judge_sims)


if __name__ == "__main__":
    main()
