"""A criterion with ``pairwise: true`` decides a cycle's acceptance by the judge's direct
preference of the candidate's outputs over the incumbent's (issue 35 item 4), each pair
judged in both orders, order flips as ties, a one-sided sign test over the cases.

The world: eight cases; the agent says the keywords its system prompt asks for; the
judge scores every output 50 on ``empathy`` (its scores see no difference at all), and,
asked to compare, answers as each test says."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from cycle import events as ev
from cycle.assemble import build_loop
from cycle.assemble.config import load_config
from cycle.loop.review import AutoReviewer
from cycle.store import Store
from cycle.testing import script

from .conftest import last_json, suggestion

EMPATHY = {"id": "empathy", "rubric": "Apologises for the trouble.", "pairwise": True}


def world_of(world, edit: str, criteria: list[dict], *, cases: int = 8, **improve):
    """The loop world with ``criteria`` and one improver edit, ``edit``."""
    loaded = world([{"suggestions": [suggestion(edit)]}], cases=cases,
                   improve={"stop": {"max_rounds": 1}, **improve})
    path = loaded.path
    config = json.loads(path.read_text())
    config["criteria"] = criteria
    path.write_text(json.dumps(config))
    return load_config(path)


def judged_by(prefer: Callable[[dict], str], scores: Callable[[dict], dict] | None = None
              ) -> Counter:
    """The judge: ``prefer(block)`` answers a comparison (first, second or tie); a scoring
    call gets ``scores(block)`` (default: 50 on empathy). Counts its calls by kind."""
    calls: Counter = Counter()

    def judge(messages, tools, config):
        block = last_json(messages)
        if config.response_schema_name == "cycle_pairwise":
            calls["pairwise"] += 1
            return {"reasoning": "compared", "winner": prefer(block)}
        calls["score"] += 1
        verdicts = scores(block) if scores else {"empathy": 50}
        return {"verdicts": {c: {"score": v, "reasoning": "."} for c, v in verdicts.items()}}

    script("judge", judge)
    return calls


def apologises(block: dict) -> str:
    """Prefers the answer that says sorry, whichever place it is shown in."""
    first, second = ("sorry" in block[k] for k in ("first", "second"))
    return "first" if first > second else "second" if second > first else "tie"


def run_loop(loaded, store, bus=None, resume=None):
    loop = build_loop(loaded, store=store, bus=bus, reviewer=AutoReviewer())
    return asyncio.run(loop.run(resume=resume))


@pytest.fixture
def any_store(store_target):
    with Store.open(store_target) as s:
        yield s


def test_a_candidate_the_judge_truly_prefers_is_promoted_by_the_pairwise_test(world, any_store):
    """Scores see no gain (50 everywhere): the difference of scores would reject; the judge
    prefers the apologising candidate on all 8 cases in both orders, so it is kept while
    exploring (p 1/256 <= 10%) and confirmed on fresh samples (<= 1.25%)."""
    store = any_store
    loaded = world_of(world, "Always say sorry.", [EMPATHY])
    calls = judged_by(apologises)
    result = run_loop(loaded, store)
    assert store.resolve("support@head").version == "1.0.1"
    explore, confirm = result.rounds[1], result.rounds[2]
    assert explore.accepted and confirm.stage == "confirm" and confirm.accepted
    assert explore.delta == 0  # the scores saw nothing: the preference decided
    # 8 cases x 2 iterations x 2 orders, in round 1 and again on the confirmation's runs
    assert calls["pairwise"] == 2 * 32
    rows = store.cycles.get_rounds(result.cycle_id)
    assert rows[1].pairwise == [{"criterion": "empathy", "wins": 8, "losses": 0, "ties": 0,
                                 "pairs": 16, "order_flips": 0.0, "p_value": 1 / 256}]
    assert "empathy: 8 wins, 0 losses, 0 ties (cases), 0% order flips" in rows[2].reason
    # the comparisons are the judge's calls, paid by the round that made them
    judge_calls = dict(store.db.execute(
        "SELECT round, count(*) FROM calls WHERE cycle_id = ? AND role = 'judge' "
        "AND run_id IS NULL GROUP BY round", (result.cycle_id,)).fetchall())
    assert judge_calls == {1: 32, 2: 32}
    # the reports show each comparison
    from cycle.report.cycle_report import cycle_report_dict, render_cycle_markdown
    from cycle.report.html import render_cycle_html

    data = cycle_report_dict(store, result.cycle_id)
    markdown = render_cycle_markdown(data)
    assert "## Pairwise comparisons" in markdown
    assert "| 2 (confirm) | empathy | 8 | 0 | 0 | 16 | 0% | 0.00391 |" in markdown
    html = render_cycle_html(data)
    assert '<table id="pairwise">' in html and "<td>2 (confirm)</td><td>empathy</td>" in html


def test_equal_candidates_are_not_promoted(world, store):
    """A null world: the judge prefers the candidate on half the cases and the incumbent on
    the other half (4 to 4: p 0.64): rejected while exploring, head stays."""
    loaded = world_of(world, "Always say thanks.", [EMPATHY])

    def half(block: dict) -> str:
        candidate = "first" if "thanks" in block["first"] else "second"
        incumbent = "second" if candidate == "first" else "first"
        return candidate if int(block["input"].split()[-1]) % 2 else incumbent

    judged_by(half)
    result = run_loop(loaded, store)
    assert not result.rounds[1].accepted and len(result.rounds) == 2  # no confirmation
    assert store.resolve("support@head").version == "1.0.0"
    test = store.cycles.get_rounds(result.cycle_id)[1].pairwise[0]
    assert (test["wins"], test["losses"], test["ties"]) == (4, 4, 0)
    assert "the judge did not prefer the candidate pairwise" in result.rounds[1].reason


def test_a_judge_that_prefers_the_first_answer_shown_promotes_nothing(world, store, tmp_path):
    """Every pair's verdict follows the position: each is an order flip, a tie."""
    loaded = world_of(world, "Always say sorry.", [EMPATHY])
    judged_by(lambda block: "first")
    result = run_loop(loaded, store)
    assert not result.rounds[1].accepted
    assert store.resolve("support@head").version == "1.0.0"
    test = store.cycles.get_rounds(result.cycle_id)[1].pairwise[0]
    assert (test["wins"], test["losses"], test["ties"], test["order_flips"]) == (0, 0, 8, 1.0)
    assert test["p_value"] == 1.0
    # the console says so too (cycle report CYCLE)
    from click.testing import CliRunner

    from cycle.cli import cli

    r = CliRunner().invoke(cli, ["--store", str(store.path), "report", result.cycle_id,
                                 "--report-dir", str(tmp_path / "reports")])
    assert r.exit_code == 0, r.output
    assert ("round 1 empathy: 0 wins, 0 losses, 8 ties; 100% order flips over 16 pairs; p 1"
            in r.output), r.output


