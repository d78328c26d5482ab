"""The loop driven by a scripted agent, judge and improver: acceptance, rejection, stop
conditions, skipped suggestions and the cost cap."""

from __future__ import annotations

import asyncio

from cycle.assemble import build_loop
from cycle.loop.review import AutoReviewer
from tests.conftest import AUTHOR

from .conftest import suggestion

CYCLE = f"cycle ({AUTHOR})"  # the loop acts on behalf of who ran it


def run_loop(loaded, store, bus=None, reviewer=None, resume=None):
    loop = build_loop(loaded, store=store, bus=bus, reviewer=reviewer or AutoReviewer())
    return asyncio.run(loop.run(resume=resume))


def test_accepts_improvements_until_max_rounds(world, store, bus_log) -> None:
    bus, log = bus_log
    loaded = world([
        {"suggestions": [suggestion("Always say sorry.")]},
        {"suggestions": [suggestion("Always say order.")]},
    ], improve={"acceptance": "significant", "stop": {"max_rounds": 2}})
    result = run_loop(loaded, store, bus)
    assert result.stop_reason == ("max_rounds: 2 of 2 rounds run; confirmed on fresh samples (+40.0): "
                                  "head moved 1.0.0 -> 1.0.2")
    assert [r.stage for r in result.rounds] == ["baseline", "improve", "improve", "confirm"]
    assert [r.accepted for r in result.rounds] == [None, True, True, True]
    assert [round(r.score) for r in result.rounds] == [38, 58, 78, 78]  # 40 + 20k - mean handicap 2.5
    assert result.initial_version == "1.0.0" and result.final_version == "1.0.2"
    assert result.final_score == result.rounds[-1].score  # the fresh evaluation's
    assert store.resolve("support@head").version == "1.0.2"
    assert "say order" in store.resolve("support@head").prompt.system
    # head moved once, after the confirmation, with the evidence recorded
    (move,) = [m for m in store.label_moves("support", label="head") if m.who == CYCLE]
    assert "confirmed on fresh samples" in move.reason and "significant" in move.reason
    assert "head stays at 1.0.0 until a confirmation" in result.rounds[1].reason
    rows = store.cycles.get_rounds(result.cycle_id)
    assert [r.status for r in rows] == ["finished"] * 4
    assert rows[1].baseline_run_id == f"{result.cycle_id}-r0" and rows[2].baseline_run_id == f"{result.cycle_id}-r1"
    # the confirmation evaluates both versions again, under their own runs
    assert rows[3].stage == "confirm" and rows[3].incumbent_version == "1.0.0"
    assert rows[3].candidate_version == "1.0.2"
    assert rows[3].baseline_run_id == f"{result.cycle_id}-r3-baseline"
    assert rows[3].candidate_run_id == f"{result.cycle_id}-r3"
    assert store.cycles.get(result.cycle_id).status == "finished"
    kinds = [e.kind for e in log]
    for kind in ("cycle_started", "round_started", "evaluation_started", "suggestions_proposed",
                 "review_decided", "version_created", "candidate_decided", "round_finished", "cycle_finished"):
        assert kind in kinds
    assert result.offline


def test_rejected_candidate_goes_back_to_the_improver_with_evidence(world, store) -> None:
    seen_rejected: list = []

    def improver(messages, tools, config):
        from .conftest import last_json
        data = last_json(messages)
        seen_rejected.append(data["rejected"])
        if len(seen_rejected) == 1:  # a useless edit: the score does not move
            return {"suggestions": [suggestion("Be nice.")]}
        return {"suggestions": [suggestion("Always say thanks.")]}

    loaded = world(improver, improve={"stop": {"max_rounds": 2}})
    result = run_loop(loaded, store)
    assert [r.accepted for r in result.rounds[1:]] == [False, True, True]
    assert "not significant" in result.rounds[1].reason or "too few" in result.rounds[1].reason
    assert seen_rejected[0] == []
    (rejected,) = seen_rejected[1]
    assert rejected["suggested_value"] == "Be nice." and "candidate was rejected" in rejected["reason"]
    assert store.resolve("support@head").version == result.final_version
    versions = [v.version for v in store.history("support")]
    assert "1.0.1" in versions  # the rejected candidate is kept, head never pointed at it
    assert result.final_version == "1.0.2"


