"""How far a judge agrees with people: per criterion, over the outputs people labelled.

- *agreement*: the share of labels whose pass/fail the judge's verdict matches;
- *kappa*: Cohen's kappa of the judge and the people on pass/fail (each label a pair with
  the judge's verdict), beside the *base rate* (the people's pass share): a kappa near 0
  with a base rate near 0 or 1 says the labels cannot tell much yet;
- *alpha*: Krippendorff's alpha over every rater of each output (the judge and each
  labeler, labels missing where a labeler did not label), on the 0-100 scores with the
  interval metric when every rating has a score, else on pass/fail (nominal);
- *bias*: judge minus person, in points of the 0-100 scale, averaged over labels with a
  score; *correlation*: Pearson's r of the two scores.

A judge panel's members' agreement with each other (``panel_alpha``) is Krippendorff's alpha
too, over the members' 0-100 scores of each judged output (interval metric), computed from
each output's count, sum and sum of squares of scores.

Each comes with a bootstrap 95% interval (outputs resampled with their labels, 1,000
times, a fixed seed: the same labels give the same figures). Past ``LARGE`` labelled
outputs the interval is the normal one with the bootstrap's standard error from
``LARGE_RESAMPLES`` resamples: the statistic's sampling distribution is near normal
there, and the percentile interval's thousand resamples of every label took 16 s a
criterion at 2,000 labels, at every run's end. (A panel's alpha past ``LARGE`` outputs takes
its standard error from the jackknife instead, exact and linear in the outputs: a run of
100,000 cases ends in a second, not in the minutes 200 resamples would take.) A figure the labels leave undefined
(kappa when everyone said pass) is None.

Under ``MIN_OUTPUTS`` labelled outputs no interval is given: a bootstrap of a handful of
outputs resamples a handful of values, and its percentile interval is far narrower than
the truth (two outputs gave the bias "[d1, d2]", whatever the judge). When every label
agrees with the judge (kappa 1) every resample agrees too, and the bootstrap's interval
is [1, 1] whatever the number of labels; kappa's lower bound is then the one the
observed agreement's exact (Clopper-Pearson) 95% lower bound gives, over the labelled
outputs, at the same chance agreement. A label with no judge verdict beside it (of an
errored iteration, or of a criterion the judge did not score) is counted apart
(``unmatched``), not in ``n``.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence

from msgspec import Struct, field

#: bootstrap resamples for each interval
RESAMPLES = 1000
#: labelled outputs past which an interval is normal, its standard error bootstrapped from
#: LARGE_RESAMPLES resamples (see the module docstring)
LARGE = 400
LARGE_RESAMPLES = 200
#: the two-sided 95% normal quantile
Z95 = 1.959963984540054
#: labelled outputs under which a figure has no interval (see the module docstring)
MIN_OUTPUTS = 10


class Rating(Struct, frozen=True):
    """One label of one output, beside the judge's verdict on it."""

    #: the output labelled: (run, case, iteration)
    output: tuple[str, str, int]
    labeler: str
    person_score: float | None
    person_passed: bool | None
    judge_score: float | None
    judge_passed: bool | None


class Agreement(Struct):
    n: int
    outputs: int
    agreement: float | None = None
    kappa: float | None = None
    kappa_ci: tuple[float, float] | None = None
    base_rate: float | None = None
    alpha: float | None = None
    alpha_ci: tuple[float, float] | None = None
    bias: float | None = None
    bias_ci: tuple[float, float] | None = None
    correlation: float | None = None
    correlation_ci: tuple[float, float] | None = None
    labelers: list[str] = field(default_factory=list)
    #: labels with no judge verdict beside them (left out of every figure)
    unmatched: int = 0
    #: figures whose every resample gave one value: no interval (see ``measure``)
    flat: list[str] = field(default_factory=list)

    def notes(self) -> list[str]:
        """What a reader of the figures must know: why one is missing or has no interval."""
        out = []
        if self.unmatched:
            out.append(f"{self.unmatched} label(s) have no judge verdict beside them (an "
                       "errored iteration, or a criterion the judge did not score): left out")
        if self.n and self.kappa is None and self.base_rate is not None:
            out.append("kappa undefined: the judge and the people gave one verdict only "
                       "(label outputs the judge passes and fails)")
        if 0 < self.outputs < MIN_OUTPUTS:
            out.append(f"no 95% intervals on {self.outputs} labelled output(s): under "
                       f"{MIN_OUTPUTS} a bootstrap's interval would be far too narrow")
        elif self.kappa == 1.0 and self.kappa_ci is not None:
            out.append("every label agrees with the judge: kappa's lower bound is from the "
                       "exact interval of the agreement (a bootstrap would say [1, 1])")
        if self.flat:
            out.append(f"no 95% interval for {' and '.join(self.flat)}: every resample of the "
                       f"{self.outputs} labelled outputs gave the same value, which is no "
                       "certainty, only no spread to measure (label more outputs, those "
                       "where the judge and people may differ)")
        return out


def _pass_pairs(ratings: Sequence[Rating]) -> list[tuple[bool, bool]]:
    return [(r.judge_passed, r.person_passed) for r in ratings
            if r.judge_passed is not None and r.person_passed is not None]


