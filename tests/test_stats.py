"""Statistics against values computed by hand."""

import math

import pytest

from cycle.stats import (
    closest_to_mean,
    describe,
    paired_difference,
    percentile,
    t_cdf,
    t_critical,
    t_quantile,
)


def test_describe_three_values_by_hand():
    s = describe([60, 70, 80])
    # mean 70; sample sd sqrt((100 + 0 + 100) / 2) = 10; half width t(2)=4.3027 * 10 / sqrt(3)
    assert s.mean == 70 and s.sd == pytest.approx(10.0)
    assert (s.min, s.max, s.n) == (60, 80, 3)
    assert s.ci_low == pytest.approx(70 - 24.8417, abs=1e-3)
    assert s.ci_high == pytest.approx(70 + 24.8417, abs=1e-3)


def test_describe_four_values_by_hand():
    s = describe([1, 2, 3, 4])
    assert s.mean == 2.5
    assert s.sd == pytest.approx(math.sqrt(5 / 3))
    assert s.half_width == pytest.approx(3.1824 * math.sqrt(5 / 3) / 2, abs=1e-4)


def test_describe_degenerate_samples():
    one = describe([42.0])
    assert (one.mean, one.sd, one.ci_low, one.ci_high) == (42.0, 0.0, None, None)
    assert describe([]).mean is None
    same = describe([50, 50, 50])
    assert same.ci_low == same.ci_high == 50


@pytest.mark.parametrize("df, expected", [(1, 12.7062), (5, 2.5706), (30, 2.0423), (40, 2.0211),
                                          (60, 2.0003), (120, 1.9799), (1000, 1.9623)])
def test_t_critical_matches_tables(df, expected):
    assert t_critical(df) == pytest.approx(expected, abs=2e-4)


@pytest.mark.parametrize("p, df, expected", [(0.90, 19, 1.3277), (0.95, 4, 2.1318), (0.80, 1, 1.3764),
                                              (0.9875, 19, 2.4334), (0.995, 2, 9.9248), (0.05, 10, -1.8125)])
def test_t_quantile_at_any_level_matches_published_values(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, abs=2e-4)
    assert t_cdf(t_quantile(p, df), df) == pytest.approx(p, abs=1e-7)


def test_t_quantile_refuses_what_has_no_answer():
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_quantile(0.9, 0)
    with pytest.raises(ValueError, match="0 < p < 1"):
        t_quantile(1.0, 5)


def test_paired_difference_uses_common_cases_only():
    a = {"x": 50, "y": 60, "z": 70, "only_a": 0}
    b = {"x": 55, "y": 70, "z": 70, "only_b": 100}
    d = paired_difference(a, b)
    assert d.n == 3 and d.mean == pytest.approx(5.0)  # diffs 5, 10, 0
    assert d.sd == pytest.approx(5.0)
    assert d.ci_low == pytest.approx(5 - 4.3027 * 5 / math.sqrt(3), abs=1e-3)


def test_percentiles_linear_like_numpy():
    values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert percentile(values, 50) == 5.5
    assert percentile(values, 90) == pytest.approx(9.1)
    assert percentile(values, 99) == pytest.approx(9.91)
    assert percentile([], 50) is None


def test_representative_is_closest_to_mean():
    assert closest_to_mean([10, 60, 95], 55) == 1