def test_unappliable_suggestions_are_skipped_and_reported(world, store) -> None:
    loaded = world([{"suggestions": [
        suggestion("nothing", current="text that is not in the prompt"),
        suggestion("Always say sorry.", priority="medium"),
    ]}], improve={"stop": {"max_rounds": 1}})
    result = run_loop(loaded, store)
    stored = store.cycles.get_suggestions(result.cycle_id, 1)
    assert [s.decision for s in stored] == ["skipped", "approved"]
    assert "does not occur" in stored[0].reason and not stored[0].applied
    assert stored[1].applied
    assert result.rounds[1].accepted


def test_every_suggestion_rejected_makes_no_candidate(world, store) -> None:
    loaded = world([{"suggestions": [suggestion("x", priority="low")]}] * 3,
                   improve={"stop": {"no_improvement": 2}})
    result = run_loop(loaded, store, reviewer=AutoReviewer(min_priority="high"))
    assert result.stop_reason.startswith("no_improvement: 2 rounds")
    assert [r.accepted for r in result.rounds[1:]] == [False, False]
    assert "no candidate" in result.rounds[1].reason
    assert [v.version for v in store.history("support")] == ["1.0.0"]


def test_target_score_can_stop_after_the_baseline(world, store) -> None:
    loaded = world([], improve={"stop": {"any": [{"target_score": 30}, {"max_rounds": 3}]}})
    result = run_loop(loaded, store)
    assert result.stop_reason.startswith("target_score") and len(result.rounds) == 1


def test_target_score_reached_after_rounds_and_composed_all(world, store) -> None:
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]},
                    {"suggestions": [suggestion("Always say order.")]},
                    {"suggestions": [suggestion("Always say thanks.")]}],
                   improve={"stop": {"any": [{"all": [{"target_score": 50}, {"max_rounds": 2}]},
                                              {"max_rounds": 3}]}})
    result = run_loop(loaded, store)
    assert result.improvement_rounds == 2
    assert " and max_rounds" in result.stop_reason and "confirmed" in result.stop_reason


def test_nothing_to_improve_stops(world, store) -> None:
    loaded = world([], system="Always say sorry. Always say order. Always say thanks.",
                   improve={"low_score": 50, "stop": {"max_rounds": 3}})
    result = run_loop(loaded, store)
    assert result.stop_reason.startswith("nothing to improve")


def test_acceptance_always_accepts_a_worse_candidate(world, store) -> None:
    loaded = world([{"suggestions": [suggestion("Do not apologise.", current="Always say sorry.")]}],
                   system="Always say sorry.", improve={"acceptance": "always", "stop": {"max_rounds": 1}})
    result = run_loop(loaded, store)
    assert result.rounds[1].accepted and result.rounds[1].delta < 0
    assert store.resolve("support@head").version == "1.0.1"


def test_custom_stop_predicate(world, store, tmp_path) -> None:
    (tmp_path / "stops.py").write_text(
        "def one_round(state):\n    return state.improvement_rounds >= 1 and 'one is enough'\n")
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}] * 3,
                   improve={"stop": {"any": [{"custom": "stops:one_round"}, {"max_rounds": 3}]}})
    result = run_loop(loaded, store)
    assert result.stop_reason.startswith("custom: one is enough; confirmed on fresh samples")


