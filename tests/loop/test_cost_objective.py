"""improve.objective: cost: a cycle that looks for the cheapest version not worse than the
incumbent by more than a margin. The agent is a scripted model billed by the character
(``tariff:big`` at $10 a million tokens, ``tariff:small`` at $1), so a shorter prompt and a
cheaper model both cost less; the judge is conftest's (40 plus 20 a keyword the answer
says, minus a per-case handicap)."""

from __future__ import annotations

import asyncio
import json

import pytest

from cycle import events as ev
from cycle.assemble import build_loop
from cycle.assemble.config import load_config
from cycle.llm.registry import register_provider
from cycle.loop.review import AutoReviewer
from cycle.records import Usage
from cycle.store import Store
from cycle.testing import ScriptedAPI, script

from .conftest import agent_answer, suggestion

FILLER = "Please be courteous, calm, careful, thorough and kind in every single reply."
SYSTEM = f"You help customers. {FILLER} Always say sorry. Always say order. Always say thanks."


class TariffAPI(ScriptedAPI):
    """``tariff:<script>``: a scripted model billed one token a character both ways."""

    provider = "tariff"
    offline = False  # priced like a real model

    async def generate(self, messages, tools, config):
        out = await super().generate(messages, tools, config)
        sent = sum(len(m.content or "") for m in messages)
        return out.model_copy(update={"usage": Usage(input_tokens=sent,
                                                     output_tokens=len(out.text or ""))})


register_provider("tariff", TariffAPI)


@pytest.fixture
def cost_world(world):
    """``cost_world(improver, improve={...}, agent='tariff:big')`` -> a LoadedConfig of
    eight cases (none required), two iterations each (conftest's world, priced)."""

    def make(improver, *, improve=None, agent="tariff:big", cases=8, system=SYSTEM):
        loaded = world(improver, improve={"objective": "cost", "margin": 2, **(improve or {})},
                       cases=cases, system=system, agent=agent, required=False, config={
                           "pricing": {"big": {"input": 10, "output": 10},
                                       "small": {"input": 1, "output": 1}}})
        for name in ("big", "small"):
            script(name, agent_answer)
        return loaded

    return make


def run(loaded, store, *, bus=None, resume=None):
    loop = build_loop(loaded, store=store, bus=bus, reviewer=AutoReviewer())
    return asyncio.run(loop.run(resume=resume))


def agent_cost(store, run_id: str) -> float:
    costs = store.runs.agent_case_costs(run_id)
    return sum(costs.values()) / len(costs)


def shorter(messages, tools, config):
    """The improver, asked for a cheaper prompt: it cuts the filler sentence."""
    return {"suggestions": [suggestion("", current=FILLER)]}


@pytest.fixture
def either_store(store_target):
    """The store on SQLite, then on PostgreSQL (the costs are read back by a query)."""
    with Store.open(store_target) as s:
        yield s


def test_a_cheaper_model_and_a_shorter_prompt_as_good_are_promoted_and_cost_drops(
        cost_world, either_store, bus_log) -> None:
    bus, log = bus_log
    store = either_store
    asked: list = []

    def improver(messages, tools, config):
        asked.append(messages)
        return shorter(messages, tools, config)

    loaded = cost_world(improver, improve={"models": ["tariff:small"],
                                           "stop": {"max_rounds": 2}})
    result = run(loaded, store, bus=bus)
    assert [r.stage for r in result.rounds] == ["baseline", "improve", "improve", "confirm"]
    assert [r.accepted for r in result.rounds] == [None, True, True, True]
    # round 1 moved the prompt to the cheaper model, asking no improver; round 2 asked it
    # for a cheaper prompt, and said what the agent spends
    moved = store.get_version("support", result.rounds[1].version).prompt
    assert moved.params["model"] == "tariff:small" and moved.system == SYSTEM
    (message,) = asked
    assert "Objective: cost, not score" in message[0].content
    assert '"cost_per_case"' in message[1].content and '"margin": 2.0' in message[1].content
    final = store.resolve("support@head")
    assert final.version == result.final_version == result.rounds[2].version
    assert FILLER not in final.prompt.system and final.prompt.params["model"] == "tariff:small"
    # the scores did not move; the agent's cost per case fell, on the fresh samples too
    assert result.final_score == result.initial_score
    before = agent_cost(store, f"{result.cycle_id}-r0")
    after = agent_cost(store, f"{result.cycle_id}-r3")  # the confirmation's fresh run
    assert after < before / 10
    decided = [e for e in log if isinstance(e, ev.CandidateDecided)]
    assert all("cheaper and not worse by more than the margin" in e.reason for e in decided)
    assert "agent cost per case $" in decided[-1].reason and "margin -2" in decided[-1].reason
    # --events and the TUI get the figures too (the confirmation's: fresh runs)
    assert decided[-1].cost == pytest.approx(after)
    assert decided[-1].cost_delta == pytest.approx(after - before)
    assert "confirmed on fresh samples" in result.stop_reason