def test_with_scored_criteria_too_both_tests_must_pass(world, store):
    """``quality`` is scored (the candidate gains 30 on every case); ``empathy`` is pairwise
    and the judge prefers the incumbent's answers: the candidate is rejected, the reason
    naming the pairwise criterion; the scored test alone would have kept it."""
    loaded = world_of(world, "Always say sorry.",
                      [{"id": "quality", "rubric": "Right keywords."}, EMPATHY])

    def prefer_plain(block: dict) -> str:
        return {"first": "second", "second": "first", "tie": "tie"}[apologises(block)]

    judged_by(prefer_plain, lambda block: {"quality": 80 if "sorry" in block["output"] else 50,
                                           "empathy": 50})
    result = run_loop(loaded, store)
    explore = result.rounds[1]
    # the paired difference is of the scored criteria alone (the case score gained 15)
    assert not explore.accepted and explore.delta == 30 and explore.score == 65
    assert explore.reason.startswith("rejected: the scored criteria gained, but the judge did "
                                     "not prefer the candidate pairwise (empathy not preferred")
    assert "empathy: 0 wins, 8 losses" in explore.reason
    assert store.resolve("support@head").version == "1.0.0"


def test_a_resumed_cycle_does_not_pay_for_its_comparisons_again(world, store):
    """Killed after round 1's comparisons were made and before the round ended: the resume
    replays them from the journal; only the confirmation's comparisons are new."""
    loaded = world_of(world, "Always say sorry.", [EMPATHY])
    calls = judged_by(apologises)
    bus = ev.EventBus()

    def kill(event):
        if isinstance(event, ev.CandidateDecided) and event.round == 1:
            raise KeyboardInterrupt

    unsubscribe = bus.subscribe(kill)
    with pytest.raises(KeyboardInterrupt):
        run_loop(loaded, store, bus)
    unsubscribe()
    assert calls["pairwise"] == 32
    result = run_loop(loaded, store, resume=True)
    assert calls["pairwise"] == 32 + 32  # round 1's replayed; the confirmation's paid
    # no cache here: the journal replayed them, and each paid call is one calls row
    paid = dict(store.db.execute(
        "SELECT round, count(*) FROM calls WHERE cycle_id = ? AND role = 'judge' "
        "AND run_id IS NULL GROUP BY round", (result.cycle_id,)).fetchall())
    assert paid == {1: 32, 2: 32}
    assert store.resolve("support@head").version == "1.0.1"
    assert result.rounds[1].accepted and result.rounds[2].accepted


