"""improve.judge.confirm_labels (issue 35, acceptance that knows the judge's error): the
confirmation decides on the paired gain corrected with people's labels of both versions'
fresh outputs. The judge here gives 20 points for "sorry" and the improver proposes "Always
say sorry": judged, the candidate gains 20. The cycle waits for the labels (interrupted,
resumable, nothing paid twice); people who agree with the judge let head move, people for
whom "sorry" is worth nothing hold it."""

from __future__ import annotations

import asyncio

from cycle.assemble import build_loop
from cycle.loop.review import AutoReviewer
from cycle.store.human_labels import Label

from .conftest import suggestion

SYSTEM = "You help customers. say order say thanks"


def sorry(messages, tools, config):
    return {"suggestions": [suggestion("Always say sorry.")]}


def cycle(loaded, store, resume=None):
    return asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run(resume=resume))


def label_confirmation(store, cycle_id: str, person) -> list[str]:
    """Label every output of the confirmation's two fresh runs: ``person(run, output,
    judge_score)`` is the person's score."""
    runs = [r for r in store.runs.recent(cycle_id=cycle_id, limit=None)
            if r.round == 2]  # round 1 explored; round 2 confirms
    for run in runs:
        store.human_labels.add([
            Label(run=run.id, case=o["case"], iteration=o["iteration"], criterion="quality",
                  score=person(run, o["output"], o["verdicts"]["quality"]["score"]), labeler="ann")
            for o in store.human_labels.outputs(run.id)])
    return sorted(r.id for r in runs)


def paid_agent_calls(store) -> int:
    return store.db.execute("SELECT count(*) FROM calls WHERE role = 'agent'").fetchone()[0]


def test_the_cycle_waits_for_labels_then_a_biased_judge_is_not_believed(world, store) -> None:
    loaded = world(sorry, improve={"stop": {"max_rounds": 1}, "judge": {"confirm_labels": 5}},
                   cases=25, iterations=2, system=SYSTEM)
    first = cycle(loaded, store)
    assert first.status == "interrupted" and store.resolve("support@head").version == "1.0.0"
    reason = first.stop_reason
    assert reason.startswith("waiting for people's labels: 1.0.1 gained +20.0 as judged")
    assert "1.0.0 0/5 on quality, 1.0.1 0/5 on quality" in reason
    assert f"cycle judge label {first.cycle_id}-r2-baseline" in reason
    assert f"--resume {first.cycle_id}" in reason
    assert store.cycles.get(first.cycle_id).status == "interrupted"

    # people for whom "sorry" is worth nothing: the judge's +20 on the candidate is its error
    label_confirmation(store, first.cycle_id,
                       lambda run, output, judged: judged - 20 if "sorry" in output else judged)
    paid = paid_agent_calls(store)
    second = cycle(loaded, store, resume=first.cycle_id)
    assert paid_agent_calls(store) == paid  # the fresh runs were stored: nothing paid twice
    assert second.status == "finished" and store.resolve("support@head").version == "1.0.0"
    assert "not confirmed" in second.stop_reason
    decided = store.cycles.get_rounds(first.cycle_id)[-1]
    assert decided.stage == "confirm" and decided.accepted is False
    assert "corrected with people's labels, the gain is +0.00 (as judged +20.00" in decided.reason
    assert "quality -20.0" in decided.reason


def test_people_who_agree_with_the_judge_let_head_move(world, store) -> None:
    loaded = world(sorry, improve={"stop": {"max_rounds": 1}, "judge": {"confirm_labels": 5}},
                   cases=25, iterations=2, system=SYSTEM)
    first = cycle(loaded, store)
    label_confirmation(store, first.cycle_id, lambda run, output, judged: judged)
    second = cycle(loaded, store, resume=first.cycle_id)
    assert store.resolve("support@head").version == "1.0.1"
    assert "confirmed on fresh samples" in second.stop_reason
    assert "corrected with people's labels, the gain is +20.00" in (
        store.cycles.get_rounds(first.cycle_id)[-1].reason)


def test_too_few_labels_keep_it_waiting(world, store) -> None:
    loaded = world(sorry, improve={"stop": {"max_rounds": 1}, "judge": {"confirm_labels": 60}},
                   cases=25, iterations=2, system=SYSTEM)
    first = cycle(loaded, store)
    label_confirmation(store, first.cycle_id, lambda run, output, judged: judged)
    still = cycle(loaded, store, resume=first.cycle_id)  # 25 cases x 2 = 50 outputs < 60
    assert still.status == "interrupted" and "1.0.0 50/60 on quality" in still.stop_reason
    assert store.resolve("support@head").version == "1.0.0"
