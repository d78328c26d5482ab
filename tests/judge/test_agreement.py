"""The judge's agreement statistics against known answers (issue 35)."""

from __future__ import annotations

import random

import pytest

from cycle.judge.agreement import Rating, alpha, kappa, measure


def seeded() -> list[Rating]:
    """30 outputs, a judge 5 points high with noise, two labelers (b labels two in three)."""
    rng = random.Random(3)
    ratings = []
    for i in range(30):
        truth = rng.uniform(0, 100)
        j = truth + rng.gauss(5, 10)
        a = truth + rng.gauss(0, 8)
        b = truth + rng.gauss(0, 8) if i % 3 else None
        ratings.append(Rating(("r", "c", i), "a", a, a > 50, j, j > 50))
        if b is not None:
            ratings.append(Rating(("r", "c", i), "b", b, b > 50, j, j > 50))
    return ratings


def test_alpha_is_krippendorffs():
    """The reference values are those of the `krippendorff` package (0.5.x) on the same
    reliability data (judge, a, b; b missing for every third output)."""
    ratings = seeded()
    assert alpha(ratings) == pytest.approx(0.8776557108765655, abs=1e-12)
    nominal = [Rating(r.output, r.labeler, None, r.person_passed, None, r.judge_passed)
               for r in ratings]
    assert alpha(nominal) == pytest.approx(0.7366666666666667, abs=1e-12)


def test_kappa_against_a_hand_count():
    # judge/person: (T,T) x4, (T,F) x1, (F,T) x1, (F,F) x4: po 0.8, pe 0.5, kappa 0.6
    pairs = [(True, True)] * 4 + [(True, False), (False, True)] + [(False, False)] * 4
    ratings = [Rating(("r", "c", i), "a", None, p, None, j) for i, (j, p) in enumerate(pairs)]
    assert kappa(ratings) == pytest.approx(0.6)
    assert kappa([Rating(("r", "c", 0), "a", None, True, None, True)] * 3) is None  # no variation


def test_a_biased_judge_is_measured_biased_with_an_interval_that_covers_it():
    rng = random.Random(7)
    ratings = []
    for i in range(80):
        truth = rng.uniform(0, 100)
        judge = truth + 8 + rng.gauss(0, 6)  # 8 points high
        ratings.append(Rating(("r", "c", i), "", truth, truth >= 70, judge, judge >= 70))
    got = measure(ratings)
    assert got.bias_ci is not None and got.bias_ci[0] < 8 < got.bias_ci[1]
    assert 6 < got.bias < 10 and got.n == 80 and got.outputs == 80
    assert got.kappa_ci is not None and got.kappa_ci[0] <= got.kappa <= got.kappa_ci[1]
    assert got.correlation > 0.9 and measure(ratings).kappa == got.kappa  # seeded: repeatable


def test_past_large_the_interval_is_normal_and_matches_the_percentile_one(monkeypatch):
    """A store's judge collects labels: past LARGE outputs the interval is the normal one
    with a bootstrapped standard error (a fifth of the resamples), and says what the
    percentile interval says; a summary asks for the intervals it shows, not all four."""
    import random

    from cycle.judge import agreement as ag

    rng = random.Random(7)
    ratings = []
    for i in range(ag.LARGE + 200):
        judge = rng.uniform(0, 100)
        person = judge + rng.gauss(0, 10)
        ratings.append(ag.Rating(output=("r", "c", i), labeler="a", judge_score=judge,
                                 judge_passed=judge >= 70, person_score=person,
                                 person_passed=person >= 70))
    normal = ag.measure(ratings, intervals=("kappa", "bias"))
    assert normal.alpha_ci is None and normal.correlation_ci is None
    monkeypatch.setattr(ag, "LARGE", 10**9)
    percentile = ag.measure(ratings, intervals=("kappa", "bias"))
    for a, b in ((normal.kappa_ci, percentile.kappa_ci), (normal.bias_ci, percentile.bias_ci)):
        assert abs(a[0] - b[0]) < 0.15 * (b[1] - b[0]) and abs(a[1] - b[1]) < 0.15 * (b[1] - b[0])
