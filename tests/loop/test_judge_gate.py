"""improve.judge.min_agreement (issue 35): a cycle moves head only while its judge's
agreement with people is established. Without labels, or with labels the judge disagrees
with, a confirmed candidate stays unpromoted and the reason says what is missing; with
labels the judge agrees with, head moves as before."""

from __future__ import annotations

import asyncio

from cycle import events as ev
from cycle.assemble import build_loop
from cycle.events import EventBus
from cycle.loop.review import AutoReviewer
from cycle.report.cycle_report import cycle_report_dict, render_cycle_html, render_cycle_markdown
from cycle.store.human_labels import Label

from .conftest import suggestion

SYSTEM = "You help customers. say order say thanks"


def sorry(messages, tools, config):
    return {"suggestions": [suggestion("Always say sorry.")]}


def cycle_once(loaded, store):
    return asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run())


def label_round_zero(store, result, person) -> int:
    """Label every output of the cycle's first evaluation: ``person(case, judge_score)`` is
    what a person scores it."""
    [first] = [r for r in store.runs.recent(cycle_id=result.cycle_id, limit=None) if r.round == 0]
    labels = [Label(run=first.id, case=o["case"], iteration=o["iteration"], criterion="quality",
                    score=(s := person(o["case"], o["verdicts"]["quality"]["score"])),
                    passed=s >= 70, labeler="ann")
              for o in store.human_labels.outputs(first.id)]
    return store.human_labels.add(labels)


def test_head_stays_until_people_agree_with_the_judge(world, store) -> None:
    loaded = world(sorry, improve={"stop": {"max_rounds": 1}, "judge": {"min_agreement": 0.6}},
                   cases=25, iterations=2, system=SYSTEM)
    first = cycle_once(loaded, store)
    confirm = first.rounds[-1]
    assert confirm.stage == "confirm" and confirm.accepted  # the candidate is better...
    assert store.resolve("support@head").version == "1.0.0"  # ...and still not promoted
    assert "the judge's agreement with people is not established" in first.stop_reason
    assert "quality: no human labels" in first.stop_reason
    before = cycle_report_dict(store, first.cycle_id)["judge_agreement"]
    assert before.startswith("Judge scripted:judge cycle-judge@") and "uncalibrated" in before

    # 50 labels from a person who passes the even cases whatever the judge says
    assert label_round_zero(store, first, lambda case, _: 90 if int(case[1:]) % 2 == 0 else 40) == 50
    second = cycle_once(loaded, store)
    assert store.resolve("support@head").version == "1.0.0"
    assert "quality: kappa" in second.stop_reason and "on 50 labels" in second.stop_reason
    assert "more labels will not lift it" in second.stop_reason

    # the cycle reports say it too: the kappa, after the labels
    after = cycle_report_dict(store, second.cycle_id)
    assert "against 50 human labels: quality kappa 0.03" in after["judge_agreement"]
    assert "| judge's agreement | Judge scripted:judge" in render_cycle_markdown(after)
    assert "quality kappa 0.03" in render_cycle_html(after)


def test_head_moves_when_the_labels_agree(world, store) -> None:
    loaded = world(sorry, improve={"stop": {"max_rounds": 1}, "judge": {"min_agreement": 0.6}},
                   cases=25, iterations=2, system=SYSTEM)
    first = cycle_once(loaded, store)
    assert store.resolve("support@head").version == "1.0.0"
    label_round_zero(store, first, lambda case, judged: judged)  # people score as the judge
    bus = EventBus()
    started: list[ev.CycleStarted] = []
    bus.subscribe(lambda e: started.append(e) if isinstance(e, ev.CycleStarted) else None)
    second = asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer(), bus=bus).run())
    # the cycle says at its start how far its judge agrees with people (console, TUI)
    assert "against 50 human labels: quality kappa 1.00" in (started[0].judge_note or "")
    assert "confirmed on fresh samples" in second.stop_reason, second.stop_reason
    assert store.resolve("support@head").version == second.final_version != "1.0.0"


def test_without_the_gate_the_same_cycle_promotes(world, store) -> None:
    loaded = world(sorry, improve={"stop": {"max_rounds": 1}}, cases=25, iterations=2,
                   system=SYSTEM)
    result = cycle_once(loaded, store)
    assert store.resolve("support@head").version == result.final_version != "1.0.0"