def raw_agreement(ratings: Sequence[Rating]) -> float | None:
    pairs = _pass_pairs(ratings)
    return sum(j == p for j, p in pairs) / len(pairs) if pairs else None


def kappa(ratings: Sequence[Rating]) -> float | None:
    """Cohen's kappa of judge and person on pass/fail."""
    pairs = _pass_pairs(ratings)
    if not pairs:
        return None
    n = len(pairs)
    observed = sum(j == p for j, p in pairs) / n
    judge_yes = sum(j for j, _ in pairs) / n
    person_yes = sum(p for _, p in pairs) / n
    expected = judge_yes * person_yes + (1 - judge_yes) * (1 - person_yes)
    if expected >= 1.0:
        return None  # one answer only, from both: chance explains everything
    return (observed - expected) / (1 - expected)


def bias(ratings: Sequence[Rating]) -> float | None:
    diffs = [r.judge_score - r.person_score for r in ratings
             if r.judge_score is not None and r.person_score is not None]
    return statistics.fmean(diffs) if diffs else None


def correlation(ratings: Sequence[Rating]) -> float | None:
    pairs = [(r.judge_score, r.person_score) for r in ratings
             if r.judge_score is not None and r.person_score is not None]
    if len(pairs) < 3:
        return None
    xs, ys = zip(*pairs, strict=True)
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:  # a constant: no correlation to speak of
        return None


def alpha(ratings: Sequence[Rating]) -> float | None:
    """Krippendorff's alpha over the judge and every labeler, per output."""
    scored = all(r.person_score is not None and r.judge_score is not None for r in ratings)
    units: dict[tuple[str, str, int], dict[str, float]] = {}
    for r in ratings:
        values = units.setdefault(r.output, {})
        if scored:
            judge, person = r.judge_score, r.person_score
        else:
            judge = None if r.judge_passed is None else float(r.judge_passed)
            person = None if r.person_passed is None else float(r.person_passed)
        if judge is not None:
            values["\0judge"] = judge
        if person is not None:
            values[f"person {r.labeler}"] = person
    pairable = [list(v.values()) for v in units.values() if len(v) >= 2]
    n = sum(len(v) for v in pairable)
    if n < 2:
        return None

    def delta(a: float, b: float) -> float:
        return (a - b) ** 2 if scored else float(a != b)

    observed = sum(sum(delta(a, b) for i, a in enumerate(v) for j, b in enumerate(v) if i != j)
                   / (len(v) - 1) for v in pairable) / n
    every = [x for v in pairable for x in v]
    if scored:  # sum over ordered pairs of (a - b)^2 = 2 n sum((x - mean)^2)
        mean = statistics.fmean(every)
        spread = 2 * n * sum((x - mean) ** 2 for x in every)
    else:
        counts = {x: every.count(x) for x in set(every)}
        spread = n * n - sum(c * c for c in counts.values())
    expected = spread / (n * (n - 1))
    if expected == 0:
        return None
    return 1 - observed / expected


#: what each figure can be: a normal interval (past ``LARGE``) is cut to it (kappa 0.98
#: with a standard error of 0.015 gave [0.95, 1.01])
RANGES = {"kappa": (-1.0, 1.0), "alpha": (-math.inf, 1.0), "bias": (-100.0, 100.0),
          "correlation": (-1.0, 1.0)}


def _cut(bounds: tuple[float, float], low: float, high: float) -> tuple[float, float]:
    return max(bounds[0], low), min(bounds[1], high)


def interval(ratings: Sequence[Rating], stat: Callable[[Sequence[Rating]], float | None],
              rng: random.Random, bounds: tuple[float, float] = (-math.inf, math.inf)
              ) -> tuple[float, float] | None:
    """The bootstrap 95% interval of ``stat``, resampling outputs (their labels together)."""
    by_output: dict[tuple[str, str, int], list[Rating]] = {}
    for r in ratings:
        by_output.setdefault(r.output, []).append(r)
    groups = list(by_output.values())
    if len(groups) < MIN_OUTPUTS:
        return None
    large = len(groups) > LARGE
    resamples = LARGE_RESAMPLES if large else RESAMPLES
    values = []
    for _ in range(resamples):
        sample = [r for group in rng.choices(groups, k=len(groups)) for r in group]
        value = stat(sample)
        if value is not None and not math.isnan(value):
            values.append(value)
    if len(values) < resamples // 2:
        return None
    if large:
        centre, spread = stat(ratings), statistics.stdev(values)
        if centre is None:
            return None
        return _cut(bounds, centre - Z95 * spread, centre + Z95 * spread)
    values.sort()
    return (values[int(0.025 * len(values))], values[min(len(values) - 1,
                                                          int(0.975 * len(values)))])


#: the figures with an interval, by name
FIGURES = ("kappa", "alpha", "bias", "correlation")


