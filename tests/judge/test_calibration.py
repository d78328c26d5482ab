"""The judge's error in the figures (issue 35): the prediction-powered corrected score
covers the truth where the judged score does not, and the gate says how many labels
would settle it."""

from __future__ import annotations

import random
import statistics

from cycle.judge.agreement import Rating
from cycle.judge.calibration import Z95, corrected_mean, labels_to_settle
from cycle.stats import t_critical


def simulated_run(rng: random.Random, *, n_judged: int, n_labelled: int, bias: float):
    """A known-truth world: each output's true score (uniform on 20-90: the prompt's true
    mean is 55), a judge that adds ``bias`` on long answers (half of them) plus noise, and
    people who score the truth."""
    truth = [rng.uniform(20, 90) for _ in range(n_judged)]
    long = [rng.random() < 0.5 for _ in range(n_judged)]
    judged = [min(100.0, max(0.0, t + (bias if lg else 0) + rng.gauss(0, 8)))
              for t, lg in zip(truth, long, strict=True)]
    labelled = rng.sample(range(n_judged), n_labelled)
    ratings = [Rating(output=("r", f"c{i}", 0), labeler="ann", person_score=truth[i],
                      person_passed=truth[i] >= 70, judge_score=judged[i],
                      judge_passed=judged[i] >= 70) for i in labelled]
    return 55.0, judged, ratings


def test_the_corrected_interval_covers_the_truth_the_judged_mean_misses():
    rng = random.Random(7)
    covered = naive_covered = 0
    runs = 400
    for _ in range(runs):
        true_mean, judged, ratings = simulated_run(rng, n_judged=200, n_labelled=50, bias=8.0)
        c = corrected_mean(judged, ratings)
        assert c is not None and c.n_labelled == 50 and c.n_judged == 200
        covered += c.ci[0] <= true_mean <= c.ci[1]
        # the naive interval: the judged mean's own sampling interval, blind to its error
        naive_half = Z95 * statistics.stdev(judged) / len(judged) ** 0.5
        naive_covered += abs(c.judged - true_mean) <= naive_half
    # measured with this seed: corrected 0.943 (power-tuned, lambda about 0.84), naive
    # 0.268 (the judge's +4 mean bias)
    assert covered / runs >= 0.93, covered / runs
    assert naive_covered / runs < 0.5, naive_covered / runs


def test_a_judge_unrelated_to_people_costs_no_width_beyond_the_labels_alone():
    """Plain prediction-powered inference adds the judge's whole spread to the error it
    corrects (1.7x the labels' own interval here); power tuning leans on the judge only as
    far as it tracks people."""
    rng = random.Random(3)
    covered, ratios, powers = 0, [], []
    for _ in range(200):
        truth = [rng.uniform(20, 90) for _ in range(200)]
        judged = [rng.uniform(0, 100) for _ in range(200)]
        ratings = [Rating(output=("r", f"c{i}", 0), labeler="ann", person_score=truth[i],
                          person_passed=None, judge_score=judged[i], judge_passed=None)
                   for i in rng.sample(range(200), 50)]
        c = corrected_mean(judged, ratings)
        assert c is not None
        covered += c.ci[0] <= 55.0 <= c.ci[1]
        people = [r.person_score for r in ratings]
        alone = 2 * t_critical(49) * statistics.stdev(people) / 50 ** 0.5  # Student's t
        ratios.append((c.ci[1] - c.ci[0]) / alone)
        powers.append(c.power)
    assert max(ratios) <= 1.0 + 1e-9 and statistics.median(powers) < 0.1
    assert covered / 200 >= 0.9


def test_no_correction_without_two_labelled_scores():
    rng = random.Random(1)
    _, judged, ratings = simulated_run(rng, n_judged=20, n_labelled=1, bias=0)
    assert corrected_mean(judged, ratings) is None
    assert corrected_mean([], ratings) is None


def test_several_labelers_of_one_output_count_once():
    r = [Rating(output=("r", "c1", 0), labeler=who, person_score=s, person_passed=None,
                judge_score=50.0, judge_passed=False) for who, s in (("ann", 40.0), ("bo", 60.0))]
    r.append(Rating(output=("r", "c2", 0), labeler="ann", person_score=70.0, person_passed=None,
                    judge_score=80.0, judge_passed=True))
    c = corrected_mean([50.0, 80.0, 65.0], r)
    assert c is not None and c.n_labelled == 2
    assert c.corrected == 65.0 + (0.0 - 10.0) / 2


def test_the_corrected_mean_stays_on_the_scale():
    # people score the two labelled outputs far above the judge, which scores the other
    # eight 95: the estimate came out at 102.4, a mean no 0-100 scores can have
    r = [Rating(output=("r", f"c{i}", 0), labeler="ann", person_score=p, person_passed=None,
                judge_score=j, judge_passed=None) for i, (p, j) in enumerate(((95.0, 40.0),
                                                                               (100.0, 60.0)))]
    c = corrected_mean([40.0, 60.0] + [95.0] * 8, r)
    assert c is not None and c.corrected == 100.0 and c.clipped
    assert c.ci[0] <= c.corrected <= c.ci[1] <= 100.0


def test_how_many_more_labels_would_settle_the_gate():
    # kappa 0.8 with [0.5, ...] on 20 labels: the half-width 0.3 must shrink to 0.2
    assert labels_to_settle(0.8, 0.5, 20, 0.6) == 25
    assert labels_to_settle(0.55, 0.3, 20, 0.6) is None  # under the floor itself
    assert labels_to_settle(0.9, 0.59, 200, 0.6) >= 1
