"""What people's labels say about trusting the judge: the corrected score, and the gate a
cycle's head move must pass.

**The corrected score** (prediction-powered inference, Angelopoulos et al. 2023, with
PPI++'s power tuning): over a run's N judged outputs and the n of them people labelled, a
criterion's mean is estimated as lambda times the judge's mean over all N plus the mean of
(person - lambda judge) over the n labelled ones; its 95% interval adds the two variances
(the judge's spread over N, the judge's error over n), so it holds the judge's error as
well as the sampling noise. lambda (0 to 1) is the one that makes the interval narrowest:
near 1 for a judge that tracks people, near 0 (the people's mean alone) for one that
does not, so labels never buy a wider interval than they would alone. It assumes the labelled
outputs are a random sample of the run's and that the person is the truth (``cycle judge
sample``'s pick is spread evenly over cases and the judge's score quartiles, not drawn in
proportion to them: it is unbiased only when the judge's error is alike across them); with
no labels there is nothing to correct. The interval is cut to the 0-100 scale.

**The gate** (``improve.judge.min_agreement``): head moves only while every LLM criterion's
kappa with people has its 95% lower bound at or over the floor. Otherwise the reason says
which criterion, its figures, and how many more labels would settle it (the interval
narrows as 1/sqrt(n)): or that more labels will not help because the judge's agreement
itself is under the floor.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from cycle.judge.agreement import MIN_OUTPUTS, Rating, measure
from cycle.records.cycles import JudgeKappa
from cycle.stats import SCORE_SCALE, t_critical

if TYPE_CHECKING:
    from cycle.records import RunResult
    from cycle.store import Store

Z95 = 1.959963984540054
#: a label with a score but no pass/fail passes at its criterion's pass mark in the run
#: (``pass_mark``); this one when the run does not say (the default pass_threshold)
PASS_AT = 70.0


def pass_mark(config: dict[str, Any] | None, criterion: str) -> float:
    """The score at which ``criterion`` passed in a run of ``config`` (its stored config),
    as the judge's verdicts did: its ``pass_mark``, else 100 for a check, 70 for a 0-10
    criterion, else the run's ``pass_threshold``. A person's score-only label passes at the
    same mark: at a fixed 70, a run with pass_threshold 80 had people passing the 75s the
    judge failed, a disagreement of scales, not of judgement."""
    config = config or {}
    entry = next((c for c in (config.get("criteria") or ())
                  if isinstance(c, dict) and c.get("id") == criterion), {})
    if entry.get("pass_mark") is not None:
        return float(entry["pass_mark"])
    if entry.get("check") is not None:
        return 100.0
    if entry.get("scale") == 10:
        return 70.0
    return float(config.get("pass_threshold", PASS_AT))


def ratings_of(labelled: Sequence[Any]) -> dict[str, list[Rating]]:
    """Labels beside the judge's verdicts (``cycle.store.human_labels.Labelled``) as
    ratings, by criterion."""
    out: dict[str, list[Rating]] = {}
    for x in labelled:
        out.setdefault(x.label.criterion, []).append(Rating(
            output=(x.label.run, x.label.case, x.label.iteration), labeler=x.label.labeler,
            person_score=x.label.score, person_passed=x.label.passed,
            judge_score=x.judge_score, judge_passed=x.judge_passed))
    return dict(sorted(out.items()))


class Corrected(Struct, frozen=True):
    """A criterion's mean as judged, and as corrected with people's labels."""

    judged: float
    corrected: float
    ci: tuple[float, float]
    #: outputs judged, and of them labelled with a score
    n_judged: int
    n_labelled: int
    #: how much of the judge the estimate leans on (PPI++'s lambda): 1 the plain
    #: prediction-powered estimate, 0 the people's mean alone
    power: float = 1.0
    #: the interval was cut to the 0-100 scale (few labels: t on 1 degree of freedom is 12.7)
    clipped: bool = False


def corrected_mean(judged: Sequence[float], ratings: Sequence[Rating]) -> Corrected | None:
    """The prediction-powered estimate of a criterion's mean on 0-100 (``judged``: the
    judge's score of every output; ``ratings``: the labelled ones, several labelers of one
    output averaged; they are among the judged outputs), power-tuned (PPI++, Angelopoulos
    et al. 2023b): the judge's mean is weighed by the lambda that makes the interval
    narrowest, so a judge that tracks people poorly costs no more width than labels alone.
    None with fewer than two labelled scores."""
    by_output: dict[tuple[str, str, int], list[Rating]] = {}
    for r in ratings:
        if r.person_score is not None and r.judge_score is not None:
            by_output.setdefault(r.output, []).append(r)
    people = [statistics.fmean(r.person_score for r in rs) for rs in by_output.values()]  # type: ignore[misc]
    judge = [rs[0].judge_score for rs in by_output.values()]
    if len(people) < 2 or len(judged) < 2:
        return None
    n, big_n = len(people), len(judged)
    mean, spread = statistics.fmean(judged), statistics.variance(judged)
    # the labelled outputs are among the judged ones, so the two means share them: the
    # variance has a covariance term, and the lambda that minimises it is the judge's
    # regression slope on people's scores, clipped to [0, 1] (past 1 it would
    # extrapolate the judge, below 0 trust its opposite)
    lam = min(1.0, max(0.0, statistics.covariance(people, judge) / spread)) if spread > 0 else 1.0
    errors = [y - lam * f for y, f in zip(people, judge, strict=True)]  # type: ignore[operator]
    estimate = lam * mean + statistics.fmean(errors)
    variance = (lam * lam * spread / big_n + statistics.variance(errors) / n
                + 2 * lam * statistics.covariance(judge, errors) / big_n)  # type: ignore[arg-type]
    # Student's t on the labels' degrees of freedom: lambda and the error's spread are both
    # read off the n labels, and a normal quantile undercovers at 25 of them (0.924)
    half = t_critical(n - 1) * math.sqrt(max(variance, 0.0))
    low, high = estimate - half, estimate + half
    clipped = low < SCORE_SCALE[0] or high > SCORE_SCALE[1]
    # the estimate itself may leave the scale too (people scoring far above a judge that
    # scores the rest high: 102.4); no mean of 0-100 scores is there, so it stops at its edge
    estimate = min(max(estimate, SCORE_SCALE[0]), SCORE_SCALE[1])
    return Corrected(judged=mean, corrected=estimate,
                     ci=(max(low, SCORE_SCALE[0]), min(high, SCORE_SCALE[1])),
                     n_judged=big_n, n_labelled=n, power=lam, clipped=clipped)


def label_errors(labelled: Sequence[Any], run_id: str) -> dict[str, list[float]]:
    """Criterion -> person minus judge, per labelled output of ``run_id`` (several
    labelers of one output averaged): the judge's error on that run's outputs."""
    by_output: dict[tuple[str, str, int], list[float]] = {}
    judged: dict[tuple[str, str, int], float] = {}
    for x in labelled:
        if x.label.run != run_id or x.label.score is None or x.judge_score is None:
            continue
        key = (x.label.criterion, x.label.case, x.label.iteration)
        by_output.setdefault(key, []).append(x.label.score)
        judged[key] = x.judge_score
    out: dict[str, list[float]] = {}
    for key, scores in by_output.items():
        out.setdefault(key[0], []).append(statistics.fmean(scores) - judged[key])
    return out


class CorrectedGain(Struct, frozen=True):
    """A paired gain as judged, and corrected with people's labels of both versions'
    outputs (``cycle.loop.core``'s confirmation)."""

    judged: float
    corrected: float
    #: the one-sided lower bound of the corrected gain at the decision's level
    bound: float
    #: criterion -> the judge's mean error on the candidate's outputs minus on the base's
    shift: dict[str, float]


def corrected_gain(diffs: Sequence[float], base: dict[str, list[float]],
                   candidate: dict[str, list[float]], weights: dict[str, float],
                   total_weight: float, *, alpha: float, min_sd: float = 1.0) -> CorrectedGain:
    """The paired gain (``diffs``: candidate minus base, per case) plus, for each LLM
    criterion, its weight's share of the score times the change of the judge's error
    between the versions (person minus judge, mean over each version's labelled
    outputs). Its variance adds the gain's over the cases and each error mean's over its
    labels; the bound is normal at one-sided ``alpha``. A judge that scores the
    candidate's kind of answer higher than people do has that excess taken back."""
    from statistics import NormalDist

    n = len(diffs)
    judged = statistics.fmean(diffs)
    sd = max(statistics.stdev(diffs) if n > 1 else 0.0, min_sd)
    variance = sd * sd / n
    shift: dict[str, float] = {}
    estimate = judged
    for c, w in weights.items():
        b, k = base.get(c, []), candidate.get(c, [])
        if len(b) < 2 or len(k) < 2:
            continue
        share = w / total_weight
        shift[c] = statistics.fmean(k) - statistics.fmean(b)
        estimate += share * shift[c]
        variance += share * share * (statistics.variance(k) / len(k) + statistics.variance(b) / len(b))
    bound = estimate - NormalDist().inv_cdf(1 - alpha) * math.sqrt(variance)
    return CorrectedGain(judged=judged, corrected=estimate, bound=bound, shift=shift)


def stratified(outputs: list[dict[str, Any]], criteria: list[str], count: int
                ) -> list[dict[str, Any]]:
    """``count`` outputs spread over the cases and, within them, over the judge's score
    range (quartiles of its mean score over ``criteria``); fixed seed, same pick each time."""
    rng = random.Random(0)

    def band(o: dict[str, Any]) -> int:
        scores = [o["verdicts"][c]["score"] for c in criteria
                  if c in o["verdicts"] and o["verdicts"][c]["score"] is not None]
        return min(3, int((sum(scores) / len(scores)) // 25)) if scores else 0

    strata: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for o in outputs:
        strata.setdefault((band(o), o["case"]), []).append(o)
    for group in strata.values():
        rng.shuffle(group)
    # the strata in turn, bands interleaved and the cases of a band in a shuffled order,
    # one output a stratum a pass: every (band, case) gives one before any gives two
    rank: dict[tuple[int, str], int] = {}
    for b in {k[0] for k in strata}:
        cases = sorted(k for k in strata if k[0] == b)
        rng.shuffle(cases)
        rank.update({k: i for i, k in enumerate(cases)})
    keys = sorted(strata, key=lambda k: (rank[k], k[0]))
    chosen: list[dict[str, Any]] = []
    while len(chosen) < count and any(strata.values()):
        for key in keys:
            if strata[key] and len(chosen) < count:
                chosen.append(strata[key].pop())
    return chosen


def to_label(store: Store, run_id: str, count: int, criteria: Sequence[str] = ()
             ) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """``count`` outputs of a stored run to label (``stratified``), and the criteria to
    label with their rubrics: ``criteria``, or every LLM criterion the run has verdicts of.
    ConfigError for a criterion it has none of, or a run with no LLM criterion."""
    from cycle.errors import ConfigError
    from cycle.judge.criteria import BUILTIN_CRITERIA

    outputs = store.human_labels.outputs(run_id)
    judged = {c for o in outputs for c, v in o["verdicts"].items()
              if v["kind"] == "llm" or c in criteria}
    wanted = list(criteria) or sorted(judged)
    unknown = [c for c in wanted if c not in judged]
    if unknown:
        raise ConfigError(f"run {run_id} has no verdicts of criterion {unknown[0]!r}",
                          field="--criterion", hint=f"Its criteria: {', '.join(sorted(judged))}.")
    if not wanted:
        raise ConfigError(f"run {run_id} has no LLM criterion to label",
                          field="--criterion", hint="Name a check's criterion with --criterion.")
    run = store.runs.get(run_id)
    configured = {c.get("id"): c for c in ((run.config or {}).get("criteria") or ())
                  if isinstance(c, dict)} if run is not None else {}
    rubrics = [(c, str(configured.get(c, {}).get("rubric") or BUILTIN_CRITERIA.get(c)
                       or configured.get(c, {}).get("description") or "")) for c in wanted]
    return stratified(outputs, wanted, count), rubrics


def labels_to_settle(kappa: float, low: float, n: int, floor: float) -> int | None:
    """About how many more labels would lift kappa's lower bound to ``floor`` if kappa
    stayed where it is (the interval's half-width shrinks as 1/sqrt(n)); None when kappa
    itself is at or under the floor: no number of labels would."""
    if kappa <= floor:
        return None
    needed = n * ((kappa - low) / (kappa - floor)) ** 2
    return max(1, math.ceil(needed - n))


def gate(labelled: Sequence[Any], criteria: Sequence[str], floor: float) -> str | None:
    """Why the judge may not yet decide a head move (``criteria``: its LLM criteria),
    or None when each one's kappa lower bound is at or over ``floor``."""
    by = ratings_of(labelled)
    problems = []
    for c in criteria:
        ratings = by.get(c, [])
        if not ratings:
            problems.append(f"{c}: no human labels (label some: cycle judge sample RUN_ID "
                            "--n 50, then cycle judge labels import FILE)")
            continue
        a = measure(ratings, intervals=("kappa",))
        if a.kappa is None:
            problems.append(f"{c}: kappa undefined on {a.n} labels (one verdict only): label "
                            "outputs the judge passes and fails")
        elif a.kappa_ci is None:
            problems.append(f"{c}: {a.outputs} labelled outputs give no interval yet (it "
                            f"takes {MIN_OUTPUTS})")
        elif a.kappa_ci[0] < floor:
            more = labels_to_settle(a.kappa, a.kappa_ci[0], a.n, floor)
            settle = (f"about {more} more labels would settle it" if more is not None else
                      "more labels will not lift it: improve the judge's rubric or use "
                      "another judge")
            problems.append(f"{c}: kappa {a.kappa:.2f}, lower bound {a.kappa_ci[0]:.2f} < "
                            f"{floor:.2f} on {a.n} labels ({settle})")
    return "; ".join(problems) or None


def judge_line(store: Store, result: RunResult) -> str | None:
    """What a run's console and reports say of its judge: its agreement with people,
    measured on the labels of every run it judged, or that it has none (None: no LLM
    criterion ran)."""
    judged = result.suite.usage.get("judge")
    if judged is None or not judged.calls or result.judge_model is None:
        return None  # no model judged it (a judge cycle's runs call the judge as the agent)
    return agreement_line(store, run_id=result.run_id, model=result.judge_model,
                          version=result.judge_version)


def agreement_line(store: Store, *, run_id: str, model: str | None,
                   version: str | None) -> str:
    """The judge ``model`` with its prompt ``version``: its kappa and bias per criterion
    over every label of the runs it judged, or that it is uncalibrated."""
    judge = f"{model} cycle-judge@{version}"
    labelled = store.human_labels.of_judge(model, version)
    flips = _flips(store, model, version)
    if not labelled:
        return (f"Judge {judge}: uncalibrated, no human labels yet (to measure it: "
                f"cycle judge sample {run_id})" + flips)
    parts = []
    for criterion, ratings in ratings_of(labelled).items():
        a = measure(ratings, intervals=("kappa",))
        kappa = "kappa —" if a.kappa is None else f"kappa {a.kappa:.2f}" + (
            f" [{a.kappa_ci[0]:.2f}, {a.kappa_ci[1]:.2f}]" if a.kappa_ci else "")
        bias = "" if a.bias is None else f", bias {a.bias:+.1f}"
        parts.append(f"{criterion} {kappa}{bias} (n {a.n})")
    return f"Judge {judge}, against {len(labelled)} human labels: " + "; ".join(parts) + flips


def _flips(store: Store, model: str | None, version: str | None) -> str:
    """The criteria whose verdicts flipped between fresh repeats more often than allowed,
    at this judge's latest consistency measure of each ("" when none did)."""
    latest: dict[str, Any] = {}
    for c in store.judge_consistency.of_judge(model, version):
        latest.setdefault(c.criterion, c)
    flagged = [c for _, c in sorted(latest.items()) if c.flagged]
    if not flagged:
        return ""
    return "; INCONSISTENT: " + ", ".join(
        f"{c.criterion} flips {c.flip_share:.0%} of its verdicts over {c.repeats} repeats "
        f"(over the {c.max_flips:.0%} allowed; cycle judge consistency {c.run})"
        for c in flagged)


def judge_kappa(store: Store, model: str | None, version: str | None) -> JudgeKappa:
    """The judge ``model`` with its prompt ``version``: its pooled kappa with people
    (``JudgeKappa``), labels 0 when it has none."""
    return kappa_of(model, version, store.human_labels.of_judge(model, version))


def kappa_of(model: str | None, version: str | None, labelled: Sequence[Any]) -> JudgeKappa:
    """``judge_kappa`` over the judge's labels as read (``Labelled``)."""
    if not labelled:
        return JudgeKappa(model=model, version=version, kappa=None, kappa_ci=None, labels=0)
    ratings = [r for rs in ratings_of(labelled).values() for r in rs]
    a = measure(ratings, intervals=("kappa",))
    return JudgeKappa(model=model, version=version, kappa=a.kappa, kappa_ci=a.kappa_ci,
                      labels=a.n)


def run_judge_kappa(store: Store, run_id: str | None,
                    known: dict[tuple[str | None, str | None], JudgeKappa] | None = None
                    ) -> JudgeKappa | None:
    """The kappa of the judge that judged stored run ``run_id`` (None: no run, or no model
    judged it, as in a judge cycle whose runs call the judge as the agent under test);
    ``known`` keeps each judge's figure so a cycle's rounds measure it once."""
    if run_id is None or (row := store.runs.get(run_id)) is None or row.judge_model is None \
            or store.runs.usage_by_role(run_id).get("judge") is None:
        return None
    key = (row.judge_model, row.judge_version)
    if known is not None and key in known:
        return known[key]
    found = judge_kappa(store, *key)
    if known is not None:
        known[key] = found
    return found
