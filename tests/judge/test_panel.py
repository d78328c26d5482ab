"""Judge panels (issue 35, item 7): several judge models, their mean and majority, each
member's verdict kept, their agreement with each other and with people. The runs go
through the real CLI, the real openai SDK and the loopback server, into a SQLite store."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.judge.agreement import LARGE, panel_alpha
from cycle.judge.criteria import CriterionConfig, resolve
from cycle.judge.panel import combine
from cycle.records import Verdict
from cycle.store import Store
from cycle.testing import Fault, LoopbackServer, Reply
from tests.stored import loopback_project

#: what each scripted judge scores each case (``q`` is the case's id), out of 100
SCORES = {"judge-high": {"a": 90, "b": 100}, "judge-low": {"a": 80, "b": 50}}
PANEL = "[openai:judge-high, openai:judge-low]"
#: a required criterion: a case fails when the panel fails it, whatever its score
HELPFUL = "[{id: helpful, rubric: Helps the customer., required: true}]"


def _case_of(request) -> str:
    block = json.loads(request.last_user.rsplit("```json", 1)[1].rsplit("```", 1)[0])
    return str(block["input"]["q"])


def judges(broken: dict[str, object] | None = None):
    """A responder: the agent answers a line; each judge model scores as ``SCORES`` says;
    a model in ``broken`` answers what it maps to (a Fault, or text that is no verdict)."""
    broken = broken if broken is not None else {}

    def respond(request):
        if request.schema_name != "cycle_judge":
            return Reply(text="Your order ships today.")
        if request.model in broken:
            return broken[request.model]
        score = SCORES[request.model][_case_of(request)]
        return Reply(json={"verdicts": {"helpful": {"reasoning": f"{request.model} gives {score}",
                                                    "score": score}}})

    return respond


def cycle_run(store: Path, config: Path, *args: str):
    return CliRunner().invoke(cli, ["--store", str(store), "run", str(config), *args])


def latest(store: Path) -> tuple[str, dict[tuple[str, int], object]]:
    with Store.open(store) as s:
        run_id = s.runs.recent(limit=1)[0].id
        return run_id, {(r.case_id, r.iteration): r for r in s.runs.load_results(run_id)}


def judged_by(requests) -> Counter:
    return Counter(q.model for q in requests if q.schema_name == "cycle_judge")


def alpha_by_definition(units: list[list[float]]) -> float:
    """Krippendorff's alpha, interval metric, straight from its definition: the mean
    squared difference of the pairs within an output over that of every pair."""
    n = sum(len(u) for u in units)
    within = sum(sum((a - b) ** 2 for i, a in enumerate(u) for j, b in enumerate(u) if i != j)
                 / (len(u) - 1) for u in units) / n
    values = [x for u in units for x in u]
    across = sum((a - b) ** 2 for i, a in enumerate(values) for j, b in enumerate(values)
                 if i != j) / (n * (n - 1))
    return 1 - within / across


def test_a_panel_scores_the_mean_and_passes_by_majority_a_tie_failing(tmp_path):
    with LoopbackServer(responder=judges()) as srv:
        config = loopback_project(tmp_path / "p", srv.openai_base_url, criteria=HELPFUL,
                                  cases="ab", judge=PANEL)
        store, reports = tmp_path / "s.db", tmp_path / "reports"
        r = cycle_run(store, config, "-n", "2", "--report-dir", str(reports))
        requests = srv.requests
    assert r.exit_code == 1, r.output  # case b failed
    # both members judged every iteration, each in its own call
    assert judged_by(requests) == {"judge-high": 4, "judge-low": 4}
    run_id, results = latest(store)
    a, b = results[("a", 0)].verdicts[0], results[("b", 1)].verdicts[0]
    # a: 90 and 80, both pass: the mean, passed
    assert (a.score, a.passed, results[("a", 0)].status) == (85.0, True, "passed")
    # b: 100 passes, 50 fails: the mean 75 is over the pass mark, but a tie fails
    assert (b.score, b.passed, results[("b", 1)].status) == (75.0, False, "failed")
    assert [(m.model, m.score, m.passed) for m in b.members] == [
        ("openai:judge-high", 100.0, True), ("openai:judge-low", 50.0, False)]
    assert "1 of 2 pass (fail)" in b.reasoning and "openai:judge-low 50: judge-low gives 50" in b.reasoning
    # the members' agreement: alpha over the four outputs each scored; no interval from four
    # (a bootstrap of four outputs gave one, far too narrow)
    expected = alpha_by_definition([[90, 80], [90, 80], [100, 50], [100, 50]])
    assert "Judge panel: the members' agreement" in r.output
    assert (f"helpful: alpha {expected:.2f} (no interval under 10 outputs) over 4" in r.output
            and "openai:judge-high 95.0, openai:judge-low 65.0" in r.output), r.output
    report = json.loads((reports / f"{run_id}.json").read_text())
    assert report["models"]["judge"] == "openai:judge-high + openai:judge-low"
    [figure] = report["judge_panel"]
    assert figure["criterion"] == "helpful" and figure["outputs"] == 4
    assert figure["alpha"] == pytest.approx(expected)
    assert figure["alpha_ci"] is None
    assert [(m["model"], m["mean"]) for m in figure["members"]] == [
        ("openai:judge-high", 95.0), ("openai:judge-low", 65.0)]
    shown = report["cases"][1]["results"][0]["verdicts"][0]
    assert [m["score"] for m in shown["members"]] == [100.0, 50.0]
    # cost and usage: every member's calls
    assert report["summary"]["usage"]["judge"]["calls"] == 8
    markdown = (reports / f"{run_id}.md").read_text()
    assert "## Judge panel" in markdown
    assert "| helpful | 4 | " in markdown and "| openai:judge-low mean |" in markdown
    html = (reports / f"{run_id}.html").read_text()
    assert "<h2>Judge panel</h2>" in html and "openai:judge-high mean" in html


def test_each_members_calls_are_cached_apart_and_a_rerun_pays_nothing(tmp_path):
    with LoopbackServer(responder=judges()) as srv:
        config = loopback_project(tmp_path / "p", srv.openai_base_url, criteria=HELPFUL,
                                  cases="ab", judge=PANEL)
        store = tmp_path / "s.db"
        assert cycle_run(store, config, "-n", "2", "-q").exit_code == 1
        _, first = latest(store)
        before = srv.request_count
        assert cycle_run(store, config, "-n", "2", "-q").exit_code == 1
        assert srv.request_count == before  # every call answered from the cache
    _, again = latest(store)
    # the members sent the same messages: had they shared a cache entry, one member's
    # answer would stand for both here
    assert {k: [(m.model, m.score) for m in r.verdicts[0].members] for k, r in again.items()} \
        == {k: [(m.model, m.score) for m in r.verdicts[0].members] for k, r in first.items()}
    assert again[("b", 0)].verdicts[0].members[1].score == 50.0


def test_a_member_that_fails_errors_the_iteration_and_a_resume_pays_only_for_it(tmp_path):
    """judge-low's server refuses case b: those iterations are errors naming it, never a
    score. Resumed, only judge-low is asked again: judge-high's answers (and the agent's)
    were journaled when paid and are replayed."""
    broken: dict[str, object] = {}
    respond = judges(broken)

    def refusing(request):
        if request.model == "judge-low" and request.schema_name == "cycle_judge" \
                and _case_of(request) == "b":
            return Fault.status(404, message="The model judge-low is not available")
        return respond(request)

    state = {"refuse": True}
    with LoopbackServer(responder=lambda q: refusing(q) if state["refuse"] else respond(q)) as srv:
        config = loopback_project(tmp_path / "p", srv.openai_base_url, criteria=HELPFUL,
                                  cases="ab", judge=PANEL, extra="cache: {enabled: false}\n")
        store = tmp_path / "s.db"
        r = cycle_run(store, config, "-n", "2", "-q")
        assert r.exit_code == 3, r.output
        run_id, results = latest(store)
        for i in (0, 1):
            assert results[("b", i)].status == "error" and results[("b", i)].score is None
            assert "panel member openai:judge-low: " in results[("b", i)].error
        assert results[("a", 0)].status == "passed"
        state["refuse"] = False
        seen = len(srv.requests)
        r = cycle_run(store, config, "--resume", run_id, "-q")
        resumed = srv.requests[seen:]
    assert r.exit_code == 1, r.output
    assert [q.model for q in resumed] == ["judge-low", "judge-low"]  # nothing else re-paid
    _, results = latest(store)
    assert results[("b", 0)].score == 75.0 and results[("b", 1)].status == "failed"


def test_a_member_answering_garbage_errors_every_iteration_naming_it(tmp_path):
    broken = {"judge-garbage": Reply(text="Looks fine to me!")}
    with LoopbackServer(responder=judges(broken)) as srv:
        config = loopback_project(tmp_path / "p", srv.openai_base_url, criteria=HELPFUL,
                                  cases="ab", judge="[openai:judge-high, openai:judge-garbage]")
        store = tmp_path / "s.db"
        r = cycle_run(store, config, "-n", "1", "--no-reports")
        requests = srv.requests
    assert r.exit_code == 3, r.output
    assert "panel member openai:judge-garbage: " in r.output
    run_id, results = latest(store)
    for result in results.values():
        assert result.status == "error" and result.score is None and not result.verdicts
        assert result.error.startswith("judge: JudgeError: panel member "
                                       "openai:judge-garbage: ")
    # the one that answered was asked all the same, and every call is paid for
    asked = judged_by(requests)
    assert asked["judge-high"] == 2 and asked["judge-garbage"] >= 4  # a repair each at least
    with Store.open(store) as s:
        paid = dict(s.db.execute("SELECT model, count(*) FROM calls WHERE run_id = ? AND "
                                 "role = 'judge' GROUP BY model", (run_id,)).fetchall())
        usage = s.runs.usage_by_role(run_id)["judge"]
    assert paid["openai:judge-high"] == 2 and paid["openai:judge-garbage"] == 4
    assert usage.calls == sum(paid.values())


def test_each_member_and_the_panel_are_measured_against_people(tmp_path):
    """People score a 90 and b 100: judge-high agrees exactly, judge-low is 10 and 50
    points low, and the panel (its mean and majority) between them."""
    with LoopbackServer(responder=judges()) as srv:
        config = loopback_project(tmp_path / "p", srv.openai_base_url, criteria=HELPFUL,
                                  cases="ab", judge=PANEL)
        store = tmp_path / "s.db"
        assert cycle_run(store, config, "-n", "2", "-q").exit_code == 1
    run_id, _ = latest(store)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(
        json.dumps({"run": run_id, "case": case, "iteration": i, "criterion": "helpful",
                    "score": person, "labeler": "ann"}) + "\n"
        for case, person in (("a", 90), ("b", 100)) for i in (0, 1)))
    base = ["--store", str(store), "judge"]
    assert CliRunner().invoke(cli, [*base, "labels", "import", str(labels)]).exit_code == 0
    r = CliRunner().invoke(cli, [*base, "agreement", run_id, "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    panel, members = data["criteria"]["helpful"], data["members"]
    assert list(members) == ["openai:judge-high", "openai:judge-low"]
    high, low = members["openai:judge-high"]["helpful"], members["openai:judge-low"]["helpful"]
    assert set(high) == set(panel)  # the same figures as the panel's
    assert (high["bias"], high["agreement"], high["n"]) == (0.0, 1.0, 4)
    assert (low["bias"], low["agreement"]) == (-30.0, 0.5)  # (80-90 + 50-100) / 2
    assert (panel["bias"], panel["agreement"]) == (-15.0, 0.5)  # a tie fails b
    assert low["judged_mean"] == 65.0 and low["corrected_mean"] == pytest.approx(95.0)
    text = CliRunner().invoke(cli, [*base, "agreement", run_id]).output
    assert "panel member openai:judge-high:" in text and "panel member openai:judge-low:" in text
    # the run's reports show each member's and the panel's agreement with people
    reports = tmp_path / "reports"
    shown = CliRunner().invoke(cli, ["--store", str(store), "report", run_id, "--report-dir",
                                     str(reports)])
    assert shown.exit_code in (0, 1), shown.output
    assert "With people's labels (every run of this panel):" in shown.output
    assert ("helpful: panel kappa" in shown.output
            and "openai:judge-low kappa" in shown.output and "bias -30.0 (n 4)" in shown.output)
    markdown = (reports / f"{run_id}.md").read_text()
    assert "| helpful | openai:judge-low | 4 | " in markdown and "| -30.0 |" in markdown
    report = json.loads((reports / f"{run_id}.json").read_text())
    people = report["judge_panel"][0]["members"][1]["people"]
    assert people["labels"] == 4 and people["bias"] == -30.0


def test_one_judge_in_a_list_is_the_judge_as_before(tmp_path):
    """``judge: [m]`` is ``judge: m``: the same calls (the cache answers every one of them),
    the same stored rows, no panel in the reports."""
    with LoopbackServer(responder=judges()) as srv:
        plain = loopback_project(tmp_path / "p", srv.openai_base_url, criteria=HELPFUL,
                                 cases="ab", judge="openai:judge-high")
        store = tmp_path / "s.db"
        r = cycle_run(store, plain, "-n", "2", "--report-dir", str(tmp_path / "r1"))
        assert r.exit_code == 0, r.output
        _, first = latest(store)
        before = srv.request_count
        plain.write_text(plain.read_text().replace("judge: openai:judge-high",
                                                   "judge: [openai:judge-high]"))
        r = cycle_run(store, plain, "-n", "2", "--report-dir", str(tmp_path / "r2"))
        assert r.exit_code == 0, r.output
        assert srv.request_count == before
    second_id, second = latest(store)
    assert [r.verdicts for r in second.values()] == [r.verdicts for r in first.values()]
    assert all(not v.members for r in second.values() for v in r.verdicts)
    with Store.open(store) as s:
        assert s.db.execute("SELECT count(*) FROM panel_verdicts").fetchone()[0] == 0
        assert s.runs.get(second_id).judge_model == "openai:judge-high"
    assert "Judge panel" not in r.output
    report = json.loads((tmp_path / "r2" / f"{second_id}.json").read_text())
    assert "judge_panel" not in report
    assert "members" not in report["cases"][0]["results"][0]["verdicts"][0]


def test_the_estimate_counts_every_members_calls(tmp_path):
    with LoopbackServer(responder=judges()) as srv:
        config = loopback_project(tmp_path / "p", srv.openai_base_url, criteria=HELPFUL,
                                  cases="abc", judge=PANEL)
        r = cycle_run(tmp_path / "s.db", config, "-n", "2", "--dry-run", "--json")
        single = cycle_run(tmp_path / "s.db", config, "-n", "2", "--dry-run", "--json",
                           "--judge", "openai:judge-high")
        assert srv.request_count == 0
    assert r.exit_code == 0, r.output
    lines = {(x["role"], x["model"]): x for x in json.loads(r.output)["lines"]}
    assert lines[("judge", "openai:judge-high")]["calls"] == [6, 6]
    assert lines[("judge", "openai:judge-low")]["calls"] == [6, 6]
    alone = {(x["role"], x["model"]): x for x in json.loads(single.output)["lines"]}
    assert ("judge", "openai:judge-low") not in alone
    total = json.loads(r.output)["calls"][0]
    assert total == json.loads(single.output)["calls"][0] + 6


def test_a_panel_given_on_the_command_line(tmp_path):
    with LoopbackServer(responder=judges()) as srv:
        config = loopback_project(tmp_path / "p", srv.openai_base_url, criteria=HELPFUL,
                                  cases="a", judge="openai:gpt-4o-mini")
        store = tmp_path / "s.db"
        r = cycle_run(store, config, "-n", "1", "--no-reports", "--judge", "openai:judge-high",
                      "--judge", "openai:judge-low")
        assert r.exit_code == 0, r.output
        assert "judge: openai:gpt-4o-mini -> [openai:judge-high, openai:judge-low] (--judge)" \
            in r.output
        twice = cycle_run(store, config, "--judge", "openai:judge-high", "--judge",
                          "openai:judge-high")
    assert twice.exit_code == 2
    assert "--judge: openai:judge-high is named twice" in twice.output
    _, results = latest(store)
    assert results[("a", 0)].verdicts[0].score == 85.0


@pytest.mark.parametrize(("judge", "said"), [
    ("[offline:a, offline:a]", "offline:a is named twice"),
    ("[]", "a panel names one model or more"),
    ("[offline:a, '']", "item 1 names no model"),
])
def test_a_bad_panel_is_refused_naming_the_line(tmp_path, judge, said):
    config = loopback_project(tmp_path / "p", "http://127.0.0.1:9", criteria=HELPFUL,
                              cases="a", judge=judge)
    r = cycle_run(tmp_path / "s.db", config, "--dry-run")
    assert r.exit_code == 2
    assert "cycle.yaml:3 (judge)" in r.output and said in r.output, r.output
    assert "Traceback" not in r.output


def test_a_pairwise_comparison_asks_which_member_compares(tmp_path):
    config = loopback_project(tmp_path / "p", "http://127.0.0.1:9", criteria=HELPFUL,
                              cases="a", judge=PANEL)
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "judge", "pairwise",
                                 "r1", "r2", "--config", str(config)])
    assert r.exit_code == 2
    assert "is a panel (openai:judge-high, openai:judge-low)" in r.output
    assert "--judge openai:judge-high" in r.output


def test_a_cycle_is_judged_by_the_panel(tmp_path):
    """``cycle improve`` with a panel: every run of the cycle keeps each member's verdicts,
    and the runs' judge is the panel."""
    from tests.stored import copied

    project = copied("quickstart", tmp_path)
    config = project / "cycle.yaml"
    config.write_text(config.read_text().replace("judge: offline:default",
                                                 "judge: [offline:default, offline:second]"))
    store = tmp_path / "s.db"
    r = CliRunner().invoke(cli, ["--store", str(store), "improve", str(config), "--headless",
                                 "--yes", "-q"])
    assert r.exit_code == 0, r.output
    with Store.open(store) as s:
        runs = [x for x in s.runs.recent(limit=20) if x.cycle_id]
        assert runs and {x.judge_model for x in runs} == {"offline:default + offline:second"}
        llm = [v for v in s.runs.load_results(runs[0].id)[0].verdicts if v.kind == "llm"]
    assert llm and all([m.model for m in v.members] == ["offline:default", "offline:second"]
                       for v in llm)


