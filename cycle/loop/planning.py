"""How many cases and iterations a gain needs, and what a budget buys: a cycle's plan.

A cycle moves ``head`` only when the confirmation (fresh samples of both versions,
paired by case) finds the gain at one-sided ``CONFIRM_ALPHA``, split over its
``CONFIRM_LOOKS`` looks. Whether it can find a gain of G points depends on the noise
of a case's mean score: each version's case mean varies by ``sd / sqrt(k)`` over k
iterations, so their paired difference by ``sqrt(2 / k) * sd`` (floored at
``MIN_SD``, as the acceptance floors it). A stored run of two iterations or more
estimates that sd (its pooled within-case spread); the plan takes the estimate's upper
80% bound, so that a pilot run that happened to be quiet does not promise too much.
It gives, per number of iterations, the smallest gain the suite's cases find 80% of
the time, the cases a requested gain needs and what one evaluation costs at the run's
price per case-iteration; and how many improving rounds a budget leaves after the
baseline and the confirmation.

Assumed: the gain is alike across cases (a gain that varies from case to case needs
more cases than this says), and the candidate's noise is the baseline's. A run of one
iteration cannot tell a case's noise from its difference with other cases: the plan
refuses it and says to run two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from msgspec import Struct

from cycle.errors import ConfigError
from cycle.loop.acceptance import CONFIRM_ALPHA, CONFIRM_LOOKS, MIN_CASES, MIN_SD
from cycle.records import RunResult

#: the chance of finding a true gain of the requested size
POWER = 0.80
#: the one-sided level of each of the confirmation's looks
LEVEL = CONFIRM_ALPHA / CONFIRM_LOOKS
#: the iterations a plan shows (and the run's own, and the setting's)
ITERATIONS = (1, 2, 3, 5, 8, 10)
#: no plan asks for more cases than this
MAX_CASES = 100_000


class PlanRow(Struct, frozen=True):
    """One choice of iterations per case."""

    iterations: int
    #: the spread of a case's paired difference at these iterations (points)
    sd_diff: float
    #: the smallest gain the suite's cases find with POWER at LEVEL (None: too few cases)
    detectable: float | None
    #: the cases the requested gain needs (None: more than MAX_CASES)
    cases_needed: int | None
    #: dollars of one evaluation of the suite at these iterations
    evaluation_cost: float


class Plan(Struct, frozen=True):
    run_id: str
    version: str | None
    gain: float
    suite_cases: int
    #: the within-case standard deviation of one iteration's score (points), as measured
    measured_sd: float
    #: its upper 80% bound, which the plan uses
    within_sd: float
    #: the iterations the cycle is set to run
    iterations: int
    #: dollars per case-iteration (agent and judge), from the run
    cost_per_iteration: float
    rows: tuple[PlanRow, ...]
    offline: bool = False
    budget: float | None = None
    #: improving rounds the budget pays for at the set iterations, after the baseline
    #: and the confirmation (None: no budget)
    rounds: int | None = None
    #: dollars of the improver's call per round (0 when unknown)
    improver_cost: float = 0.0
    level: float = LEVEL
    power: float = POWER

    def row(self, iterations: int) -> PlanRow:
        return next(r for r in self.rows if r.iterations == iterations)


def _z_sum(n: int) -> float:
    from cycle.stats import t_quantile

    return t_quantile(1 - LEVEL, n - 1) + t_quantile(POWER, n - 1)


def detectable(cases: int, sd_diff: float) -> float | None:
    """The smallest true gain ``cases`` paired cases find with POWER at LEVEL."""
    if cases < MIN_CASES:
        return None
    return _z_sum(cases) * sd_diff / math.sqrt(cases)


def cases_needed(gain: float, sd_diff: float) -> int | None:
    """The fewest paired cases that find ``gain`` with POWER at LEVEL (None: more than
    MAX_CASES)."""
    def enough(n: int) -> bool:
        found = detectable(n, sd_diff)
        return found is not None and found <= gain

    if not enough(MAX_CASES):
        return None
    lo, hi = MIN_CASES, MIN_CASES
    while not enough(hi):
        lo, hi = hi, min(hi * 2, MAX_CASES)
    while lo < hi:  # the detectable gain falls as cases grow
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def upper_sd(sd: float, df: int, confidence: float = POWER) -> float:
    """The one-sided ``confidence`` upper bound of a standard deviation estimated as
    ``sd`` on ``df`` degrees of freedom (the chi-square bound, Wilson and Hilferty's
    approximation of its quantile): a pilot run that happened to be quiet does not
    promise too much."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - confidence)
    q = df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3
    return sd * math.sqrt(df / q) if q > 0 else math.inf


def within_sd(result: RunResult) -> tuple[float, int]:
    """The pooled within-case standard deviation of a run's scores and its degrees of
    freedom (the iterations beyond each case's first)."""
    judged = [c.stats for c in result.cases.values() if c.stats.n >= 2 and c.stats.sd is not None]
    if not judged:
        most = max((c.stats.n for c in result.cases.values()), default=0)
        raise ConfigError(
            f"run {result.run_id} judged each case {most} time(s): one iteration cannot tell "
            "a case's noise from the difference between cases",
            field="run.iterations", hint="Run two iterations or more first: cycle run -n 3")
    df = sum(s.n - 1 for s in judged)
    return math.sqrt(sum((s.n - 1) * s.sd ** 2 for s in judged) / df), df


