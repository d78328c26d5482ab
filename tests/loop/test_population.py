"""A population of candidates a round (issue 38: improve.population): parents from the
Pareto frontier, each candidate screened on a minibatch before the best gets the full
evaluation; head still moves only through the confirmation on fresh samples."""

from __future__ import annotations

import asyncio
import re

import pytest

from cycle import events as ev
from cycle.assemble import build_loop
from cycle.loop.acceptance import Evaluation
from cycle.loop.population import frontier, minibatch, parents, screen_gain, shares
from cycle.loop.review import AutoReviewer
from cycle.testing import script

from .conftest import last_json, suggestion


def _e(version: str, **scores: float) -> Evaluation:
    return Evaluation(run_id=version, version=version, score=None, case_scores=scores)


def test_the_frontier_keeps_every_version_best_on_some_case_ties_included():
    a, b, c, d = (_e("a", x=90, y=10, z=50), _e("b", x=10, y=90, z=50),
                  _e("c", x=50, y=50, z=40), _e("d", x=90, y=10, z=49))
    assert [(e.version, wins) for e, wins in frontier([a, b, c, d])] == [("a", 2), ("b", 2),
                                                                         ("d", 1)]
    # c is best nowhere (a lower mean than no one, but never the best): not a parent
    assert [e.version for e in parents([a, b, c, d], "c", 5)] == ["c", "a", "b", "d", "c"]
    assert [e.version for e in parents([a, b], "a", 3)] == ["a", "b", "a"]


def test_a_minibatch_is_half_weak_cases_the_rest_fixed_by_its_salt():
    cases = [f"c{i}" for i in range(10)]
    one = minibatch(cases, ["c7", "c8", "c9"], 4, salt="cycle|1")
    assert one[:2] == ["c7", "c8"] and len(set(one)) == 4
    assert minibatch(cases, ["c7", "c8", "c9"], 4, salt="cycle|1") == one  # a resume draws it again
    assert minibatch(cases, [], 20, salt="s") == sorted(cases, key=minibatch(cases, [], 20, "s").index)
    assert len(minibatch(cases, ["c1"], 20, salt="s")) == 10


def test_a_candidate_is_shown_at_most_half_its_parents_weak_cases_and_screened_on_others():
    weak = [f"c{i}" for i in range(8)]
    assert shares(weak, 1) == [["c0", "c2", "c4", "c6"]]
    assert shares(weak, 3) == [["c0", "c4"], ["c1", "c5"], ["c2", "c6"]]  # c3, c7: no one's
    assert shares(["c0"], 2) == [["c0"], ["c0"]]  # fewer weak cases than children
    cases = [f"c{i}" for i in range(10)]
    batch = minibatch(cases, weak, 6, salt="cycle|1", shown=["c0", "c4"])
    # none of what it was shown; half of it the parent's other weak cases
    assert not {"c0", "c4"} & set(batch) and batch[:3] == ["c1", "c2", "c3"]
    assert len(minibatch(cases, weak, 20, salt="s", shown=["c0", "c4"])) == 8
    # a suite with no case left unshown screens on what it has
    assert sorted(minibatch(["a", "b"], ["a", "b"], 8, salt="s", shown=["a", "b"])) == ["a", "b"]


def test_the_screen_gain_counts_an_errored_case_as_a_loss():
    parent = _e("p", x=50, y=60)
    assert screen_gain(_e("c", x=70, y=60), parent, ["x", "y"]) == 10
    lost = Evaluation(run_id="c", version="c", score=None, case_scores={"x": 70},
                      errored_cases=frozenset({"y"}))
    assert screen_gain(lost, parent, ["x", "y"]) == (20 - 60) / 2
    assert screen_gain(_e("c"), parent, ["x", "y"]) is None


def judge(messages, tools, config):
    """'sorry' is worth 30 on c3-c8, 'order' 30 on c1 and c2: two edits that help
    different cases."""
    case = last_json(messages)
    i = int(re.sub(r"\D", "", str(case["input"])))
    score = 40 - i + (30 if "sorry" in case["output"] and i > 2 else 0) + (
        30 if "order" in case["output"] and i <= 2 else 0)
    return {"verdicts": {"quality": {"score": score, "reasoning": f"{score} points"}}}


def improver(messages, tools, config):
    """Reads what it is shown (each child of a parent every fourth of its weak cases, or
    every third, or every other): a share with c5 -> 'sorry' (or 'order' once it has
    'sorry'); one with c2 -> 'order'; another -> an edit that changes nothing."""
    data = last_json(messages)
    shown = {c["id"] for c in data["low_cases"]}
    system = data["prompt"]["system"]
    if "c5" in shown:
        return {"suggestions": [suggestion("Always say order." if "sorry" in system
                                           else "Always say sorry.")]}
    if "c2" in shown:
        return {"suggestions": [suggestion("Always say order.")]}
    return {"suggestions": [suggestion("Be calm.")]}