# -- the rules, on their own ----------------------------------------------------------------


def _criterion(**extra: object):
    return resolve(CriterionConfig(id="tone", rubric="Polite.", **extra), threshold=70)


def _member(score: float, *, turns: tuple[int, ...] = ()) -> Verdict:
    return Verdict(criterion_id="tone", kind="llm", score=score, passed=score >= 70, weight=1,
                   required=False, reasoning=f"{score:.0f}", failed_turns=turns)


def test_the_majority_not_the_mean_decides_the_pass():
    tone = _criterion()
    # the mean, 73.3, is over the pass mark; two of three fail it
    v = combine(tone, [("a", _member(100)), ("b", _member(60)), ("c", _member(60))])
    assert v.score == pytest.approx(73.33, abs=0.01) and not v.passed
    # the mean, 66.7, is under it; two of three pass
    v = combine(tone, [("a", _member(70)), ("b", _member(70)), ("c", _member(60))])
    assert v.score == pytest.approx(66.67, abs=0.01) and v.passed
    assert [m.model for m in v.members] == ["a", "b", "c"]


def test_a_turn_fails_when_a_majority_of_the_members_did_not_pass_it():
    tone = _criterion()
    v = combine(tone, [("a", _member(80, turns=(2,))), ("b", _member(80, turns=(2, 3))),
                       ("c", _member(80, turns=(3, 4)))])
    assert v.failed_turns == (2, 3)  # 4: one member of three
    v = combine(tone, [("a", _member(80, turns=(1,))), ("b", _member(80))])
    assert v.failed_turns == (1,)  # a tie fails