def plan(result: RunResult, *, gain: float, suite_cases: int, iterations: int,
         budget: float | None = None, improver_cost: float = 0.0,
         choices: Sequence[int] = ITERATIONS) -> Plan:
    """The plan of a cycle finding ``gain`` points on ``suite_cases`` cases, from the
    spread and price of ``result`` (a stored run of the suite)."""
    if gain <= 0:
        raise ConfigError(f"the gain to find must be above 0 points, got {gain:g}",
                          field="--gain", hint="e.g. cycle plan --gain 3")
    measured, df = within_sd(result)
    sd = upper_sd(measured, df)
    per_iteration = result.suite.cost / max(result.suite.iterations, 1)
    rows = []
    for k in sorted({*choices, iterations}):
        sd_diff = max(math.sqrt(2.0 / k) * sd, MIN_SD)
        rows.append(PlanRow(iterations=k, sd_diff=sd_diff, detectable=detectable(suite_cases, sd_diff),
                            cases_needed=cases_needed(gain, sd_diff),
                            evaluation_cost=suite_cases * k * per_iteration))
    rounds = None
    if budget is not None:
        one = suite_cases * iterations * per_iteration
        # the baseline, then per round a candidate and the improver's call, then the
        # confirmation's two fresh evaluations (which may grow to twice the iterations)
        fixed = one + 2 * 2 * one
        per_round = one + improver_cost
        rounds = (max(0, int((budget - fixed) // per_round)) if per_round > 0 else None)
    return Plan(run_id=result.run_id, version=result.version, gain=gain, suite_cases=suite_cases,
                measured_sd=measured, within_sd=sd, iterations=iterations, cost_per_iteration=per_iteration,
                rows=tuple(rows), offline=result.offline, budget=budget, rounds=rounds,
                improver_cost=improver_cost)


def plan_lines(p: Plan) -> list[str]:
    """The plan as the console shows it."""
    level = f"{p.level * 100:.2f}".rstrip("0").rstrip(".")
    source = f"From run {p.run_id} ({p.version or 'unversioned'}" + (
        ", offline model)" if p.offline else ")")
    if p.measured_sd == 0:
        noise = (f"{source}: a case's score does not vary from one iteration to the next (a "
                 f"deterministic model): the acceptance's floor of {MIN_SD:g} point is planned on")
    else:
        noise = (f"{source}: a case's score varies by {p.measured_sd:.1f} points from one "
                 f"iteration to the next (planned on {p.within_sd:.1f}, its upper 80% bound)")
    head = (f"  {'iterations':>10}  {'finds with ' + str(p.suite_cases) + ' cases':>22}  "
            f"{'cases needed':>12}  {'one evaluation':>14}")
    goal = (f"To find a gain of {p.gain:g} points {p.power:.0%} of the time at the "
            f"confirmation's level (one-sided {level}% per look):")
    lines = [noise, goal, "", head]
    for r in p.rows:
        found = "too few cases" if r.detectable is None else f"{r.detectable:.1f} points"
        needed = f"> {MAX_CASES:,}" if r.cases_needed is None else f"{r.cases_needed:,}"
        mark = "  <- set" if r.iterations == p.iterations else ""
        lines.append(f"  {r.iterations:>10}  {found:>22}  {needed:>12}  "
                     f"{'$' + format(r.evaluation_cost, '.4f'):>14}{mark}")
    now = p.row(p.iterations)
    lines.append("")
    suite = f"The suite as set ({p.suite_cases} cases x {p.iterations} iterations)"
    if now.detectable is not None and now.detectable <= p.gain:
        lines.append(f"{suite} finds {p.gain:g} points.")
    else:
        fits = [r for r in p.rows if r.cases_needed is not None and r.cases_needed <= p.suite_cases]
        hint = (f"set run.iterations: {fits[0].iterations}" if fits
                else f"add cases (at least {now.cases_needed:,} at {p.iterations} iterations)"
                if now.cases_needed is not None else "add cases and iterations")
        lines.append(f"{suite} will often miss a gain of {p.gain:g} points: {hint}.")
    if p.budget is not None:
        if p.rounds is None:
            lines.append(f"The cycle costs nothing here: a budget of ${p.budget:.2f} does not "
                         "limit its rounds.")
        else:
            improver = f" and the improver's ${p.improver_cost:.4f}" if p.improver_cost else ""
            lines.append(f"A budget of ${p.budget:.2f} pays for the baseline, the confirmation "
                         f"and {p.rounds} improving round(s) (each ${now.evaluation_cost:.4f}"
                         f"{improver}).")
    lines.append("Assumed: the gain is alike across cases (one that varies by case needs more "
                 "cases) and the candidate is as noisy as this run.")
    return lines
