"""head moves only after a confirmation on fresh samples (issue 15, item 1): a candidate
that won its exploring round by luck stays unpromoted; an inconclusive confirmation runs
more iterations of the cases that varied; a kill during it re-pays nothing."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter

import pytest

from cycle import events as ev
from cycle.assemble import build_loop
from cycle.loop.review import AutoReviewer
from cycle.testing import script
from tests.conftest import AUTHOR

from .conftest import KEYWORDS, last_json, suggestion

CYCLE = f"cycle ({AUTHOR})"  # the loop acts on behalf of who ran it


def run_loop(loaded, store, bus=None, resume=None):
    loop = build_loop(loaded, store=store, bus=bus, reviewer=AutoReviewer())
    return asyncio.run(loop.run(resume=resume))


def judged_by(noise):
    """A judge scoring 40 + 20 per keyword - handicap + ``noise(case, k, output)``, where k
    counts the calls that judged this case so far (the runs of a cycle come one after
    another, so a case's k-th call belongs to a known evaluation)."""
    calls: Counter = Counter()

    def judge(messages, tools, config):
        case = last_json(messages)
        k = calls[case["input"]]
        calls[case["input"]] += 1
        handicap = int(re.sub(r"\D", "", str(case["input"])) or 0)
        score = 40 + 20 * sum(w in case["output"] for w in KEYWORDS) - handicap
        score += noise(case["input"], k, case["output"])
        return {"verdicts": {"quality": {"score": max(0, min(100, score)), "reasoning": "."}}}

    script("judge", judge)
    return calls


def test_a_candidate_that_won_by_luck_is_not_promoted(world, store) -> None:
    """The candidate looks +20 in its exploring round (4 cases x 2 iterations: the first 8
    judge calls that see 'sorry'); evaluated again on fresh samples, it is no better: head
    stays where it was, and the final score is the starting version's, not the lucky one."""
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}],
                   improve={"stop": {"max_rounds": 1}})
    lucky = Counter()

    def noise(case, k, output):
        if "sorry" in output:
            lucky["calls"] += 1
            return 0 if lucky["calls"] <= 8 else -20  # the luck runs out after round 1
        return 0

    judged_by(noise)
    result = run_loop(loaded, store)
    explore, confirm = result.rounds[1], result.rounds[2]
    assert explore.accepted and explore.delta == 20
    assert confirm.stage == "confirm" and not confirm.accepted and confirm.delta == 0
    assert store.resolve("support@head").version == "1.0.0"
    assert result.final_version == "1.0.0" and result.final_score == result.initial_score
    assert result.stop_reason == ("max_rounds: 1 of 1 rounds run; 1.0.1 was not confirmed on fresh "
                                  "samples (+0.0): head stays at 1.0.0")
    rows = store.cycles.get_rounds(result.cycle_id)
    assert rows[2].reason.startswith("not confirmed on fresh samples") and rows[2].accepted is False
    assert [m.who for m in store.label_moves("support", label="head")] == [AUTHOR]  # only the first save
    # the report's chart keeps head apart from the candidate kept to explore from
    from cycle.report.cycle_report import cycle_report_dict, render_cycle_markdown
    from cycle.report.html import score_chart

    data = cycle_report_dict(store, result.cycle_id)
    head = [r["head_score_after"] for r in data["rounds"]]
    kept = [r["incumbent_score_after"] for r in data["rounds"]]
    assert head == [result.initial_score] * 3  # head never moved
    assert kept[1] == result.initial_score + 20  # the lucky candidate, kept to explore from
    chart = render_cycle_markdown(data)
    assert "first line: head after the round; second line: the candidate kept" in chart
    svg = str(score_chart(data["rounds"]))
    assert 'class="head"' in svg and 'class="explored"' in svg


