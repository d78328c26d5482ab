"""Acceptance rules on constructed per-case scores."""

from __future__ import annotations

from cycle.loop.acceptance import Evaluation, PairwiseTest, decide


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


def test_identical_differences_are_not_significant_by_a_zero_width_interval() -> None:
    """A deterministic model gives every case the same +0.5: the sd is 0, but a gain below
    a judge's resolution is no evidence (the sd is floored at MIN_SD)."""
    from cycle.loop.acceptance import MIN_SD

    d = decide("significant", BASE, ev({k: v + 0.5 for k, v in BASE.case_scores.items()}))
    assert not d.accepted and d.ci_low is not None and d.ci_low < 0 < d.ci_high
    assert round(d.ci_high - d.delta, 4) == round(3.1824 * MIN_SD / 2, 4)  # t(3) x 1 / sqrt(4)
    big = decide("significant", BASE, ev({k: v + 5 for k, v in BASE.case_scores.items()}))
    assert big.accepted  # a real, consistent gain still is


def test_errors_count_against_the_version_that_errored() -> None:
    """A candidate that errors on the cases it would lose cannot win by dropping them."""
    gains = ev({"a": 60, "b": 70, "c": 80})  # +10 on three cases ...
    erring = Evaluation(run_id="r", version="v", score=70.0, case_scores=gains.case_scores,
                        errored_cases=frozenset({"d"}), errors=3)  # ... and d only errored
    d = decide("improved", BASE, erring)
    assert d.delta == (10 + 10 + 10 - 40) / 4  # d counted as 0 against the candidate
    assert not d.accepted and "1 case(s) that errored counted as 0" in d.reason
    dead = Evaluation(run_id="r", version="v", score=None, case_scores={},
                      errored_cases=frozenset({"a", "b", "c", "d"}))
    d = decide("improved", BASE, dead)
    assert not d.accepted and "4 case(s) that errored counted as 0" in d.reason
    assert "no case has a score" in decide("significant", dead, dead).reason


def test_too_few_cases_for_significant_says_the_fix() -> None:
    small = decide("significant", ev({"a": 50, "b": 60}), ev({"a": 90, "b": 95}))
    assert not small.accepted
    assert "2 paired case(s) are too few to test (at least 3" in small.reason
    assert "add cases, or set improve.acceptance: improved" in small.reason


def test_detectable_gain_shrinks_with_cases_and_iterations() -> None:
    from cycle.loop.acceptance import detectable_gain

    few = detectable_gain([10.0] * 5, cases=5, iterations=3)
    many = detectable_gain([10.0] * 20, cases=20, iterations=3)
    more_iterations = detectable_gain([10.0] * 5, cases=5, iterations=12)
    assert few > many and few > more_iterations
    # 20 cases x 3 iterations, judge sd 10: (t(19) + t80(19)) x sqrt(2/3) x 10 / sqrt(20)
    assert round(many, 2) == round((2.0930 + 0.8610) * (2 / 3) ** 0.5 * 10 / 20 ** 0.5, 2)
    assert detectable_gain([0.0] * 5, cases=5, iterations=3) > 0  # floored, never 0
    assert detectable_gain([5.0], cases=1, iterations=3) is None


def test_the_level_is_one_sided_and_the_callers() -> None:
    """A gain whose 95% interval reaches zero is still likely at one-sided 90%: exploring
    keeps it, the confirmation's 2.5% does not (and says more iterations could decide)."""
    gain = ev({"a": 56, "b": 60, "c": 75, "d": 44})  # diffs 6, 0, 5, 4: mean +3.75
    strict = decide("significant", BASE, gain)
    loose = decide("significant", BASE, gain, alpha=0.10)
    assert not strict.accepted and strict.inconclusive and "one-sided 97.5% bound" in strict.reason
    assert loose.accepted and "one-sided 90% bound" in loose.reason
    assert loose.bound is not None and strict.bound is not None and loose.bound > 0 > strict.bound
    assert not decide("significant", BASE, ev(BASE.case_scores)).inconclusive  # no gain at all


def test_held_out_cases_that_did_not_gain_reject_an_overfit_candidate() -> None:
    before = ev({"a": 50, "b": 60, "c": 70, "d": 40, "e": 55, "f": 65})
    overfit = ev({"a": 80, "b": 90, "c": 95, "d": 75, "e": 50, "f": 62})  # seen up, held-out down
    d = decide("improved", before, overfit, held_out={"e", "f"})
    assert not d.accepted and "overfitting" in d.reason
    assert d.seen_delta == 30 and d.held_out_delta == -4
    assert "seen +30.00, held-out -4.00" in d.reason
    general = ev({k: v + 8 for k, v in before.case_scores.items()})
    ok = decide("significant", before, general, held_out={"e", "f"})
    assert ok.accepted and ok.held_out_delta == 8
    assert decide("significant", before, general).held_out_delta is None  # no held-out: not split


def pw(wins: int, losses: int, ties: int = 0) -> PairwiseTest:
    from cycle.judge.pairwise import sign_test_greater

    return PairwiseTest(criterion="tone", wins=wins, losses=losses, ties=ties,
                        pairs=2 * (wins + losses + ties), order_flips=0.0,
                        p_value=sign_test_greater(wins, losses))


def test_the_one_sided_sign_test_is_exact() -> None:
    from cycle.judge.pairwise import sign_test_greater

    assert sign_test_greater(5, 0) == 1 / 32
    assert sign_test_greater(7, 1) == 9 / 256  # 8 of 8 or 7 of 8
    assert sign_test_greater(0, 0) == 1.0 and sign_test_greater(2, 2) == 11 / 16


def test_pairwise_alone_decides_at_the_callers_level() -> None:
    flat = ev({"a": 50, "b": 50, "c": 50, "d": 50})
    d = decide("significant", flat, flat, pairwise=[pw(7, 0)], absolute=False, alpha=0.0125)
    assert d.accepted and d.pairwise[0].wins == 7  # 1/128 <= 1.25%
    d = decide("significant", flat, flat, pairwise=[pw(6, 0, 1)], absolute=False, alpha=0.0125)
    assert not d.accepted and d.inconclusive  # 1/64: a lean, not a proof
    assert "too few cases prefer either version for the sign test to reach 0.0125" in d.reason
    assert decide("improved", flat, flat, pairwise=[pw(2, 1)], absolute=False).accepted


def test_with_scored_criteria_both_tests_must_pass() -> None:
    better = ev({"a": 60, "b": 68, "c": 79, "d": 52})
    assert decide("significant", BASE, better, pairwise=[pw(8, 0)], alpha=0.1).accepted
    d = decide("significant", BASE, better, pairwise=[pw(2, 2, 4)], alpha=0.1)
    assert not d.accepted and d.reason.startswith(
        "rejected: the scored criteria gained, but the judge did not prefer")
    d = decide("significant", BASE, BASE, pairwise=[pw(8, 0)], alpha=0.1)
    assert not d.accepted and "not significant" in d.reason and "tone: 8 wins" in d.reason
    # a required case that fails now refuses whatever the judge prefers
    d = decide("significant", ev({"a": 80}), ev({"a": 20}), pairwise=[pw(8, 0)],
               required={"a"}, absolute=False)
    assert not d.accepted and d.regressions == ("a",)
