"""Statistics over iterations and cases: mean, sample sd, t-based 95% intervals.

No scipy: the two-sided 95% critical values of Student's t are tabled for
1-30 degrees of freedom, and above that come from the Cornish-Fisher
expansion around the normal quantile (error < 1e-4 for df > 30).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from cycle.records import Stats

#: t_{0.975, df} for df = 1..30
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)
_Z975 = 1.959963984540054
#: t_{0.80, df} for df = 1..30 (for power: a one-sided 80% quantile)
_T80 = (
    1.3764, 1.0607, 0.9785, 0.9410, 0.9195, 0.9057, 0.8960, 0.8889, 0.8834, 0.8791,
    0.8755, 0.8726, 0.8702, 0.8681, 0.8662, 0.8647, 0.8633, 0.8620, 0.8610, 0.8600,
    0.8591, 0.8583, 0.8575, 0.8569, 0.8562, 0.8557, 0.8551, 0.8546, 0.8542, 0.8538,
)
_Z80 = 0.8416212335729143


def t_critical(df: int) -> float:
    """The two-sided 95% critical value of Student's t with ``df`` degrees of freedom."""
    return _t(df, _T975, _Z975)


def t_80(df: int) -> float:
    """The 80% quantile of Student's t with ``df`` degrees of freedom (80% power)."""
    return _t(df, _T80, _Z80)


def _t(df: int, table: tuple[float, ...], z: float) -> float:
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(table):
        return table[df - 1]
    z3, z5, z7 = z**3, z**5, z**7
    return (
        z
        + (z3 + z) / (4 * df)
        + (5 * z5 + 16 * z3 + 3 * z) / (96 * df**2)
        + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * df**3)
    )


EMPTY = Stats(n=0, mean=None, sd=None, min=None, max=None, ci_low=None, ci_high=None)


def describe(values: Sequence[float]) -> Stats:
    """Mean, sample sd, min, max and the 95% t interval of ``values``."""
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
    return Stats(n=n, mean=mean, sd=sd, min=min(values), max=max(values),
                 ci_low=mean - half, ci_high=mean + half)


def paired_difference(a: Mapping[str, float], b: Mapping[str, float]) -> Stats:
    """Statistics of ``b[id] - a[id]`` over the ids both have (a paired comparison)."""
    common = [k for k in a if k in b]
    return describe([b[k] - a[k] for k in common])


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