def test_an_inconclusive_confirmation_runs_more_iterations_of_the_cases_that_varied(world, store) -> None:
    """At the confirmation's first look two cases swing 5 to 25 points: a gain, but not a sure
    one. It runs those two cases to twice the iterations (the cases whose iterations did
    not vary would learn nothing) and looks again."""
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}],
                   improve={"stop": {"max_rounds": 1}})
    swings = {"case 2": (25, 5), "case 3": (-25, -5)}  # the confirmation's baseline, k = 4, 5

    def noise(case, k, output):
        return swings[case][k - 4] if case in swings and k in (4, 5) else 0

    judged_by(noise)
    result = run_loop(loaded, store)
    confirm = result.rounds[2]
    assert confirm.stage == "confirm"
    per_case = dict(store.db.execute(
        "SELECT case_id || ' ' || run_id, count(*) FROM results WHERE run_id LIKE ? GROUP BY 1",
        (f"{result.cycle_id}-r2%",)).fetchall())
    for run in (f"{result.cycle_id}-r2-baseline", f"{result.cycle_id}-r2"):
        assert [per_case[f"c{i} {run}"] for i in (1, 2, 3, 4)] == [2, 4, 4, 2]
    # the second look, with swings diluted by the calm extra iterations, confirms the +20
    assert confirm.accepted and store.resolve("support@head").version == "1.0.1"


def test_an_inconclusive_exploring_round_runs_more_iterations_in_both_versions(world, store) -> None:
    """Round 1's candidate swings on case 2 (-55 then -25 points): the mean gained but the
    bound reaches zero. The round runs case 2 to twice the iterations in the candidate's
    run and in the incumbent's (the baseline's run, grown: the new calls are round 1's),
    looks again, and keeps the candidate; the confirmation then promotes it."""
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}],
                   improve={"stop": {"max_rounds": 1}})

    def noise(case, k, output):
        return {2: -55, 3: -25}.get(k, 0) if case == "case 2" else 0

    judged_by(noise)
    result = run_loop(loaded, store)
    explore = result.rounds[1]
    assert explore.accepted and explore.delta == 15  # 20, 0, 20, 20 at the second look
    per_case = dict(store.db.execute(
        "SELECT case_id || ' ' || run_id, count(*) FROM results GROUP BY 1").fetchall())
    for run in (f"{result.cycle_id}-r0", f"{result.cycle_id}-r1"):
        assert [per_case[f"c{i} {run}"] for i in (1, 2, 3, 4)] == [2, 4, 2, 2]
    rounds = dict(store.db.execute(
        "SELECT iteration, round FROM calls WHERE run_id = ? AND case_id = 'c2' AND role = 'judge'",
        (f"{result.cycle_id}-r0",)).fetchall())
    assert rounds == {0: 0, 1: 0, 2: 1, 3: 1}  # the grown iterations were paid by round 1
    assert result.rounds[2].stage == "confirm" and result.rounds[2].accepted
    assert store.resolve("support@head").version == "1.0.1"


def test_a_kill_during_the_confirmation_resumes_it_paying_nothing_twice(world, store) -> None:
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}],
                   improve={"stop": {"max_rounds": 1}})
    calls = judged_by(lambda case, k, output: 0)
    bus = ev.EventBus()

    def kill(event):
        if isinstance(event, ev.EvaluationStarted) and event.round == 2 and event.role == "candidate":
            raise KeyboardInterrupt

    unsubscribe = bus.subscribe(kill)
    with pytest.raises(KeyboardInterrupt):
        run_loop(loaded, store, bus)
    unsubscribe()
    cycle = store.cycles.latest_resumable("support")
    assert cycle is not None and cycle.status == "interrupted"
    assert store.resolve("support@head").version == "1.0.0"
    before = sum(calls.values())
    assert before == 8 * 3  # the baseline, the candidate, the confirmation's baseline

    result = run_loop(loaded, store, resume=True)
    assert sum(calls.values()) - before == 8  # only the confirmation's candidate
    assert result.stop_reason.startswith("max_rounds: 1 of 1 rounds run; confirmed on fresh samples")
    assert store.resolve("support@head").version == "1.0.1"
    assert [r.stage for r in store.cycles.get_rounds(result.cycle_id)] == ["baseline", "improve", "confirm"]
    json.dumps([r.model_dump() for r in store.cycles.get_rounds(result.cycle_id)])


def test_acceptance_always_moves_head_every_round_with_no_confirmation(world, store) -> None:
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]},
                    {"suggestions": [suggestion("Always say order.")]}],
                   improve={"acceptance": "always", "stop": {"max_rounds": 2}})
    result = run_loop(loaded, store)
    assert [r.stage for r in result.rounds] == ["baseline", "improve", "improve"]
    moves = sorted((m.id, m.to_version) for m in store.label_moves("support", label="head")
                   if m.who == CYCLE)
    assert [v for _, v in moves] == ["1.0.1", "1.0.2"]