def test_people_s_labels_correct_scores_not_a_pairwise_comparison(world, store):
    """improve.judge.confirm_labels corrects the judge's scores with people's labels; a
    pairwise criterion's comparison decided for it, so with pairwise criteria only there
    is nothing to correct: the confirmation does not wait for labels, and promotes."""
    loaded = world_of(world, "Always say sorry.", [EMPATHY], judge={"confirm_labels": 5})
    judged_by(apologises)
    result = run_loop(loaded, store)
    assert result.status == "finished" and result.rounds[2].accepted
    assert store.resolve("support@head").version == "1.0.1"


def test_pairwise_on_a_check_or_with_a_panel_is_a_clear_config_error(tmp_path: Path):
    from click.testing import CliRunner

    from cycle.cli import cli

    (tmp_path / "cases.yaml").write_text("- {id: a, input: {q: a}}\n")
    (tmp_path / "p.yaml").write_text("id: p\nsystem: Help.\nuser_template: '{{ q }}'\n")
    base = "prompt: p.yaml\nagent: offline:default\ncases: [cases.yaml]\n"
    for judge, criteria, says in (
        ("offline:default", "[{id: short, check: {type: contains, values: [a]}, pairwise: true}]",
         "criterion 'short' is a check: 'pairwise' is for LLM criteria"),
        ("[offline:default, offline:strict]", "[{id: tone, rubric: Polite., pairwise: true}]",
         "a pairwise comparison is one judge's"),
    ):
        (tmp_path / "cycle.yaml").write_text(f"{base}judge: {judge}\ncriteria: {criteria}\n")
        r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "improve",
                                     str(tmp_path / "cycle.yaml"), "--headless", "--yes"])
        assert r.exit_code != 0 and says in r.output, r.output
        assert "Traceback" not in r.output
    # a case cannot make a criterion pairwise on it alone
    (tmp_path / "cases.yaml").write_text("- {id: a, input: {q: a}, criteria: [{id: tone, "
                                         "pairwise: true}]}\n")
    (tmp_path / "cycle.yaml").write_text(f"{base}judge: offline:default\n"
                                         "criteria: [{id: tone, rubric: Polite.}]\n")
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "improve",
                                 str(tmp_path / "cycle.yaml"), "--headless", "--yes"])
    assert r.exit_code != 0 and "cases.yaml:1" in r.output
    assert "case 'a' sets 'pairwise' on criterion 'tone'" in r.output