def test_a_cheaper_candidate_worse_by_more_than_the_margin_is_refused(cost_world, store) -> None:
    def improver(messages, tools, config):  # cheaper: it drops a keyword the judge wants
        return {"suggestions": [suggestion("", current="Always say thanks.")]}

    result = run(cost_world(improver, improve={"stop": {"max_rounds": 1}}), store)
    assert [r.accepted for r in result.rounds] == [None, False]
    reason = result.rounds[1].reason
    assert reason.startswith("rejected: cheaper, but not shown to be within the margin")
    assert "paired score difference -20.00" in reason
    assert result.final_version == result.initial_version == store.resolve("support@head").version


def test_a_candidate_that_is_not_cheaper_is_refused(cost_world, store) -> None:
    def improver(messages, tools, config):  # as good, but longer
        return {"suggestions": [suggestion("Take a deep breath first.")]}

    result = run(cost_world(improver, improve={"stop": {"max_rounds": 1}}), store)
    assert [r.accepted for r in result.rounds] == [None, False]
    assert result.rounds[1].reason.startswith("rejected: not cheaper (agent cost per case $")


def test_a_world_whose_agent_costs_nothing_stops_saying_why(cost_world, store) -> None:
    calls: list = []
    result = run(cost_world(lambda *a: calls.append(a) or shorter(*a), agent="scripted:agent",
                            improve={"stop": {"max_rounds": 3}}), store)
    assert calls == []  # nothing was asked of the improver
    assert [r.stage for r in result.rounds] == ["baseline"]
    assert result.stop_reason.startswith("nothing to make cheaper: 1.0.0's agent calls cost $0 "
                                         "per case")


def test_a_cost_cycle_killed_mid_round_resumes_without_trying_a_model_twice(
        cost_world, store) -> None:
    calls: list = []

    def improver(messages, tools, config):
        calls.append(1)
        return shorter(messages, tools, config)

    loaded = cost_world(improver, improve={"models": ["tariff:small"],
                                           "stop": {"max_rounds": 2}})
    bus = ev.EventBus()

    def kill(event):  # round 2's candidate is being evaluated
        if isinstance(event, ev.EvaluationStarted) and event.round == 2 \
                and event.role == "candidate":
            raise asyncio.CancelledError

    bus.subscribe(kill)
    with pytest.raises(asyncio.CancelledError):
        run(loaded, store, bus=bus)
    (row,) = store.cycles.recent()
    result = run(loaded, store, resume=row.id)
    assert len(calls) == 1  # the improver was not asked again
    assert [r.accepted for r in result.rounds] == [None, True, True, True]
    final = store.resolve("support@head").prompt
    assert final.params["model"] == "tariff:small" and FILLER not in final.system
    switches = [s for s in store.cycles.get_suggestions(row.id) if s.type == "parameters"]
    assert len(switches) == 1  # tariff:small was tried once


def test_cost_settings_are_checked_with_clear_errors(cost_world) -> None:
    from cycle.assemble import prepare
    from cycle.assemble.improve import load_improve_config
    from cycle.errors import ConfigError

    for improve, says in (
        ({"objective": "price"}, "(improve.objective): Input should be 'score' or 'cost'"),
        ({"margin": None}, "objective: cost needs margin"),
        ({"margin": -1}, "(improve.margin): Input should be greater than or equal to 0"),
        ({"objective": "score", "margin": None, "models": ["tariff:small"]},
         "models are tried only with objective: cost"),
        ({"population": 3}, "objective: cost works with population: 1"),
        ({"judge": {"confirm_labels": 10}}, "remove judge.confirm_labels"),
    ):
        with pytest.raises(ConfigError) as caught:
            load_improve_config(cost_world([], improve=improve))
        assert says in str(caught.value), str(caught.value)
    pairwise = cost_world([])
    doc = json.loads(pairwise.path.read_text())
    doc["criteria"] = [{"id": "quality", "rubric": "Better.", "pairwise": True}]
    pairwise.path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as caught:
        prepare(load_config(pairwise.path))
    assert "(improve.objective): improve.objective: cost compares scores" in str(caught.value)
    loaded = cost_world([], improve={"models": ["tariff:small", "nosuch:model"]})
    with pytest.raises(ConfigError) as caught:
        prepare(loaded)
    text = str(caught.value)
    assert "(improve.models[1])" in text and "unknown model provider 'nosuch'" in text


