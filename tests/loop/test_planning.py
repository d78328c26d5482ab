"""The planner's promise, tried: a suite of the cases it says a gain needs, judged as
noisily as the run it read, finds that gain about 80% of the time through the
confirmation's own test, and a suite one case short of far fewer finds it less often."""

from __future__ import annotations

import random

import pytest

from cycle.errors import ConfigError
from cycle.evals.results import build_run_result
from cycle.loop.acceptance import Evaluation, decide
from cycle.loop.planning import (
    LEVEL,
    MAX_CASES,
    cases_needed,
    detectable,
    plan,
    plan_lines,
    upper_sd,
)
from cycle.records import IterationResult, RoleUsage


def noisy_run(sd: float, *, cases: int = 30, iterations: int = 3, seed: int = 1, cost: float = 0.9):
    rng = random.Random(seed)
    results = [IterationResult(case_id=f"c{c}", iteration=i, status="passed",
                               score=min(100.0, max(0.0, 35 + c / 2 + rng.gauss(0, sd))), passed=True)
               for c in range(cases) for i in range(iterations)]
    return build_run_result(run_id="r-noisy", status="finished", threshold=70, results=results,
                            usage={"agent": RoleUsage(calls=cases * iterations, cost=cost)},
                            prompt_id="p", version="1.0.0")


def finds(gain: float, sd: float, cases: int, iterations: int, trials: int, seed: int) -> float:
    """How often the confirmation's decision accepts a candidate truly ``gain`` better."""
    rng = random.Random(seed)
    hits = 0
    for _ in range(trials):
        base, cand = {}, {}
        for c in range(cases):
            quality = rng.uniform(30, 70)
            base[f"c{c}"] = quality + sum(rng.gauss(0, sd) for _ in range(iterations)) / iterations
            cand[f"c{c}"] = quality + gain + sum(rng.gauss(0, sd) for _ in range(iterations)) / iterations
        d = decide("significant", Evaluation(run_id="a", version="1", score=None, case_scores=base),
                   Evaluation(run_id="b", version="2", score=None, case_scores=cand), alpha=LEVEL)
        hits += d.accepted
    return hits / trials


def test_the_cases_needed_find_the_gain_80_percent_of_the_time():
    """At the noise it plans on, the cases it names find the gain 80% of the time
    through the confirmation's own decision (1,000 simulated confirmations)."""
    sd, iterations, gain = 12.0, 3, 5.0
    run = noisy_run(sd, iterations=iterations, cases=60)
    p = plan(run, gain=gain, suite_cases=60, iterations=iterations)
    assert p.measured_sd == pytest.approx(sd, rel=0.15)  # read back from the run's spread
    assert p.within_sd > p.measured_sd  # planned on its upper bound
    n = p.row(iterations).cases_needed
    assert n is not None and 5 < n < 200
    rate = finds(gain, p.within_sd, n, iterations, trials=1000, seed=7)
    assert 0.76 <= rate <= 0.86, rate  # 80% promised (Monte Carlo error about 1.3%)
    assert finds(gain, p.within_sd, max(3, n // 3), iterations, trials=300, seed=8) < 0.6


def test_the_noise_bound_covers_the_true_noise_80_percent_of_the_time():
    """400 pilot runs of 40 cases x 3 iterations with a true sd of 10: the upper bound
    the plan uses is at least 10 in about 80% of them (the point estimate: about half)."""
    rng = random.Random(3)
    covered = 0
    for _ in range(400):
        sq = 0.0
        for _ in range(40):
            xs = [rng.gauss(0, 10.0) for _ in range(3)]
            m = sum(xs) / 3
            sq += sum((x - m) ** 2 for x in xs)
        covered += upper_sd((sq / 80) ** 0.5, 80) >= 10.0
    assert 0.74 <= covered / 400 <= 0.86, covered


def test_cases_needed_is_the_fewest_that_reach_the_gain():
    for sd_diff, gain in ((8.0, 3.0), (1.0, 0.5), (20.0, 10.0)):
        n = cases_needed(gain, sd_diff)
        assert n is not None and detectable(n, sd_diff) <= gain
        assert n == 3 or detectable(n - 1, sd_diff) > gain
    assert cases_needed(0.001, 50.0) is None  # beyond MAX_CASES: said, not a huge number
    assert detectable(2, 5.0) is None


def test_more_iterations_need_fewer_cases_and_the_budget_buys_rounds():
    p = plan(noisy_run(10.0), gain=4, suite_cases=30, iterations=3, budget=10.0, improver_cost=0.05)
    needed = [r.cases_needed for r in p.rows]
    assert needed == sorted(needed, reverse=True) and needed[0] > needed[-1]
    assert p.cost_per_iteration == pytest.approx(0.01)  # $0.90 over 90 case-iterations
    one = p.row(3).evaluation_cost
    assert one == pytest.approx(0.9)
    # baseline + confirmation (two evaluations grown up to twice) + rounds of (one + improver)
    assert p.rounds == int((10.0 - 5 * one) // (one + 0.05))
    text = "\n".join(plan_lines(p))
    assert "<- set" in text and "improving round(s)" in text and "Assumed:" in text


def test_one_iteration_cannot_be_planned_from():
    with pytest.raises(ConfigError) as e:
        plan(noisy_run(10.0, iterations=1), gain=3, suite_cases=30, iterations=1)
    assert "one iteration cannot tell" in str(e.value) and "-n 3" in e.value.hint
    assert MAX_CASES >= 100_000