def test_panel_alpha_is_krippendorffs():
    rng = random.Random(7)
    units = [[rng.choice([40, 60, 80, 100]) for _ in range(rng.choice([2, 3]))]
             for _ in range(30)]
    sums = [(len(u), float(sum(u)), float(sum(x * x for x in u))) for u in units]
    alpha, (low, high) = panel_alpha(sums)
    assert alpha == pytest.approx(alpha_by_definition(units))
    assert low <= alpha <= high
    assert panel_alpha([(2, 180.0, 8100.0 * 2), (2, 100.0, 2500.0 * 2)])[0] == 1.0  # agreed
    assert panel_alpha([(2, 180.0, 8100.0 * 2)]) == (None, None)  # no spread: undefined
    assert panel_alpha([(1, 90.0, 8100.0)]) == (None, None)  # no pair to compare
    # members who scored each of a dozen outputs alike: alpha 1, and no [1, 1] interval
    alike = [(2, 2.0 * x, 2.0 * x * x) for x in [40, 60, 80, 100] * 3]
    assert panel_alpha(alike) == (1.0, None)


def test_panel_alpha_past_large_takes_the_jackknifes_interval():
    rng = random.Random(1)
    units = []
    for _ in range(LARGE * 3):
        truth = rng.uniform(20, 90)
        scores = [truth + rng.gauss(0, 10), truth + 8 + rng.gauss(0, 10)]
        units.append((2, sum(scores), sum(x * x for x in scores)))
    alpha, (low, high) = panel_alpha(units)
    assert 0.5 < alpha < 0.9 and low < alpha < high and high - low < 0.15