def test_the_reports_show_each_version_s_score_and_cost_and_the_frontier(
        cost_world, store, tmp_path) -> None:
    from cycle.report.cycle_report import console_lines, cycle_report_dict, write_cycle_report

    def improver(messages, tools, config):  # round 2: cheaper; round 3: cheaper, worse
        calls.append(1)
        return (shorter(messages, tools, config) if len(calls) == 1 else
                {"suggestions": [suggestion("", current="Always say thanks.")]})

    calls: list = []
    result = run(cost_world(improver, improve={"models": ["tariff:small"],
                                               "stop": {"max_rounds": 3}}), store)
    assert [r.accepted for r in result.rounds] == [None, True, True, False, True]
    paths = write_cycle_report(store, result.cycle_id, tmp_path / "reports")
    markdown = paths["markdown"].read_text()
    section = markdown.split("## Score and cost")[1].split("##")[0]
    rows = [line for line in section.splitlines() if line.startswith("| 1.0.")]
    # the start on the dear model; the cheap model; the cut that kept the score (final);
    # the cut too deep, refused, yet on the frontier: nothing as cheap scores higher
    assert [r.split(" | ")[0] for r in rows] == ["| 1.0.0", "| 1.0.1", "| 1.0.2", "| 1.0.3"]
    assert rows[0].endswith("| tariff:big | 95.5 | $0.00182 |  |")
    assert rows[1].endswith("| tariff:small | 95.5 | $0.000182 |  |")
    assert rows[2].endswith("| tariff:small | 95.5 | $0.000106 | frontier, final |")
    assert rows[3].endswith("| frontier |") and " 75.5 " in rows[3]
    html = paths["html"].read_text()
    assert "<h2>Score and cost</h2>" in html and "frontier, final" in html
    data = json.loads(paths["json"].read_text())
    assert [v["frontier"] for v in data["costs"]["versions"]] == [False, False, True, True]
    console = console_lines(cycle_report_dict(store, result.cycle_id))
    assert console[0].startswith("score and cost")
    assert "[frontier, final]" in console[-2] and "tariff:small" in console[-2]


def evaluation(version: str, scores: dict[str, float], costs: dict[str, float],
               passed: dict[str, bool] | None = None):
    from cycle.loop.acceptance import Evaluation

    return Evaluation(run_id=version, version=version, score=None, case_scores=scores,
                      case_passed=passed or {}, case_costs=costs)


def test_the_cost_rule_weighs_cost_and_score_each_as_it_says() -> None:
    from cycle.loop.cost import Point, decide_cheaper, frontier

    cases = [f"c{i}" for i in range(8)]
    before = evaluation("a", dict.fromkeys(cases, 80.0), dict.fromkeys(cases, 0.01))
    cheap_same = evaluation("b", dict.fromkeys(cases, 80.0), dict.fromkeys(cases, 0.005))
    cheap_worse = evaluation("c", dict.fromkeys(cases, 77.0), dict.fromkeys(cases, 0.005))
    dear_same = evaluation("d", dict.fromkeys(cases, 80.0), dict.fromkeys(cases, 0.02))

    def verdict(candidate, rule="significant", **kw):
        return decide_cheaper(rule, before, candidate, margin=2.0, alpha=0.025, **kw)

    ok = verdict(cheap_same)
    assert ok.accepted and ok.cost_delta == pytest.approx(-0.005) and ok.cost == 0.005
    assert "agent cost per case $0.01 -> $0.005 (-50%)" in ok.reason
    assert not verdict(dear_same).accepted and "not cheaper" in verdict(dear_same).reason
    worse = verdict(cheap_worse)
    assert not worse.accepted and not worse.inconclusive  # -3: beyond the margin on average
    assert not verdict(cheap_worse, "improved").accepted
    assert verdict(cheap_worse, "always").accepted
    # a required case that passed and fails now refuses it, cheaper or not
    failing = evaluation("e", dict.fromkeys(cases, 80.0), dict.fromkeys(cases, 0.005),
                         passed={"c0": False})
    before_passed = evaluation("a", before.case_scores, before.case_costs, passed={"c0": True})
    refused = decide_cheaper("significant", before_passed, failing, margin=2.0, alpha=0.025,
                             required={"c0"})
    assert not refused.accepted and refused.regressions == ("c0",)
    # held-out cases that lost more than the margin refuse it, whatever the seen ones did
    split = evaluation("f", {**dict.fromkeys(cases[:6], 82.0), "c6": 70.0, "c7": 70.0},
                       dict.fromkeys(cases, 0.005))
    held = verdict(split, held_out={"c6", "c7"})
    assert not held.accepted and "held-out cases" in held.reason
    # too few cases to test
    few = decide_cheaper("significant", evaluation("a", {"c0": 80.0}, {"c0": 0.01}),
                         evaluation("b", {"c0": 80.0}, {"c0": 0.001}), margin=2.0, alpha=0.025)
    assert not few.accepted and "too few to test" in few.reason
    assert frontier([Point("a", 80, 0.01), Point("b", 80, 0.005), Point("c", 77, 0.004),
                     Point("d", 77, 0.005), Point("e", None, 0.001)]) == {"b", "c"}