def measure(ratings: Sequence[Rating], *, intervals: Sequence[str] = FIGURES) -> Agreement:
    """Every figure of one criterion's labels, with the intervals of ``intervals`` (the
    others None: a one-line summary needs two of the four)."""
    rng = random.Random(0)
    matched = [r for r in ratings if r.judge_score is not None or r.judge_passed is not None]
    unmatched = len(ratings) - len(matched)
    ratings = matched
    people = [r.person_passed for r in ratings if r.person_passed is not None]
    out = Agreement(
        n=len(ratings), outputs=len({r.output for r in ratings}), unmatched=unmatched,
        agreement=raw_agreement(ratings), kappa=kappa(ratings),
        base_rate=sum(people) / len(people) if people else None, alpha=alpha(ratings),
        bias=bias(ratings), correlation=correlation(ratings),
        labelers=sorted({r.labeler for r in ratings}))
    for name, stat in (("kappa", kappa), ("alpha", alpha), ("bias", bias),
                       ("correlation", correlation)):
        if name in intervals and getattr(out, name) is not None:
            ci = interval(ratings, stat, rng, RANGES[name])
            if name == "kappa" and ci is not None and out.kappa >= 1.0 - 1e-12:
                ci = (_perfect_kappa_low(ratings), 1.0)
            elif ci is not None and ci[1] - ci[0] < 1e-9:
                # every output alike (each difference the same, every score agreeing): the
                # bootstrap's [x, x] would claim a certainty a dozen outputs cannot give
                out.flat.append(name)
                ci = None
            setattr(out, f"{name}_ci", ci)
    return out


def _perfect_kappa_low(ratings: Sequence[Rating]) -> float:
    """Kappa's 95% lower bound when every label agrees with the judge: the exact
    (Clopper-Pearson) lower bound of the agreement, all of n outputs agreeing, 0.025 ** (1/n),
    at the chance agreement observed; n counts outputs, not labels (an output's labels
    agree together)."""
    pairs = _pass_pairs(ratings)
    n = len({r.output for r in ratings
             if r.judge_passed is not None and r.person_passed is not None})
    judge_yes = sum(j for j, _ in pairs) / len(pairs)
    person_yes = sum(p for _, p in pairs) / len(pairs)
    expected = judge_yes * person_yes + (1 - judge_yes) * (1 - person_yes)
    return max(-1.0, (0.025 ** (1 / n) - expected) / (1 - expected))


#: one output a panel judged: its members' scores as (how many, sum, sum of squares)
Unit = tuple[int, float, float]


def _interval_alpha(n: int, within: float, total: float, squares: float) -> float | None:
    """Krippendorff's alpha, interval metric, from pooled sums: ``n`` pairable values,
    ``within`` the sum over outputs of (m q - s^2) / (m - 1), ``total`` and ``squares``
    the sum and the sum of squares of every value. None when every value is the same."""
    spread = n * squares - total * total
    if n < 2 or spread <= 1e-9 * max(1.0, squares):
        return None
    return 1 - (n - 1) * within / spread


def _within(unit: Unit) -> float:
    """One output's disagreement: (m q - s^2) / (m - 1), half its ordered pairs' squared
    differences over m - 1 (never below 0: rounding can take a tie there)."""
    m, s, q = unit
    return max(0.0, m * q - s * s) / (m - 1)


def panel_alpha(units: Sequence[Unit]) -> tuple[float | None, tuple[float, float] | None]:
    """Krippendorff's alpha of a panel's members over the outputs they scored (interval
    metric), and its 95% interval: the bootstrap's over outputs (``RESAMPLES``, a fixed
    seed) up to ``LARGE`` outputs, past it the normal one with the jackknife's standard
    error. An output with fewer than two scores is not pairable and left out."""
    pairable = [u for u in units if u[0] >= 2]
    parts = [(m, _within((m, s, q)), s, q) for m, s, q in pairable]
    n, w, t, sq = (sum(x[i] for x in parts) for i in range(4))
    value = _interval_alpha(int(n), w, t, sq)
    if value is None or len(parts) < MIN_OUTPUTS or w <= 0:
        # w 0: every member scored every output alike, and every resample would say
        # [1, 1], a certainty the outputs cannot give (as ``measure``'s flat figures)
        return value, None
    if len(parts) > LARGE:
        # leave each output out in turn: every sum less its part, in one pass
        leave = [_interval_alpha(int(n - m), w - wi, t - s, sq - q) for m, wi, s, q in parts]
        got = [x for x in leave if x is not None]
        if len(got) < 2:
            return value, None
        mean = statistics.fmean(got)
        se = math.sqrt((len(got) - 1) / len(got) * sum((x - mean) ** 2 for x in got))
        return value, (value - Z95 * se, min(1.0, value + Z95 * se))
    rng = random.Random(0)
    values = []
    for _ in range(RESAMPLES):
        sample = rng.choices(parts, k=len(parts))
        a = _interval_alpha(sum(x[0] for x in sample), sum(x[1] for x in sample),
                            sum(x[2] for x in sample), sum(x[3] for x in sample))
        if a is not None:
            values.append(a)
    if len(values) < RESAMPLES // 2:
        return value, None
    values.sort()
    return value, (values[int(0.025 * len(values))],
                   values[min(len(values) - 1, int(0.975 * len(values)))])