def test_a_round_of_three_screens_each_and_evaluates_the_best_in_full(population_world, store,
                                                                      bus_log):
    bus, log = bus_log
    result = asyncio.run(build_loop(population_world(), store=store, bus=bus,
                                    reviewer=AutoReviewer()).run())
    cid = result.cycle_id
    screened = [e for e in log if isinstance(e, ev.CandidateScreened)]
    first = [e for e in screened if e.round == 1]
    # round 1: three children of 1.0.0, each shown two of the eight cases and screened on
    # the six it was not shown; 'sorry' gains on five of them, 'order' on one, 'Be calm.'
    # on none: only the best goes on
    assert (first[0].slot, first[0].gain, first[0].kept) == (0, 25.0, True)
    assert sorted((e.gain, e.kept) for e in first[1:]) == [(0.0, False), (5.0, False)]
    assert all(e.cases == 6 and e.parent == "1.0.0" for e in first)
    runs = {r.id: r for r in store.runs.recent(cycle_id=cid, limit=None)}
    for e in first:
        assert runs[e.run_id].role == "screen" and e.run_id == f"{cid}-r1-s{e.slot}"
        # slot k was shown c(k+1) and c(k+5); its screen ran on the other six, once each
        assert set(store.runs.case_means(e.run_id)) == {f"c{i}" for i in range(1, 9)} - {
            f"c{e.slot + 1}", f"c{e.slot + 5}"}
        assert store.db.execute("SELECT count(*) FROM results WHERE run_id = ?",
                                [e.run_id]).fetchone()[0] == 6
    rounds = store.cycles.get_rounds(cid)
    assert rounds[1].candidate_version == first[0].version  # the round evaluated the kept one
    assert rounds[1].candidate_run_id == f"{cid}-r1" and runs[f"{cid}-r1"].role == "candidate"
    assert sorted({s.slot for s in store.cycles.get_suggestions(cid, 1)}) == [0, 1, 2]
    # round 2: the frontier holds 1.0.0 too (it ties on c1, c2), so one child is 1.0.0's
    proposed = [e for e in log if isinstance(e, ev.SuggestionsProposed) and e.round == 2]
    assert [e.parent for e in proposed] == [first[0].version, "1.0.0", first[0].version]
    # the best of round 2 says both words; head moved only through the confirmation
    assert [r.stage for r in result.rounds] == ["baseline", "improve", "improve", "confirm"]
    head = store.resolve("support@head")
    assert "say sorry" in head.prompt.system and "say order" in head.prompt.system
    assert result.stop_reason.endswith(f"head moved 1.0.0 -> {head.version}")


def test_a_population_cycle_killed_mid_round_resumes_paying_nothing_twice(population_world,
                                                                            store):
    """Cancelled while round 1 screens its candidates; the resume asks the improver for
    nothing again (its three answers are stored, by slot) and ends as an uncut cycle."""
    calls: list[str] = []

    def counting(messages, tools, config):
        calls.append(last_json(messages)["prompt"]["system"])
        return improver(messages, tools, config)

    loaded = population_world(stop={"max_rounds": 1})
    script("improver", counting)
    bus = ev.EventBus()

    def kill(event):
        if isinstance(event, ev.EvaluationStarted) and event.role == "screen" and \
                event.run_id.endswith("-s1"):
            raise asyncio.CancelledError

    bus.subscribe(kill)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(build_loop(loaded, store=store, bus=bus, reviewer=AutoReviewer()).run())
    assert len(calls) == 3
    (row,) = store.cycles.recent()
    result = asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run(
        resume=row.id))
    assert len(calls) == 3  # the improver was not asked again
    assert result.final_version != "1.0.0"
    assert "say sorry" in store.resolve("support@head").prompt.system


def test_population_one_is_the_chain(world, store, bus_log):
    bus, log = bus_log
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}],
                   improve={"stop": {"max_rounds": 1}})
    asyncio.run(build_loop(loaded, store=store, bus=bus, reviewer=AutoReviewer()).run())
    assert not [e for e in log if isinstance(e, ev.CandidateScreened)]
    assert all(e.parent is None and e.slot == 0 for e in log
               if isinstance(e, ev.SuggestionsProposed))


def test_the_dashboard_logs_each_candidate_and_its_screen():
    from cycle.tui.state import DashboardState

    state = DashboardState()
    for event in (ev.SuggestionsProposed(cycle_id="c", round=1, slot=1, parent="1.0.0",
                                         suggestions=[{}, {}]),
                  ev.CandidateScreened(cycle_id="c", round=1, slot=1, version="1.0.2",
                                       parent="1.0.0", run_id="c-r1-s1", gain=-2.5, cases=8)):
        state.apply(event)
    log = "\n".join(state.take_changes().log)
    assert "round 1: 2 suggestions proposed for candidate 2 (from v1.0.0)" in log
    assert "round 1: screen of v1.0.2 (from v1.0.0) on 8 cases: -2.5; ends here" in log
