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

Each share is printed with its Monte Carlo standard error, sqrt(p(1-p)/sims).
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--gate-sims", type=int, default=200,
                        help="runs per gate row (each bootstraps kappa 1,000 times)")
    args = parser.parse_args()
    coverage(args.sims, bias=8.0)
    gate(args.gate_sims)


if __name__ == "__main__":
    main()
