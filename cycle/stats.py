"""Statistics over iterations and cases: mean, sample sd, t-based 95% intervals.

No scipy: Student's t distribution function comes from the regularized
incomplete beta function (its continued fraction, as in Numerical Recipes),
and a quantile from bisection on it: exact to 1e-6 at any level and degrees
of freedom, which the one-sided tests of the acceptance rules need (90%,
97.5%, 98.75%, ...), not only the two-sided 95% of a table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

from cycle.records import Stats


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@lru_cache(maxsize=1024)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (0 < p < 1)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-9:
            break
    return (lo + hi) / 2.0


def t_critical(df: int) -> float:
    """The two-sided 95% critical value of Student's t with ``df`` degrees of freedom."""
    return t_quantile(0.975, df)


def t_80(df: int) -> float:
    """The 80% quantile of Student's t with ``df`` degrees of freedom (80% power)."""
    return t_quantile(0.80, df)


EMPTY = Stats(n=0, mean=None, sd=None, min=None, max=None, ci_low=None, ci_high=None)


#: the range of every score: a score's interval is cut to it
SCORE_SCALE = (0.0, 100.0)


def describe(values: Sequence[float], *, scale: tuple[float, float] | None = None) -> Stats:
    """Mean, sample sd, min, max and the 95% t interval of ``values``; with ``scale``
    (bounded values, such as scores), the interval is cut to it and flagged ``clipped``
    (two cases at 0 and 100 gave [-311.2, 451.2] on a 0-100 score)."""
    n = len(values)
    if n == 0:
        return EMPTY
    mean = math.fsum(values) / n
    if n == 1:
        return Stats(n=1, mean=mean, sd=0.0, min=values[0], max=values[0],
                     ci_low=None, ci_high=None)
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    sd = math.sqrt(var)
    half = t_critical(n - 1) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    clipped = scale is not None and (low < scale[0] or high > scale[1])
    if clipped:
        assert scale is not None
        low, high = max(low, scale[0]), min(high, scale[1])
    return Stats(n=n, mean=mean, sd=sd, min=min(values), max=max(values),
                 ci_low=low, ci_high=high, clipped=clipped)


#: decimals a paired difference keeps: the same score reached by another sum (a mean of
#: 3 iterations of 96.4 is 96.40000000000002, of 1 is 96.4) differs by ~1e-14, which an
#: interval of identical differences would call a credible change (and fail a CI gate)
DIFF_DECIMALS = 9


#: the range of a difference of two scores: a paired interval is cut to it
DIFF_SCALE = (-100.0, 100.0)


def paired_difference(a: Mapping[str, float], b: Mapping[str, float], *,
                      scale: tuple[float, float] | None = DIFF_SCALE) -> Stats:
    """Statistics of ``b[id] - a[id]`` over the ids both have (a paired comparison); its
    interval cut to ``scale`` (two cases moving -100 and +100 printed [-1270.6, +1270.6]
    for a change that cannot leave [-100, 100]), flagged ``clipped``."""
    common = [k for k in a if k in b]
    return describe([round(b[k] - a[k], DIFF_DECIMALS) for k in common], scale=scale)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def closest_to_mean(values: Sequence[float], mean: float) -> int:
    """Index of the value closest to ``mean`` (the first on ties): the representative run."""
    return min(range(len(values)), key=lambda i: abs(values[i] - mean))
