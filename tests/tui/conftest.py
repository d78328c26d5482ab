"""Fixtures for the TUI tests: a real store with a few versions, a review request, and a
cycle.yaml on scripted models whose improver proposes three edits."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cycle import events as ev
from cycle.assemble.config import LoadedConfig, load_config
from cycle.records import JudgeKappa, Prompt, ReviewRequest, Suggestion
from cycle.store import Store
from cycle.testing import clear_scripts, script
from tests.loop.conftest import merge_world, world  # noqa: F401 (fixtures: a population's cycle)

#: a fixed time for every stored version, so screenshots do not depend on the clock
FIXED_AT = "2025-01-02T03:04:05+00:00"

SYSTEM_V1 = "You are a support agent.\nAnswer politely."


def _fix_times(store: Store) -> None:
    with store.transaction() as db:
        db.execute("update versions set created_at = ?", [FIXED_AT])


@pytest.fixture
def history_store(tmp_path: Path) -> Store:
    """A store with one prompt in three versions; head at the last, production at the first."""
    store = fill_history(Store.open(tmp_path / "cycle.db"))
    yield store
    store.close()


def fill_history(store: Store) -> Store:
    """``store`` with one prompt in three versions; head at the last, production at the first."""
    p1 = Prompt(id="support-reply", system=SYSTEM_V1)
    store.save_version(p1, source="initial", message="first draft", author="alice")
    p2 = p1.model_copy(update={"system": SYSTEM_V1 + "\nAlways cite the order number."})
    # a cycle's candidates: by the loop, on behalf of who ran it (cycle.authors)
    store.save_version(p2, source="improver", message="round 1: cite the order",
                       author="cycle (alice)")
    p3 = p2.model_copy(update={"system": p2.system.replace("politely", "politely and briefly")})
    store.save_version(p3, source="improver", message="round 2: be brief",
                       author="cycle (alice)")
    store.set_label("support-reply", "production", "1.0.0")
    store.save_version(Prompt(id="greeter", system="Say hello."), source="initial", message="hello")
    _fix_times(store)
    return store


def review_request() -> ReviewRequest:
    """Three suggestions on a small prompt, as the improver would propose them."""
    return ReviewRequest(
        cycle_id="c-test",
        round=1,
        prompt_id="support-reply",
        version="1.0.0",
        score=62.5,
        current={
            "system": SYSTEM_V1,
            "user_template": "{{ input }}",
            "params": json.dumps({"temperature": 0.2}),
        },
        suggestions=[
            Suggestion(
                id="s-low", type="parameters", priority="low",
                suggested_value='{"temperature": 0.0}',
                reasoning="Answers vary between iterations.",
                expected_improvement="Less variance.", target_cases=["refund-2"],
            ),
            Suggestion(
                id="s-high", type="system_prompt", priority="high",
                current_value="Answer politely.",
                suggested_value="Answer politely and cite the order number.",
                reasoning="Low-scoring cases miss the order number.",
                expected_improvement="+10 on accuracy", target_cases=["refund-1", "late-3"],
            ),
            Suggestion(
                id="s-mid", type="system_prompt", priority="medium",
                current_value="",
                suggested_value="Never promise a refund.",
                reasoning="One answer promised a refund.",
                expected_improvement="Fewer policy failures", target_cases=["refund-1"],
            ),
        ],
    )


T0 = 1_700_000_000.0


#: the judge's agreement as the rounds of the synthetic cycle report it: none labelled yet,
#: then 40 labels
UNCALIBRATED = JudgeKappa(model="offline:default", version="1.0.0", kappa=None, kappa_ci=None,
                          labels=0)
LABELLED = JudgeKappa(model="offline:default", version="1.0.0", kappa=0.62,
                      kappa_ci=(0.41, 0.8), labels=40)


def synthetic_events() -> list[ev.Event]:
    """A cycle's events up to the middle of round 2's evaluation, at fixed times."""
    cid = "c-test"
    out: list[ev.Event] = [
        ev.CycleStarted(at=T0, cycle_id=cid, prompt_id="support-reply", version="1.0.0"),
        ev.RoundStarted(at=T0, cycle_id=cid, round=0, version="1.0.0"),
        ev.RunStarted(at=T0, run_id="r0", prompt_id="support-reply", version="1.0.0", cases=4, iterations=2),
    ]
    scores = {"refund-1": (40.0, 50.0), "refund-2": (80.0, 90.0), "late-3": (55.0, 65.0), "hello-4": (100.0, 100.0)}
    t = T0
    for case, pair in scores.items():
        for i, score in enumerate(pair):
            t += 1
            out.append(ev.CaseFinished(at=t, run_id="r0", case_id=case, iteration=i, score=score,
                                       passed=score >= 70, cost=0.001))
    out += [
        ev.RunFinished(at=t, run_id="r0", score=72.5, pass_rate=0.5, cost=0.008),
        ev.RoundFinished(at=t, cycle_id=cid, round=0, version="1.0.0", score=72.5, ci_low=60.1,
                         ci_high=84.9, pass_rate=0.5, cost=0.008, judge_agreement=UNCALIBRATED),
        ev.RoundStarted(at=t + 1, cycle_id=cid, round=1, version="1.0.0"),
        ev.SuggestionsProposed(at=t + 2, cycle_id=cid, round=1, suggestions=[{}, {}]),
        ev.ReviewDecided(at=t + 3, cycle_id=cid, round=1, approved=1, rejected=1, reviewer="tui"),
        ev.VersionCreated(at=t + 3, prompt_id="support-reply", version="1.0.1", parent="1.0.0", source="improver"),
        ev.CandidateDecided(at=t + 20, cycle_id=cid, round=1, version="1.0.1", accepted=True, delta=8.5,
                            reason="significant gain"),
        ev.RoundFinished(at=t + 20, cycle_id=cid, round=1, version="1.0.1", score=81.0, ci_low=74.0,
                         ci_high=88.0, pass_rate=0.75, accepted=True, cost=0.012,
                         judge_agreement=LABELLED),  # someone labelled outputs meanwhile
        ev.CostUpdated(at=t + 20, total=0.02, limit=1.0),
        ev.RoundStarted(at=t + 21, cycle_id=cid, round=2, version="1.0.1"),
        ev.RunStarted(at=t + 22, run_id="r2", prompt_id="support-reply", version="1.0.2", cases=4, iterations=2),
        ev.CaseFinished(at=t + 23, run_id="r2", case_id="refund-1", iteration=0, score=85.0, passed=True),
        ev.CaseFinished(at=t + 24, run_id="r2", case_id="refund-2", iteration=0, score=None, passed=None,
                        error="timeout after 30s"),
        ev.CaseFinished(at=t + 25, run_id="r2", case_id="late-3", iteration=0, score=60.0, passed=False),
    ]
    return out


# -- a cycle on scripted models ---------------------------------------------

KEYWORDS = ("sorry", "order", "thanks")
_JSON_BLOCK = re.compile(r"```json\s*(.*?)```", re.DOTALL)


def _agent(messages, tools, config) -> str:  # type: ignore[no-untyped-def]
    system = next((m.content for m in messages if m.role == "system"), "")
    return "Hello. " + " ".join(k for k in KEYWORDS if f"say {k}" in system)


def _judge(messages, tools, config) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    user = [m for m in messages if m.role == "user"][-1].content
    case = json.loads(_JSON_BLOCK.findall(user)[-1])
    score = 40 + 20 * sum(k in case["output"] for k in KEYWORDS)
    return {"verdicts": {"quality": {"score": score, "reasoning": f"{score} points for the keywords"}}}


def _suggestion(value: str, priority: str) -> dict[str, Any]:
    return {"type": "system_prompt", "priority": priority, "current_value": "", "suggested_value": value,
            "reasoning": f"answers lack: {value}", "expected_improvement": "+20", "target_cases": ["c1"]}


@pytest.fixture
def loaded(tmp_path: Path) -> Iterator[LoadedConfig]:
    script("agent", _agent)
    script("judge", _judge)
    script("improver", [{"suggestions": [
        _suggestion("Always say sorry.", "high"),
        _suggestion("Always say order.", "medium"),
        _suggestion("Always say nothing.", "low"),
    ]}])
    (tmp_path / "prompt.yaml").write_text(json.dumps({"id": "support", "system": "You help customers."}))
    (tmp_path / "cases.yaml").write_text(json.dumps([{"id": f"c{i}", "input": f"case {i}"} for i in range(1, 7)]))
    (tmp_path / "cycle.yaml").write_text(json.dumps({
        "prompt": "prompt.yaml", "agent": "scripted:agent", "judge": "scripted:judge",
        "improver": "scripted:improver",
        "criteria": [{"id": "quality", "rubric": "Uses the right keywords."}],
        "cases": ["cases.yaml"], "run": {"iterations": 2, "concurrency": 4},
        "improve": {"acceptance": "improved", "stop": {"max_rounds": 1}},
    }))
    yield load_config(tmp_path / "cycle.yaml")
    clear_scripts()


def population_events() -> list[ev.Event]:
    """A cycle with a population of three, at fixed times, up to the middle of round 2's
    full evaluation: round 1 screened three children of 1.0.0 and kept 1.0.1; round 2
    screened two children of 1.0.1 and one of 1.0.0 (the frontier holds both), the best
    being evaluated in full."""
    cid = "c-test"
    t = T0
    out: list[ev.Event] = [
        ev.CycleStarted(at=t, cycle_id=cid, prompt_id="support-reply", version="1.0.0"),
        ev.RoundStarted(at=t, cycle_id=cid, round=0, version="1.0.0", stage="baseline"),
        ev.RoundFinished(at=t + 8, cycle_id=cid, round=0, version="1.0.0", score=62.0,
                         ci_low=55.0, ci_high=69.0, pass_rate=0.5, cost=0.008,
                         stage="baseline"),
    ]

    def population_round(n: int, at: float, incumbent: str, frontier: dict[str, int],
                         children: list[tuple[str, str, float]]) -> list[ev.Event]:
        events: list[ev.Event] = [
            ev.RoundStarted(at=at, cycle_id=cid, round=n, version=incumbent),
            ev.FrontierChanged(at=at, cycle_id=cid, round=n, versions=frontier)]
        for slot, (version, parent, _) in enumerate(children):
            events += [
                ev.SuggestionsProposed(at=at + 1, cycle_id=cid, round=n, slot=slot,
                                       parent=parent, suggestions=[{}, {}]),
                ev.ReviewDecided(at=at + 1, cycle_id=cid, round=n, approved=2, rejected=0,
                                 reviewer="auto", slot=slot),
                ev.VersionCreated(at=at + 1, prompt_id="support-reply", version=version,
                                  parent=parent, source="improver", cycle_id=cid, round=n,
                                  slot=slot)]
        best = max(range(len(children)), key=lambda k: children[k][2])
        events += [ev.CandidateScreened(
            at=at + 3, cycle_id=cid, round=n, slot=slot, version=version, parent=parent,
            run_id=f"{cid}-r{n}-s{slot}", gain=gain, cases=8, kept=slot == best)
            for slot, (version, parent, gain) in enumerate(children)]
        return events

    out += population_round(1, t + 9, "1.0.0", {"1.0.0": 4},
                            [("1.0.1", "1.0.0", 12.5), ("1.0.2", "1.0.0", -2.5),
                             ("1.0.3", "1.0.0", 4.0)])
    out += [
        ev.CandidateDecided(at=t + 20, cycle_id=cid, round=1, version="1.0.1", accepted=True,
                            delta=10.5, reason="significant gain"),
        ev.FrontierChanged(at=t + 20, cycle_id=cid, round=1, versions={"1.0.1": 3, "1.0.0": 1}),
        ev.RoundFinished(at=t + 20, cycle_id=cid, round=1, version="1.0.1", score=72.5,
                         ci_low=66.0, ci_high=79.0, pass_rate=0.75, accepted=True, delta=10.5,
                         cost=0.02),
        ev.CostUpdated(at=t + 20, total=0.028, limit=1.0),
    ]
    out += population_round(2, t + 21, "1.0.1", {"1.0.1": 3, "1.0.0": 1},
                            [("1.0.4", "1.0.1", 6.0), ("1.0.5", "1.0.0", 1.5),
                             ("1.0.6", "1.0.1", -1.0)])
    out += [
        ev.EvaluationStarted(at=t + 25, cycle_id=cid, round=2, role="candidate",
                             version="1.0.4", run_id=f"{cid}-r2"),
        ev.RunStarted(at=t + 25, run_id=f"{cid}-r2", prompt_id="support-reply",
                      version="1.0.4", cases=4, iterations=2),
        ev.CaseFinished(at=t + 26, run_id=f"{cid}-r2", case_id="refund-1", iteration=0,
                        score=85.0, passed=True),
        ev.CaseFinished(at=t + 27, run_id=f"{cid}-r2", case_id="late-3", iteration=0,
                        score=70.0, passed=True),
    ]
    return out
