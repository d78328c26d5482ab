"""`cycle judge improve` through the real CLI (issue 35, item 5): a stored offline run of
the labelled world (cycle.testing.offline.labelled), people's labels imported with
`cycle judge labels import`, the judge prompt improved on them in a real SQLite store."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from cycle.judge.llm_judge import BUILT_IN
from cycle.records import JUDGE_PROMPT_ID
from cycle.store import Store
from cycle.testing import LoopbackServer
from cycle.testing.offline.labelled import RUBRIC, needs_order, next_step, write_project
from tests.stored import run


def invoke(store: Path, *args: str, input: str | None = None):
    return CliRunner().invoke(cli, ["--store", str(store), *args], input=input)


def world(folder: Path, people: Callable[[int, str], tuple[float, bool]], *,
          label: int | None = None, served: str | None = None) -> tuple[Path, Path, str]:
    """The labelled world's project in ``folder``, run once, its outputs labelled by
    ``people(case number, reply)`` (the first ``label`` of them only): the store, the
    config and the run. ``served``: the judge and the improver are openai:gpt-4o-mini at
    this base URL (the loopback server)."""
    config = write_project(folder)
    if served:
        config.write_text(config.read_text().replace(
            "judge: offline:default\nimprover: offline:default\n",
            "judge: openai:gpt-4o-mini\nimprover: openai:gpt-4o-mini\n"
            f"providers:\n  openai: {{base_url: '{served}'}}\n"))
    store = folder / "s.db"
    run_id = run(store, config)
    with Store.open(store) as s:
        outputs = s.human_labels.outputs(run_id)
    lines = []
    for o in outputs[:label]:
        score, passed = people(int(o["case"][1:]), o["output"])
        lines.append({"run": run_id, "case": o["case"], "iteration": o["iteration"],
                      "criterion": "helpful", "score": score, "pass": passed, "labeler": "ann"})
    labels = folder / "labels.jsonl"
    labels.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = invoke(store, "judge", "labels", "import", str(labels))
    assert r.exit_code == 0, r.output
    return store, config, run_id


def improve(store: Path, config: Path, run_id: str, *args: str, input: str | None = None):
    return invoke(store, "judge", "improve", run_id, "--config", str(config), "--headless",
                  *(args or ("--yes",)), input=input)


def held_out(output: str) -> tuple[list[float], list[float]]:
    """Kappa and mean absolute error on the held-out labels, before and after."""
    line = next(x for x in output.splitlines() if x.startswith("held-out labels"))
    kappa = re.search(r"kappa ([\d.]+)[^>]*-> ([\d.]+)", line)
    error = re.search(r"mean absolute error ([\d.]+) -> ([\d.]+) points", line)
    assert kappa and error, line
    return [float(x) for x in kappa.groups()], [float(x) for x in error.groups()]


def head(store: Path) -> tuple[str, str, str]:
    with Store.open(store) as s:
        v = s.resolve(JUDGE_PROMPT_ID)
        return v.version, v.message, v.prompt.system


def test_held_out_agreement_rises_when_the_rubric_omits_a_rule_people_apply(tmp_path) -> None:
    """People fail a reply without the order number; the rubric asks for a next step only.
    The cycle learns the rule into the criterion's rubric, the judge agrees with people on
    labels it never saw, the rubric is written back to cycle.yaml (its layout kept), and
    the next `cycle run` judges with it."""
    store, config, run_id = world(tmp_path, lambda _, reply: needs_order(reply))
    config.write_text(config.read_text().replace(
        "criteria:\n", "criteria:  # what every reply is judged on\n"))
    before = config.read_text()
    r = improve(store, config, run_id)
    assert r.exit_code == 0, r.output
    assert "32 labelled outputs of run" in r.output and "10 held out (seed 0)" in r.output
    # 1.0.1 is the built-in judge prompt carrying cycle.yaml's rubric; head stood at 1.0.0
    assert "starting cycle" in r.output and "on cycle-judge@1.0.1" in r.output
    assert "head stays at 1.0.0 until a confirmation" in r.output
    assert "head moved 1.0.0 -> 1.0.2" in r.output
    assert "undo with: cycle rollback cycle-judge --to 1.0.0" in r.output
    (k_before, k_after), (e_before, e_after) = held_out(r.output)
    assert k_after == 1.0 > k_before + 0.3 and e_after < e_before - 10
    learnt = f"{RUBRIC} A reply that does not cite the order number fails, whatever else it does well."
    with Store.open(store) as s:
        v = s.resolve(JUDGE_PROMPT_ID)
        carried = s.get_version(JUDGE_PROMPT_ID, "1.0.1")
        assert s.resolve(f"{JUDGE_PROMPT_ID}@1.0.0").prompt.rubrics == {}
    assert v.version == "1.0.2" and v.prompt.rubrics == {"helpful": learnt}
    assert carried.prompt.rubrics == {"helpful": RUBRIC} and carried.parent == "1.0.0"
    assert v.prompt.system == carried.prompt.system  # the rule went into the rubric
    assert f'cycle.yaml:7: the rubric of criterion \'helpful\' is now cycle-judge 1.0.2\'s: "{learnt}"' \
        in r.output and f'(was: "{RUBRIC}")' in r.output
    # only the rubric changed in cycle.yaml: its comment, quotes and indentation stay
    assert config.read_text() == before.replace(RUBRIC, learnt)
    # a later run judges with the learnt rubric: replies without the order number fail
    later = run(store, config)
    with Store.open(store) as s:
        assert s.runs.get(later).judge_version == "1.0.2"
        passed = {o["case"] for o in s.human_labels.outputs(later)
                  if o["verdicts"]["helpful"]["passed"]}
    assert passed == {f"c{i:03d}" for i in range(0, 32, 4)}  # next step and order number
    shown = invoke(store, "report", later, "--no-write")
    assert "Judge offline:default cycle-judge@1.0.2" in shown.output


def test_a_judge_with_nothing_to_learn_is_not_changed(tmp_path) -> None:
    """People agree with the rubric (a): nothing to improve. People fail half the replies
    without the order number, as noise (b): the rule the improver proposes fits what it
    saw and is rejected on the whole. Either way head stays at the built-in judge."""
    store, config, run_id = world(tmp_path / "a", lambda _, reply: next_step(reply))
    r = improve(store, config, run_id)
    assert r.exit_code == 0, r.output
    assert "nothing to improve: no case scored below the agreement mark (75)" in r.output
    assert "judge 1.0.0 unchanged: kappa 1.00" in r.output
    assert head(store)[:2] == ("1.0.0", BUILT_IN)

    def noisy(n: int, reply: str) -> tuple[float, bool]:
        return needs_order(reply) if n % 8 == 1 else next_step(reply)

    store, config, run_id = world(tmp_path / "b", noisy)
    r = improve(store, config, run_id, "--yes", "--rounds", "2")
    assert r.exit_code == 0, r.output
    assert "1 suggestion proposed" in r.output and "rejected: the improvement is not " \
        "significant" in r.output
    assert "judge 1.0.0 unchanged" in r.output
    assert head(store)[:2] == ("1.0.0", BUILT_IN)
    later = run(store, config)
    with Store.open(store) as s:
        assert s.runs.get(later).judge_version == "1.0.0"


def test_too_few_labels_are_refused_saying_how_many_more(tmp_path) -> None:
    store, config, run_id = world(tmp_path, lambda _, reply: needs_order(reply), label=12)
    r = improve(store, config, run_id)
    assert r.exit_code == 2, r.output
    assert (f"run {run_id} has 12 labelled outputs on helpful: cycle judge improve needs at "
            "least 17 to learn from 10 and hold out 5 (--held-out 0.3); label 5 more") in r.output
    assert f"cycle judge sample {run_id} --n 5" in r.output
    assert "Traceback" not in r.output
    with Store.open(store) as s:  # nothing was started
        assert not s.cycles.recent() and head(store)[0] == "1.0.0"
    r = improve(store, config, run_id, "--yes", "--held-out", "0.5")
    assert r.exit_code == 2 and "needs at least 20" in r.output
    r = improve(store, config, run_id, "--yes", "--criterion", "tone")
    assert r.exit_code == 2 and "has no LLM criterion 'tone'" in r.output
    assert "Its LLM criteria: helpful." in r.output


def test_a_person_reviews_the_judge_rule_like_any_suggestion(tmp_path) -> None:
    """Rejected at the terminal, the rule makes no candidate: head stays."""
    store, config, run_id = world(tmp_path, lambda _, reply: needs_order(reply))
    r = improve(store, config, run_id, "--review", "prompt", "--rounds", "1",
                input="r\nnot how we judge\ns\n")
    assert r.exit_code == 0, r.output
    assert "+++ suggested/rubrics" in r.output
    assert "no candidate: every suggestion was rejected" in r.output
    assert head(store)[0] == "1.0.0"


def test_a_judge_on_a_provider_sdk_learns_within_its_budget(tmp_path, monkeypatch) -> None:
    """The judge and the improver on the real openai SDK against the loopback server (which
    answers as the offline world): the calls are priced, --budget caps the cycle (head
    stays), and without the cap the rule is learnt."""
    from cycle.testing.offline.served import offline_world

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    with LoopbackServer(responder=offline_world) as server:
        store, config, run_id = world(tmp_path, lambda _, reply: needs_order(reply),
                                      served=server.openai_base_url)
        capped = improve(store, config, run_id, "--yes", "--budget", "0.006")
        assert capped.exit_code == 0, capped.output
        assert "max_cost: $0.00" in capped.output and "of the $0.006 cap" in capped.output
        spent = float(re.search(r"total cost \$([\d.]+)", capped.output).group(1))
        assert 0 < spent <= 0.006 and head(store)[0] == "1.0.0"
        r = improve(store, config, run_id)
        assert r.exit_code == 0, r.output
    assert "head moved 1.0.0 -> 1.0.2" in r.output and "[offline model]" not in r.output
    (k_before, k_after), _ = held_out(r.output)
    assert k_after == 1.0 > k_before


def test_a_judge_panel_is_refused_until_one_member_is_chosen(tmp_path) -> None:
    """The members share the judge prompt, but agreement with people is one model's: the
    command names the member to choose, and --judge chooses it."""
    store, config, run_id = world(tmp_path, lambda _, reply: needs_order(reply))
    config.write_text(config.read_text().replace(
        "judge: offline:default\n", "judge: [offline:default, offline:other]\n"))
    r = improve(store, config, run_id)
    assert r.exit_code == 2, r.output
    assert "is a panel (offline:default, offline:other)" in r.output
    assert "--judge offline:default" in r.output and "Traceback" not in r.output
    with Store.open(store) as s:
        assert not s.cycles.recent()
    r = improve(store, config, run_id, "--yes", "--judge", "offline:default")
    assert r.exit_code == 0, r.output


def _rows(store: Path) -> dict[str, int]:
    with Store.open(store) as s:
        return {t: s.db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("versions", "runs", "results", "calls", "cycles", "rounds")}


def test_a_dry_run_says_the_plan_and_calls_and_writes_nothing(tmp_path) -> None:
    store, config, run_id = world(tmp_path, lambda n, reply: needs_order(reply))
    before = _rows(store)
    r = improve(store, config, run_id, "--dry-run")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == "dry run: no model called, nothing written"
    assert lines[1] == "judge: offline:default with cycle-judge@1.0.0; improver: offline:default"
    split = re.match(r"(\d+) labelled outputs of run \S+: (\d+) to learn from, (\d+) held out "
                     r"\(--held-out 0\.3, --seed 0\)$", lines[2])
    assert split, lines[2]
    n, learn, held = (int(x) for x in split.groups())
    assert learn + held == n and lines[3] == f"criteria: helpful: {n} labelled, {held} held out"
    # 3 rounds of 1 iteration: the baseline alone, up to every round, the confirmation's
    # two evaluations and each comparison grown to 2 iterations
    assert lines[4] == (f"calls, for at most 3 rounds of 1 iteration (a comparison may grow "
                        f"to 2): judge {n} to {n * 6 + 2 * n * 4}, improver 0 to 3")
    assert lines[5] == (f"rubrics improved with the judge prompt (a confirmed edit is written "
                        f"to {config}): helpful")
    assert _rows(store) == before  # no version, run, call or cycle

    plan = json.loads(improve(store, config, run_id, "--dry-run", "--json").output)
    assert plan["judge"] == {"model": "offline:default", "prompt": JUDGE_PROMPT_ID,
                             "version": "1.0.0", "stored": True}
    assert (plan["labelled"], plan["learn_from"], plan["held_out"]) == (n, learn, held)
    assert plan["calls"] == {"judge": [n, n * 14], "improver": [0, 3]}
    assert plan["rubrics"] == {"helpful": RUBRIC}

    # the cycle itself holds out what the dry run said, and calls the judge within its range
    r = improve(store, config, run_id, "--yes")
    assert r.exit_code == 0, r.output
    assert f"{n} labelled outputs of run {run_id}: {learn} to learn from, {held} held out" in r.output
    with Store.open(store) as s:
        judged = s.db.execute("SELECT COUNT(*) FROM calls WHERE role = 'judge' AND cycle_id IS NOT "
                              "NULL").fetchone()[0]
    assert n <= judged <= n * 14


def test_improve_settings_the_judge_cycle_cannot_honour_are_refused(tmp_path) -> None:
    store, config, run_id = world(tmp_path, lambda n, reply: needs_order(reply))
    text = config.read_text()
    config.write_text(text + "improve:\n  acceptance: improved\n  population: 4\n  merge: true\n")
    before = _rows(store)
    for args in (("--yes",), ("--dry-run",)):
        r = improve(store, config, run_id, *args)
        assert r.exit_code == 2, r.output
        line = len(text.splitlines()) + 3  # population's line
        assert f"cycle.yaml:{line} (improve.population): cycle judge improve cannot honour " \
               "improve.population, improve.merge (" in r.output
        assert "improve.merge: it has no population to merge from" in r.output
        assert "Remove them from the improve: section, or point --config at a cycle.yaml " \
               "without them" in r.output
        assert "Traceback" not in r.output
    assert _rows(store) == before

    # what it has its own of is said, not applied; what it honours (acceptance) runs
    config.write_text(text + "improve:\n  acceptance: improved\n  stop: {max_rounds: 9}\n"
                      "  low_score: 50\n")
    r = improve(store, config, run_id, "--yes", "--rounds", "1")
    assert r.exit_code == 0, r.output
    assert "improve.stop is cycle improve's: it stops after --rounds (and at the budget)" in r.output
    assert ("improve.low_score is cycle improve's: the outputs under the agreement mark (75) "
            "go to the improver") in r.output
    # --rounds 1, not the config's 9: one improving round, then the confirmation
    assert "round 2: confirming" in r.output and "round 3:" not in r.output


def test_an_interrupted_judge_cycle_resumes_from_its_carried_rubrics(tmp_path) -> None:
    """Stopped at the review (no answer), the cycle resumes from the version carrying
    cycle.yaml's rubric, head moves from where it stood, and the rubric is written."""
    store, config, run_id = world(tmp_path, lambda _, reply: needs_order(reply))
    r = improve(store, config, run_id, "--review", "prompt", input="")
    assert r.exit_code == 130, r.output
    # the command that resumes it is judge improve's, not cycle improve's
    assert f"resume with: cycle judge improve {run_id}" in r.output
    assert "--- current/rubrics" in r.output and "[1/1] rubric of 'helpful' (high)" in r.output
    assert head(store)[0] == "1.0.0" and RUBRIC in config.read_text()
    r = improve(store, config, run_id, "--yes", "--resume")
    assert r.exit_code == 0, r.output
    assert "head moved 1.0.0 -> 1.0.2" in r.output
    assert "undo with: cycle rollback cycle-judge --to 1.0.0" in r.output
    assert "A reply that does not cite the order number fails" in config.read_text()
    with Store.open(store) as s:  # one carrying version, not a second one on resume
        assert sorted(v.version for v in s.history(JUDGE_PROMPT_ID)) == ["1.0.0", "1.0.1",
                                                                          "1.0.2"]
