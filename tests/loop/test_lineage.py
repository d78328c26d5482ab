"""A cycle's lineage read from its ledger (cycle.loop.lineage): every candidate under its
parent with its screen, full evaluation and decision, and the frontier; the same whether
the cycle finished, is still running or was resumed after a kill."""

from __future__ import annotations

import asyncio

import pytest

from cycle import events as ev
from cycle.assemble import build_loop
from cycle.loop.lineage import lineage_of
from cycle.loop.review import AutoReviewer
from cycle.store import Store


def shown(lineage) -> list[tuple]:
    """The tree as a person reads it: depth, version, round, candidate, parents, screen,
    full evaluation, decision, head, frontier."""
    return [(depth, c.version, c.round, c.slot, c.parent, c.second_parent, c.screen_gain,
             c.score, c.delta, c.decision, c.confirmed, c.head, c.frontier)
            for depth, c in lineage.tree()]


def test_a_finished_cycles_lineage_holds_every_candidate_under_its_parent(merge_world, store,
                                                                         bus_log):
    """Two rounds of two candidates, then a merge: each candidate under the version it
    was built from, the merge with both parents, head where the confirmation moved it,
    and the frontier the loop itself last told."""
    bus, log = bus_log
    early: list = []

    def look(event):  # what a report written while round 3 starts reads
        if isinstance(event, ev.RoundStarted) and event.round == 3:
            early.append(lineage_of(store, event.cycle_id))

    bus.subscribe(look)
    result = asyncio.run(build_loop(merge_world([]), store=store, bus=bus,
                                    reviewer=AutoReviewer()).run())
    lineage = lineage_of(store, result.cycle_id)
    assert lineage.population == 2 and lineage.head == result.final_version == "1.0.4"
    assert shown(lineage) == [
        (0, "1.0.0", 0, None, None, None, None, 35.5, None, "start", None, False, 0),
        (1, "1.0.1", 1, 0, "1.0.0", None, 24.0, 58.0, 22.5, "kept", None, False, 6),
        (2, "1.0.4", 3, 1, "1.0.1", "1.0.3", 7.5, 65.5, 7.5, "kept", True, True, 8),
        (1, "1.0.2", 1, 1, "1.0.0", None, 0.0, None, None, "ended at its screen", None, False, 0),
        (1, "1.0.3", 2, 1, "1.0.0", None, 7.5, 43.0, -15.0, "rejected", None, False, 2),
    ]
    # every screen the loop told is in it, and the frontier is the one it told last
    screens = [e for e in log if isinstance(e, ev.CandidateScreened)]
    assert {(e.round, e.slot, e.version, e.gain, e.kept) for e in screens} == {
        (c.round, c.slot, c.version, c.screen_gain, c.evaluated)
        for c in lineage.candidates if c.screened}
    told = [e for e in log if isinstance(e, ev.FrontierChanged)]
    assert lineage.frontier == told[-1].versions == {"1.0.4": 8, "1.0.1": 6, "1.0.3": 2}

    # while it ran: rounds 1 and 2 as stored, nothing of round 3 yet, head not moved
    (running,) = early
    assert [c.version for c in running.candidates] == ["1.0.0", "1.0.1", "1.0.2", "1.0.3"]
    assert running.head == "1.0.0" and not any(c.confirmed for c in running.candidates)
    before = [e for e in told if e.round == 2][-1]
    assert running.frontier == before.versions == {"1.0.1": 6, "1.0.3": 2}


def test_a_resumed_cycle_has_the_lineage_of_one_never_cut(population_world, store, tmp_path):
    """Killed once round 2 had screened its candidates, as its best's full evaluation
    began: the resume screens them again (from the stored runs), writes their screens over
    the same rows, and ends with the tree an uncut cycle draws."""
    loaded = population_world()
    bus = ev.EventBus()

    def kill(event):
        if isinstance(event, ev.EvaluationStarted) and event.role == "candidate" and \
                event.round == 2:
            raise asyncio.CancelledError

    bus.subscribe(kill)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(build_loop(loaded, store=store, bus=bus, reviewer=AutoReviewer()).run())
    (row,) = store.cycles.recent()
    before = store.cycles.get_screens(row.id)
    assert {s.round for s in before} == {1, 2}
    asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run(resume=row.id))
    resumed = lineage_of(store, row.id)

    with Store.open(tmp_path / "uncut.db") as other:
        done = asyncio.run(build_loop(loaded, store=other, reviewer=AutoReviewer()).run())
        uncut = lineage_of(other, done.cycle_id)
    assert shown(resumed) == shown(uncut)
    assert resumed.frontier == uncut.frontier and resumed.head == uncut.head
    # each candidate's screen once, as first written, however often its round began
    assert store.cycles.get_screens(row.id) == before


def test_a_chain_is_a_lineage_of_one_candidate_a_round(world, store):
    """A round of one screens nothing: its candidate goes straight to the full evaluation,
    built on the incumbent."""
    from .conftest import suggestion

    loaded = world([{"suggestions": [suggestion("Always say sorry.")]},
                    {"suggestions": [suggestion("Always say order.")]}],
                   improve={"stop": {"max_rounds": 2}})
    result = asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run())
    lineage = lineage_of(store, result.cycle_id)
    assert lineage.population == 1 and not store.cycles.get_screens(result.cycle_id)
    assert [(d, c.version, c.parent, c.screened, c.decision) for d, c in lineage.tree()] == [
        (0, "1.0.0", None, False, "start"), (1, "1.0.1", "1.0.0", False, "kept"),
        (2, "1.0.2", "1.0.1", False, "kept")]


def test_a_team_store_holds_the_same_lineage(population_world, store, postgres):
    """The screens are written and read back the same on PostgreSQL as on SQLite."""
    loaded = population_world()
    done = asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run())
    with Store.open(postgres.schema_url()) as team:
        there = asyncio.run(build_loop(loaded, store=team, reviewer=AutoReviewer()).run())
        assert shown(lineage_of(team, there.cycle_id)) == shown(lineage_of(store, done.cycle_id))
        assert [s.gain for s in team.cycles.get_screens(there.cycle_id)] == [
            s.gain for s in store.cycles.get_screens(done.cycle_id)]


def test_a_population_cycle_stored_before_screens_shows_its_evaluated_candidates(
        merge_world, store):
    """A cycle run before the screens table has none: each round's evaluated candidate is
    still drawn, under the version it was built from (round 2's under 1.0.0, though its
    incumbent was 1.0.1), and the frontier is the same."""
    result = asyncio.run(build_loop(merge_world([]), store=store,
                                    reviewer=AutoReviewer()).run())
    full = lineage_of(store, result.cycle_id)
    with store.transaction() as db:
        db.execute("DELETE FROM screens")
    old = lineage_of(store, result.cycle_id)
    assert [(d, c.version, c.parent, c.score, c.decision) for d, c in old.tree()] == [
        (0, "1.0.0", None, 35.5, "start"), (1, "1.0.1", "1.0.0", 58.0, "kept"),
        (2, "1.0.4", "1.0.1", 65.5, "kept"), (1, "1.0.3", "1.0.0", 43.0, "rejected")]
    assert old.frontier == full.frontier and old.head == full.head == "1.0.4"
