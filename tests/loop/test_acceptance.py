"""Acceptance rules on constructed per-case scores."""

from __future__ import annotations

from cycle.loop.acceptance import Evaluation, decide


def ev(scores: dict[str, float], passed: dict[str, bool] | None = None, errors: int = 0) -> Evaluation:
    mean = sum(scores.values()) / len(scores) if scores else None
    return Evaluation(run_id="r", version="v", score=mean, case_scores=scores,
                      case_passed=passed or {k: v >= 70 for k, v in scores.items()}, errors=errors)


BASE = ev({"a": 50, "b": 60, "c": 70, "d": 40})


def test_significant_accepts_a_consistent_gain() -> None:
    d = decide("significant", BASE, ev({"a": 60, "b": 68, "c": 79, "d": 52}))
    assert d.accepted and d.ci_low is not None and d.ci_low > 0
    assert "significant" in d.reason and "95% CI" in d.reason


def test_significant_rejects_a_noisy_gain_that_improved_accepts() -> None:
    noisy = ev({"a": 90, "b": 55, "c": 72, "d": 30})  # mean +6.75, but one case drops
    s = decide("significant", BASE, noisy)
    i = decide("improved", BASE, noisy)
    assert not s.accepted and "not significant" in s.reason
    assert i.accepted and i.delta == 6.75


def test_improved_rejects_a_drop_and_always_accepts_it() -> None:
    worse = ev({"a": 40, "b": 50, "c": 60, "d": 30})
    assert not decide("improved", BASE, worse).accepted
    a = decide("always", BASE, worse)
    assert a.accepted and a.delta == -10


def test_a_required_case_that_passed_and_now_fails_blocks_acceptance() -> None:
    before = ev({"a": 80, "b": 60, "c": 70, "d": 40})
    after = ev({"a": 65, "b": 90, "c": 95, "d": 80})
    d = decide("significant", before, after, required={"a"})
    assert not d.accepted and d.regressions == ("a",)
    assert decide("improved", before, after, required={"b"}).accepted
    assert not decide("improved", before, after, required={"a"}).accepted


def test_too_few_cases_for_an_interval_and_no_common_cases() -> None:
    one = decide("significant", ev({"a": 10}), ev({"a": 90}))
    assert not one.accepted and "too few" in one.reason
    assert decide("improved", ev({"a": 10}), ev({"a": 90})).accepted
    none = decide("improved", BASE, ev({}, errors=4))
    assert not none.accepted and "errors: 4" in none.reason
