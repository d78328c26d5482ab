"""A judge panel: several models judge the same LLM criteria, and the panel's verdict is
theirs combined.

    judge: [openai:gpt-4o-mini, gemini:gemini-2.0-flash]     # cycle.yaml

Each member scores every LLM criterion of an iteration in its own call, the members
concurrently. A call is its model's: its cache key and its journal row carry the model's
name, so members never share a cached answer and a resumed run replays each member's
paid answer instead of paying for it again.

A criterion's score is the members' mean. Its pass is their majority, each member passing
at the criterion's pass mark: more than half must pass, so a tie fails. A panel split
evenly has not said the answer is good, and a failed criterion is what the improver and a
person look at; so the score may be at the pass mark while the verdict fails. A
criterion judged on every turn fails the turns a majority of the members did not pass.

A member that errors (provider down, a verdict still malformed after its repair) makes
the iteration an error naming the member, as a single judge's failure does: never a zero,
and never a verdict of the members that answered.

After a run, ``panel_figures`` says how far the members agreed with each other on each
criterion (Krippendorff's alpha on their 0-100 scores, with its interval) and, where people
labelled outputs, how far each member and the panel agreed with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cycle.errors import CycleError, JudgeError, describe
from cycle.records import MemberVerdict, Verdict

if TYPE_CHECKING:
    from cycle.judge.criteria import Criterion
    from cycle.records import PanelFigure, RunResult, WithPeople
    from cycle.store import Store

#: how a panel's name joins its members' (the run's judge_model)
JOIN = " + "


def panel_name(models: Sequence[str]) -> str:
    """The judge's name as runs store it: the model's, or a panel's members joined."""
    return JOIN.join(models)


def majority(passes: Sequence[bool]) -> bool:
    """More than half pass: a tie fails."""
    return 2 * sum(passes) > len(passes)


def combine(criterion: Criterion, verdicts: Sequence[tuple[str, Verdict]]) -> Verdict:
    """The panel's verdict of ``criterion`` from its members' (model, verdict), in order:
    the mean score, the majority's pass, every member's reasoning, and each member's
    verdict kept."""
    scores = [v.score for _, v in verdicts]
    score = sum(scores) / len(scores)
    passed = majority([v.passed for _, v in verdicts])
    turns = sorted({t for _, v in verdicts for t in v.failed_turns})
    failed_turns = tuple(t for t in turns
                         if not majority([t not in v.failed_turns for _, v in verdicts]))
    shown = "; ".join(f"{model} {v.score:.0f}: {v.reasoning}" for model, v in verdicts)
    said = "pass" if passed else "fail"
    return Verdict(
        criterion_id=criterion.id, kind="llm", score=score, passed=passed,
        weight=criterion.weight, required=criterion.required,
        reasoning=f"panel of {len(verdicts)}: mean {score:.1f}, "
        f"{sum(v.passed for _, v in verdicts)} of {len(verdicts)} pass ({said}); {shown}",
        failed_turns=failed_turns,
        members=tuple(MemberVerdict(model=model, score=v.score, passed=v.passed,
                                    reasoning=v.reasoning) for model, v in verdicts))


def member_failed(failures: Sequence[tuple[str, BaseException]]) -> BaseException:
    """The error an iteration records when members failed: the first member's own error
    (so a budget reached or a key refused still stops the run as it would), its message
    naming the member, and the others that failed with it."""
    member, error = failures[0]
    also = "".join(f"; {m} failed too: {describe(e)}" for m, e in failures[1:])
    if isinstance(error, CycleError):
        error.message = f"panel member {member}: {error.message}{also}"
        error.args = (error.message,)
        return error
    return JudgeError(f"panel member {member}: {describe(error)}{also}")


def panel_figures(store: Store, result: RunResult) -> tuple[PanelFigure, ...]:
    """How the members of the panel that judged ``result`` agreed with each other and with
    people, per LLM criterion; () when one judge judged it. The people's labels are those
    of every run this panel (its members and prompt version) judged, as the judge's line
    counts them."""
    from cycle.judge.agreement import panel_alpha
    from cycle.records import MemberFigure, PanelFigure

    means = store.runs.panel_means(result.run_id)
    if not means:
        return ()
    units = store.runs.panel_units(result.run_id)
    members = list(dict.fromkeys(m for by in means.values() for m in by))
    labelled = store.human_labels.of_judge(result.judge_model, result.judge_version)
    panel_people = _with_people(labelled)
    member_people = {m: _with_people(store.human_labels.of_judge(
        result.judge_model, result.judge_version, member=m)) for m in members} if labelled else {}
    out = []
    for criterion, by in means.items():
        alpha, ci = panel_alpha(units.get(criterion, []))
        out.append(PanelFigure(
            criterion=criterion, outputs=len(units.get(criterion, [])), alpha=alpha,
            alpha_ci=ci, people=panel_people.get(criterion),
            members=tuple(MemberFigure(model=m, mean=by.get(m),
                                       people=member_people.get(m, {}).get(criterion))
                          for m in members)))
    return tuple(out)


def _with_people(labelled: Sequence[object]) -> dict[str, WithPeople]:
    """Criterion -> the judge's kappa (with its interval) and bias against these labels."""
    from cycle.judge.agreement import measure
    from cycle.judge.calibration import ratings_of
    from cycle.records import WithPeople

    out = {}
    for criterion, ratings in ratings_of(labelled).items():
        a = measure(ratings, intervals=("kappa",))
        out[criterion] = WithPeople(labels=a.n, kappa=a.kappa, kappa_ci=a.kappa_ci, bias=a.bias)
    return out