def test_member_verdicts_are_stored_read_back_and_removed_with_their_result(store_target):
    """On SQLite and PostgreSQL alike: a panel's verdict comes back with its members, in
    order; the figures read from them; a resume's removal of an errored result takes its
    members' rows with it."""
    from cycle.records import IterationResult, MemberVerdict

    members = (MemberVerdict(model="m:b", score=100, passed=True, reasoning="fine"),
               MemberVerdict(model="m:a", score=50, passed=False, reasoning="terse"))
    verdict = Verdict(criterion_id="tone", kind="llm", score=75, passed=False, weight=1,
                      required=True, reasoning="panel of 2", members=members)
    with Store.open(store_target) as s:
        s.runs.create(run_id="r", judge_model="m:b + m:a")
        s.runs.write_results("r", [
            IterationResult(case_id="c", iteration=0, status="failed", score=75, passed=False,
                            verdicts=(verdict,)),
            IterationResult(case_id="c", iteration=1, status="error", score=None, passed=None,
                            verdicts=(verdict,))])
        [first, _] = s.runs.load_results("r")
        assert first.verdicts == (verdict,)
        assert s.runs.panel_means("r") == {"tone": {"m:b": 100.0, "m:a": 50.0}}
        assert s.runs.panel_units("r") == {"tone": [(2, 150.0, 12500.0)] * 2}
        assert s.runs.delete_errors("r") == 1
        assert s.runs.panel_units("r") == {"tone": [(2, 150.0, 12500.0)]}