def test_cost_cap_reached_mid_round_stops_cleanly(world, store) -> None:
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}] * 2,
                   improve={"stop": {"any": [{"max_rounds": 3}, {"max_cost": 0.25}]}})
    # agent and judge on the priced provider: 8 iterations x 2 calls = $0.16 per evaluation
    cfg = loaded.path.read_text().replace("scripted:agent", "paid:agent").replace("scripted:judge", "paid:judge")
    loaded.path.write_text(cfg)
    from cycle.assemble.config import load_config

    result = run_loop(load_config(loaded.path), store)
    assert result.stop_reason.startswith("max_cost: $0.2")
    assert "round 1 was stopped mid-way" in result.stop_reason
    # never over the cap: a call is sent only when its worst case (4096 output tokens
    # unless max_tokens says less: about $0.04 here) fits what is left
    assert 0.25 - 0.05 <= result.total_cost <= 0.25
    rows = store.cycles.get_rounds(result.cycle_id)
    assert [r.status for r in rows] == ["finished", "stopped"]
    assert rows[1].candidate_run_id and rows[1].accepted is None
    stored = store.db.execute("SELECT count(*) FROM results WHERE run_id = ?", (rows[1].candidate_run_id,)).fetchone()[0]
    assert 0 < stored < 8  # what was judged before the cap is kept
    assert store.resolve("support@head").version == "1.0.0"  # a half-evaluated candidate never becomes head
    cycle = store.cycles.get(result.cycle_id)
    assert cycle.status == "finished" and cycle.stop_reason == result.stop_reason
    assert abs(cycle.total_cost - result.total_cost) < 1e-9
    assert result.cost_by_role["agent"] > 0 and result.cost_by_role["judge"] > 0


def test_cost_per_round_split_by_role(world, store) -> None:
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}], improve={"stop": {"max_rounds": 1}})
    cfg = loaded.path.read_text().replace("scripted:agent", "paid:agent").replace(
        "scripted:improver", "paid:improver")
    loaded.path.write_text(cfg)
    from cycle.assemble.config import load_config

    result = run_loop(load_config(loaded.path), store)
    rows = store.cycles.get_rounds(result.cycle_id)
    assert rows[0].cost == 0.08  # 8 agent calls; the scripted judge is free
    assert abs(rows[1].cost - 0.09) < 1e-9  # 8 agent calls + 1 improver call
    assert abs(rows[2].cost - 0.16) < 1e-9  # the confirmation: both versions again, fresh
    assert abs(result.total_cost - 0.33) < 1e-9
    by_role = {k: round(v, 6) for k, v in result.cost_by_role.items()}
    assert by_role == {"agent": 0.32, "judge": 0.0, "improver": 0.01}


def test_stop_conditions_that_may_never_hold_are_refused(world, store) -> None:
    import pytest

    from cycle.errors import ConfigError

    loaded = world([], improve={"stop": {"target_score": 99}})
    with pytest.raises(ConfigError, match="could run forever"):
        build_loop(loaded, store=store, reviewer=AutoReviewer())


def test_a_repeated_suggestion_is_not_evaluated_again(world, store) -> None:
    loaded = world([{"suggestions": [suggestion("Be nice.")]}] * 2, improve={"stop": {"max_rounds": 2}})
    result = run_loop(loaded, store)
    second = result.rounds[2]
    assert not second.accepted and second.reason.startswith("no candidate")
    (stored,) = store.cycles.get_suggestions(result.cycle_id, 2)
    assert stored.decision == "rejected" and "repeats an edit already refused" in stored.reason
    runs = {r.id for r in store.runs.recent(cycle_id=result.cycle_id, limit=None)}
    assert runs == {f"{result.cycle_id}-r0", f"{result.cycle_id}-r1"}  # round 2 paid for nothing


def test_a_cycle_never_takes_the_id_of_a_stored_one(world, store, monkeypatch) -> None:
    """Two cycles started in the same second with the same random suffix (found by the
    acceptance benchmark, 5,000 cycles in a few minutes): the second would have resumed the
    first's runs as its own. It draws again instead."""
    from cycle.loop import ledger

    ids = iter(["c-20260101-000000-aaaaaa", "c-20260101-000000-aaaaaa", "c-20260101-000000-bbbbbb"])
    monkeypatch.setattr(ledger, "new_cycle_id", lambda: next(ids))
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}] * 2,
                   improve={"stop": {"max_rounds": 1}})
    first = run_loop(loaded, store)
    second = run_loop(loaded, store)
    assert (first.cycle_id, second.cycle_id) == ("c-20260101-000000-aaaaaa", "c-20260101-000000-bbbbbb")
    assert store.db.execute("SELECT count(*) FROM results WHERE run_id = ?",
                            (f"{second.cycle_id}-r0",)).fetchone()[0] == 8
