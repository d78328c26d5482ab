"""cycles / rounds / suggestions written by the recorder as events happen, and read back."""

from __future__ import annotations

from sqlite_utils import Database

from cycle import events as ev
from cycle.records import Prompt, Suggestion
from cycle.store import Store
from cycle.store.cycles import (
    CycleRecorder,
)


def test_recorder_writes_the_cycle_as_it_happens(tmp_path) -> None:
    store = Store.open(tmp_path / "c.db")
    v1 = store.save_version(Prompt(id="p", system="a"))
    bus = ev.EventBus()
    bus.subscribe(CycleRecorder(store.cycles))
    bus.emit(ev.CycleStarted(cycle_id="c1", prompt_id="p", version=v1.version, config={"acceptance": "always"}))
    bus.emit(ev.RoundStarted(cycle_id="c1", round=0, version=v1.version))
    bus.emit(ev.EvaluationStarted(cycle_id="c1", round=0, role="baseline", version=v1.version, run_id="c1-r0"))
    bus.emit(ev.RoundFinished(cycle_id="c1", round=0, version=v1.version, score=50.0, ci_low=40, ci_high=60))
    assert store.cycles.latest_resumable("p").id == "c1"  # running: a kill leaves it resumable

    s = Suggestion(type="system_prompt", suggested_value="b")
    bus.emit(ev.RoundStarted(cycle_id="c1", round=1, version=v1.version))
    bus.emit(ev.SuggestionsProposed(cycle_id="c1", round=1, suggestions=[s.model_dump()]))
    assert store.cycles.get_suggestions("c1", 1)[0].decision == "pending"
    decided = {**s.model_dump(), "decision": "approved", "applied": True}
    bus.emit(ev.ReviewDecided(cycle_id="c1", round=1, approved=1, rejected=0, suggestions=[decided]))
    v2 = store.save_version(Prompt(id="p", system="b"), source="improver", move_head=False)
    bus.emit(ev.EvaluationStarted(cycle_id="c1", round=1, role="baseline", version=v1.version, run_id="c1-r0"))
    bus.emit(ev.EvaluationStarted(cycle_id="c1", round=1, role="candidate", version=v2.version, run_id="c1-r1"))
    bus.emit(ev.CandidateDecided(cycle_id="c1", round=1, version=v2.version, accepted=True, reason="ok", delta=5))
    bus.emit(ev.RoundFinished(cycle_id="c1", round=1, version=v2.version, score=55.0, incumbent_score=50, cost=0.1))
    bus.emit(ev.CycleFinished(cycle_id="c1", reason="max_rounds: 1 of 1", final_version=v2.version,
                              score=55.0, total_cost=0.1))

    cycle = store.cycles.get("c1")
    assert cycle.status == "finished" and cycle.stop_reason.startswith("max_rounds")
    assert cycle.config == {"acceptance": "always"} and cycle.final_version == v2.version
    r0, r1 = store.cycles.get_rounds("c1")
    assert (r0.baseline_run_id, r0.score, r0.accepted, r0.version) == ("c1-r0", 50.0, None, v1.version)
    assert (r1.candidate_run_id, r1.accepted, r1.delta, r1.reason, r1.version) == ("c1-r1", True, 5, "ok", v2.version)
    stored = store.cycles.get_suggestions("c1")[0]
    assert stored.decision == "approved" and stored.applied and stored.round == 1
    assert store.cycles.latest_resumable("p") is None
    assert [c.id for c in store.cycles.recent("p")] == ["c1"]
    assert store.cycles.round_version("c1", 0) == ("p", v1.version)
    assert store.cycles.round_version("c1", 1) == ("p", v2.version)


def test_round_costs_split_by_role(tmp_path) -> None:
    store = Store.open(tmp_path / "c.db")
    db = Database(store.db)
    db["runs"].insert_all([
        {"id": "r0", "status": "finished", "cycle_id": "c1", "round": 0},
        {"id": "r1", "status": "finished", "cycle_id": "c1", "round": 1},
    ])
    db["calls"].insert_all([
        {"run_id": "r0", "role": "agent", "cost": 0.01}, {"run_id": "r0", "role": "judge", "cost": 0.02},
        {"run_id": "r1", "role": "agent", "cost": 0.03},
        {"cycle_id": "c1", "round": 1, "role": "improver", "cost": 0.5},
        {"cycle_id": "other", "round": 1, "role": "improver", "cost": 9.0},
    ])
    assert store.cycles.round_costs("c1") == {0: {"agent": 0.01, "judge": 0.02}, 1: {"agent": 0.03, "improver": 0.5}}
