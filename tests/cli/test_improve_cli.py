"""`cycle improve` through the real CLI on the offline quickstart: the score rises, the
report is written, history and rollback work on the result, --events logs every event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cycle.cli import cli


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


def test_headless_cycle_improves_the_quickstart_and_writes_the_report(quickstart: Path) -> None:
    r = invoke("improve", "cycle.yaml", "--headless", "--yes", "--events", "events.jsonl")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "round 1 done" in out and "[offline model]" in out
    report_line = next(line for line in out.splitlines() if line.startswith("report: "))
    md = quickstart / report_line.removeprefix("report: ").strip()
    data = json.loads(md.with_suffix(".json").read_text())
    assert data["offline"] and data["final"]["score"] > data["initial"]["score"] + 20
    assert data["final"]["version"] != data["initial"]["version"]
    scores = [r["score"] for r in data["rounds"]]
    assert scores == sorted(scores)  # the score visibly rises round after round
    text = md.read_text()
    for part in ("xychart-beta", "## Rounds", "## Suggestions", "```diff", "Offline model"):
        assert part in text
    kinds = {json.loads(line)["kind"] for line in (quickstart / "events.jsonl").read_text().splitlines()}
    assert {"cycle_started", "round_finished", "candidate_decided", "model_called", "cycle_finished"} <= kinds

    # history shows the improved head; rollback by round returns head to where it started
    hist = invoke("history", "support-reply")
    assert hist.exit_code == 0 and "improver" in hist.output
    back = invoke("rollback", "support-reply", "--round", "0", "--cycle", data["cycle_id"])
    assert back.exit_code == 0, back.output
    assert f"-> {data['initial']['version']}" in back.output
    again = invoke("rollback", "support-reply", "--round", "1", "--cycle", data["cycle_id"])
    assert f"-> {data['rounds'][1]['version']}" in again.output
    bad = invoke("rollback", "support-reply", "--round", "9", "--cycle", data["cycle_id"])
    assert bad.exit_code != 0 and "no round 9" in bad.output


def test_a_second_run_continues_from_the_improved_head(quickstart: Path) -> None:
    first = invoke("improve", "--headless", "--yes")
    assert first.exit_code == 0, first.output
    second = invoke("improve", "--headless", "--yes")
    assert second.exit_code == 0, second.output
    assert "on support-reply@1.0.2" in second.stdout and "target_score" in second.stdout


def test_terminal_review_rejects_with_a_reason(quickstart: Path) -> None:
    cfg = yaml.safe_load(Path("cycle.yaml").read_text())
    cfg["improve"]["stop"] = {"max_rounds": 1}
    Path("cycle.yaml").write_text(yaml.safe_dump(cfg))
    r = invoke("improve", "--headless", "--review", "prompt", input="r\nnot our tone\nr\n\ns\n")
    assert r.exit_code == 0, r.output
    assert "+++ suggested/system" in r.output  # each suggestion is previewed as a diff
    assert "no candidate: every suggestion was rejected" in r.stdout


def test_report_of_a_cycle_shows_its_rounds_and_json_is_json(quickstart: Path) -> None:
    # found walking docs/cli.md: `cycle report CYCLE_ID --json` printed the report paths as
    # text, and `--no-write` printed nothing at all
    r = invoke("improve", "--headless", "--yes")
    assert r.exit_code == 0, r.output
    cycle_id = next(line.split()[1].rstrip(":") for line in r.stdout.splitlines()
                    if line.startswith("cycle c-"))
    shown = invoke("report", cycle_id, "--no-write")
    assert shown.exit_code == 0, shown.output
    assert f"cycle {cycle_id}:" in shown.output and "round   0: 1.0.0 scored" in shown.output
    data = json.loads(invoke("report", cycle_id, "--json", "--report-dir", "again").output)
    assert data["cycle_id"] == cycle_id and data["reports"]["json"] == f"again/{cycle_id}.json"
    assert (quickstart / "again" / f"{cycle_id}.json").exists()
    # a cycle is named by a unique part of its id, as a run is: its random end or its start
    by_end = invoke("report", cycle_id[-6:], "--no-write")
    assert by_end.exit_code == 0 and f"cycle {cycle_id}:" in by_end.output
    by_start = invoke("cycles", cycle_id[:-7])
    assert by_start.exit_code == 0 and cycle_id in by_start.output
    assert "round   0" in by_start.output
    wrong = invoke("report", "c-19990101", "--no-write")
    assert wrong.exit_code == 2 and "no cycle 'c-19990101'" in wrong.output
    assert f"Recent cycles: {cycle_id}" in wrong.output


def test_answers_that_run_out_leave_the_cycle_interrupted_and_say_how_to_resume(
        quickstart: Path) -> None:
    """--review prompt fed answers through a pipe that ran dry ended in click's bare
    "Aborted." and left the cycle stored as running, later shown as "its process is gone
    (killed?)"."""
    r = invoke("improve", "--headless", "--review", "prompt", input="r\nnot our tone\n")
    assert r.exit_code == 130, r.output  # interrupted, as the cycle is
    assert "error: standard input ended before round 1's suggestions were all reviewed" \
        in r.stderr
    assert "The cycle is saved" in r.stderr and "--resume c-" in r.stderr
    [listed] = json.loads(invoke("cycles", "--json").output)
    assert listed["status"] == "interrupted" and "resume with:" in listed["stop_reason"]
    resumed = invoke("improve", "--headless", "--yes", "--resume", listed["id"][-6:])
    assert resumed.exit_code == 0, resumed.output


@pytest.mark.parametrize("args, message", [
    (["--headless"], "pass --yes"),
    (["--headless", "--review", "tui"], "needs the TUI"),
    (["--review", "prompt"], "add --headless"),
    (["--yes", "--review", "prompt", "--headless"], "cannot go with"),
])
def test_review_choices_that_cannot_work_are_refused(quickstart: Path, args, message) -> None:
    r = invoke("improve", *args)
    assert r.exit_code == 2 and message in r.output


def test_bad_improve_section_names_file_line_and_field(quickstart: Path) -> None:
    text = Path("cycle.yaml").read_text().replace("{max_rounds: 5}", "{max_round: 5}")
    Path("cycle.yaml").write_text(text)
    r = invoke("improve", "--headless", "--yes")
    assert r.exit_code == 2
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "max_round:" in t)
    assert f"cycle.yaml:{line}" in r.output and "unknown condition 'max_round'" in r.output


def test_resume_without_an_interrupted_cycle_says_so(quickstart: Path) -> None:
    r = invoke("improve", "--headless", "--yes", "--resume")
    assert r.exit_code == 2 and "no interrupted cycle of 'support-reply'" in r.output


def test_console_and_cycle_report_print_the_same_figures(quickstart: Path) -> None:
    import re

    r = invoke("improve", "--headless", "--yes")
    assert r.exit_code == 0, r.output
    report_line = next(line for line in r.stdout.splitlines() if line.startswith("report: "))
    md = (quickstart / report_line.removeprefix("report: ").strip()).read_text()
    data = json.loads((quickstart / report_line.removeprefix("report: ").strip()).with_suffix(".json").read_text())
    done = re.findall(r"round (\d+) done: (\S+) scored ([\d.]+) (\[[\d., ]+\])", r.stdout)
    assert len(done) == len(data["rounds"]) >= 3
    rows = {int(m[0]): m for m in re.findall(r"^\| (\d+)(?: \(confirm\))? \| (\S+) \| ([\d.]+) \| (\[[\d., ]+\]) \|", md, re.MULTILINE)}
    for round_no, version, score, interval in done:
        # the same score and interval, to the printed digit, in the console and the report
        assert rows[int(round_no)][1:] == (version, score, interval)
    assert "| 3 (confirm) |" in md and data["rounds"][-1]["verdict"] == "confirmed"
    w = data["words"]
    assert w["final"] > w["initial"] > 0 and f"| prompt length | {w['initial']} -> {w['final']} words |" in md
    final = done[-1]
    assert f"| final | {final[1]}: {final[2]} {final[3]} |" in md
    # the JSON keeps full precision (rounded once, when shown): no 96.85 -> 96.8 drift
    assert f"{data['final']['ci_high']:.1f}" == final[3].strip("[]").split(", ")[1]


def test_cycles_lists_stored_cycles_with_scores_reason_and_cost(quickstart: Path) -> None:
    empty = invoke("cycles")
    assert empty.exit_code == 2 and "no cycle store" in empty.output
    cfg = yaml.safe_load(Path("cycle.yaml").read_text())
    cfg["improve"]["stop"] = {"max_rounds": 1}
    Path("cycle.yaml").write_text(yaml.safe_dump(cfg))
    assert invoke("improve", "--headless", "--yes").exit_code == 0
    cfg["improve"]["stop"] = {"any": [{"target_score": 95}, {"max_rounds": 3}]}
    Path("cycle.yaml").write_text(yaml.safe_dump(cfg))
    assert invoke("improve", "--headless", "--yes").exit_code == 0
    r = invoke("cycles", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [x["prompt_id"] for x in rows] == ["support-reply", "support-reply"]
    newest, oldest = rows
    assert oldest["rounds"] == 1 and oldest["stop_reason"].startswith("max_rounds")
    assert newest["initial"]["version"] == oldest["final"]["version"]  # continued from head
    assert newest["stop_reason"].startswith("target_score") and newest["status"] == "finished"
    assert set(newest["cost_by_role"]) == {"agent", "judge", "improver"}
    report = json.loads(next(Path("reports").glob(f"{newest['id']}.json")).read_text())
    assert (newest["initial"], newest["final"]) == (report["initial"], report["final"])
    text = invoke("cycles", "support-reply")
    line = next(x for x in text.stdout.splitlines() if x.startswith(newest["id"]))
    assert "finished" in line and f"{newest['final']['score']:.1f} ({newest['final']['version']})" in line
    assert "target_score" in line
    assert "No improvement cycles of 'other'" in invoke("cycles", "other").stdout


@pytest.mark.parametrize("edit, where, fix", [
    (("{max_cost: 0.50}", "{custom: 'nope_stops:enough'}"), "(improve.stop)", "cannot import the custom"),
    (("improver: offline:default", "improver: nope:x"), "(improver)", "unknown model provider 'nope'"),
    (("agent: offline:default", "agent: {function: 'x.y:z'}"), "(agent)", "needs an agent that runs the prompt"),
])
def test_bad_cycle_input_is_refused_before_anything_is_stored(quickstart: Path, edit, where, fix) -> None:
    text = Path("cycle.yaml").read_text()
    assert edit[0] in text
    Path("cycle.yaml").write_text(text.replace(edit[0], edit[1]))
    r = invoke("improve", "--headless", "--yes")
    assert r.exit_code == 2, r.output
    assert where in r.output and fix in r.output and "Traceback" not in r.output
    assert not (quickstart / ".cycle").exists() and not (quickstart / "reports").exists()


def _models_called(store: Path) -> set[tuple[str, str]]:
    import sqlite3

    with sqlite3.connect(store) as db:
        return set(db.execute("SELECT DISTINCT role, model FROM calls").fetchall())


def test_improve_takes_runs_overrides_and_says_what_changed(quickstart: Path) -> None:
    r = invoke("improve", "cycle.yaml", "--headless", "--yes", "--agent", "offline:alpha",
               "--judge", "offline:beta", "--improver", "offline:gamma", "-n", "1", "-c", "2")
    assert r.exit_code == 0, r.output
    for line in ("override agent: offline:default -> offline:alpha (--agent)",
                 "override judge: offline:default -> offline:beta (--judge)",
                 "override improver: offline:default -> offline:gamma (--improver)",
                 "override run.iterations: 3 -> 1 (--iterations)",
                 "override run.concurrency: 8 -> 2 (--concurrency)"):
        assert line in r.stderr
    assert _models_called(quickstart / ".cycle" / "cycle.db") == {
        ("agent", "offline:alpha"), ("judge", "offline:beta"), ("improver", "offline:gamma")}
    baseline = json.loads(invoke("runs", "--json").output)[-1]
    assert baseline["role"] == "baseline"
    results = json.loads(invoke("compare", baseline["id"], baseline["id"], "--json").output)
    assert len(results["cases"]) == 5  # every case, and (below) one iteration each
    import sqlite3

    with sqlite3.connect(quickstart / ".cycle" / "cycle.db") as db:
        per_case = db.execute("SELECT MAX(n) FROM (SELECT COUNT(*) n FROM results "
                              "WHERE run_id = ? GROUP BY case_id)", (baseline["id"],)).fetchone()
    assert per_case == (1,)


def _on_server(quickstart: Path, url: str, extra: str = "") -> None:
    cfg = quickstart / "cycle.yaml"
    text = cfg.read_text().split("providers:")[0].replace("offline:default", "openai:m")
    cfg.write_text(text + f"providers:\n  openai: {{base_url: '{url}'}}\n" + extra)


def test_improve_budget_flag_caps_the_cycle(quickstart: Path) -> None:
    """--budget is a hard cap on a cycle's calls, through the real openai SDK."""
    from cycle.testing import LoopbackServer

    priced = "pricing:\n  openai:m: {input: 1000, output: 1000}\n"
    with LoopbackServer() as srv:
        _on_server(quickstart, srv.openai_base_url, priced)
        r = invoke("improve", "cycle.yaml", "--headless", "--yes", "--budget", "0.5")
        assert srv.request_count == 0  # a call's worst case (4,096 tokens out) is $4: none fits
    assert "override budget: (not set) -> 0.5 (--budget)" in r.stderr
    assert "max_cost: $0.0000 spent of the $0.5 cap" in r.output
    assert "did not fit what was left (set max_tokens in the prompt's params" in r.output
    assert "0 rounds, stopped" in r.output

    prompt = quickstart / "prompts" / "support-reply.yaml"
    prompt.write_text(prompt.read_text() + "  max_tokens: 50\n")
    with LoopbackServer() as srv:
        _on_server(quickstart, srv.openai_base_url, priced)
        r = invoke("improve", "cycle.yaml", "--headless", "--yes", "--budget", "0.5")
        assert srv.request_count > 0, r.output
    spent = json.loads(invoke("cycles", "--json").output)[0]["cost"]
    assert 0.1 < spent <= 0.5, r.output


def test_a_baseline_that_only_errored_is_an_error_not_nothing_to_improve(quickstart: Path) -> None:
    from cycle.testing import Fault, LoopbackServer

    with LoopbackServer(responder=lambda request: Fault.status(400)) as srv:
        _on_server(quickstart, srv.openai_base_url)
        r = invoke("improve", "cycle.yaml", "--headless", "--yes", "-n", "1")
    assert r.exit_code == 3, r.output
    assert "1.0.0 was judged on no case: every iteration errored (first: agent:" in r.output
    assert "nothing to improve" not in r.output and "Traceback" not in r.output


def test_nothing_to_improve_names_the_setting_and_the_fix(quickstart: Path) -> None:
    cfg = quickstart / "cycle.yaml"
    # the offline judge scores the improved quickstart around 96; aim higher than low_score
    cfg.write_text(cfg.read_text().replace("target_score: 95", "target_score: 99.9")
                   .replace("pass_threshold: 70", "pass_threshold: 50"))
    r = invoke("improve", "cycle.yaml", "--headless", "--yes")
    assert r.exit_code == 0, r.output
    assert "nothing to improve: no case scored below improve.low_score (50)" in r.output
    assert "is short of the target 99.9: set improve.low_score: 99.9" in r.output


def test_an_unknown_override_model_names_the_flag(quickstart: Path) -> None:
    r = invoke("improve", "cycle.yaml", "--headless", "--yes", "--improver", "nope:x")
    assert r.exit_code == 2
    assert "--improver: unknown model provider 'nope'" in r.output
    assert not (quickstart / ".cycle" / "cycle.db").exists()  # refused before the store opened


def test_each_cycle_samples_afresh_and_cached_calls_are_said(quickstart: Path) -> None:
    """A cycle's evaluations are fresh samples: a second cycle on the same version never
    replays the first's answers (their statistics would not be independent); calls that
    the cache may answer (the improver's, on the same input) are said to be."""
    import sqlite3

    first = invoke("improve", "cycle.yaml", "--headless", "--yes")
    assert first.exit_code == 0
    assert invoke("rollback", "support-reply", "--to", "1.0.0").exit_code == 0
    r = invoke("improve", "cycle.yaml", "--headless", "--yes")
    assert r.exit_code == 0, r.output
    second = json.loads(invoke("cycles", "--json").output)[0]["id"]
    with sqlite3.connect(quickstart / ".cycle" / "cycle.db") as db:
        hits = dict(db.execute("SELECT role, SUM(cache_hit) FROM calls WHERE cycle_id = ? "
                               "GROUP BY role", (second,)).fetchall())
    assert hits["agent"] == 0 and hits["judge"] == 0  # evaluations: never from another sample
    assert hits["improver"] > 0  # the same improver input: answered by the cache, and said so
    assert ("round 0 done: 1.0.0 scored 46.8 [43.2, 50.4], cost $0.0000; judge uncalibrated "
            "(no labels)\n") in r.output
    assert "(1 call answered by the response cache: free; --no-cache to call again)" in r.output
    r = invoke("improve", "cycle.yaml", "--headless", "--yes", "--no-cache")
    assert "response cache" not in r.output


def test_no_undo_hint_once_head_has_moved_away(quickstart: Path, capsys) -> None:
    """The TUI can roll head back before the cycle's summary is printed: the hint
    to undo what is already undone would mislead."""
    import asyncio

    import click

    from cycle.assemble import build_loop, load_config
    from cycle.cli.improve import _report, improve
    from cycle.loop.review import AutoReviewer
    from cycle.store import Store

    store_path = quickstart / ".cycle" / "cycle.db"
    with Store.open(store_path) as store:
        loop = build_loop(load_config("cycle.yaml"), store=store, reviewer=AutoReviewer())
        result = asyncio.run(loop.run())
    assert result.final_version != result.initial_version
    with click.Context(improve):  # _report runs inside the command
        _report(result, store_path, quickstart / "reports", Path("cycle.yaml"),
                load_config("cycle.yaml"))
        out = capsys.readouterr().out
        assert f"undo with: cycle rollback support-reply --to {result.initial_version}" in out
        with Store.open(store_path) as store:
            store.rollback("support-reply", result.initial_version)
        _report(result, store_path, quickstart / "reports", Path("cycle.yaml"),
                load_config("cycle.yaml"))
        assert "undo with" not in capsys.readouterr().out


def test_cycle_report_has_an_expected_gain_column(quickstart: Path) -> None:
    r = invoke("improve", "cycle.yaml", "--headless", "--yes")
    report_line = next(line for line in r.stdout.splitlines() if line.startswith("report: "))
    text = (quickstart / report_line.removeprefix("report: ").strip()).read_text()
    assert "| # | type | priority | expected gain | decision |" in text
    data = json.loads((quickstart / report_line.removeprefix("report: ").strip()).with_suffix(".json").read_text())
    gain = data["rounds"][1]["suggestions"][0]["expected_improvement"]
    assert gain and f"| {gain} |" in text


def test_improve_without_a_terminal_and_without_headless_fails_at_once(quickstart: Path) -> None:
    """Issue 33: without a terminal the TUI wrote escape codes into the pipe and hung."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "cycle", "improve", "cycle.yaml"],
                          cwd=quickstart, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--headless --yes" in done.stderr and "\x1b[" not in done.stdout + done.stderr
    assert not (quickstart / ".cycle" / "cycle.db").exists()  # nothing ran


def test_a_resume_keeps_the_flags_the_cycle_started_with(quickstart: Path) -> None:
    """Issue 33: `cycle improve -n 500 -c 1`, interrupted, then `--resume` ran with 3
    iterations: the flags are stored with the cycle, reused, and other ones refused."""
    from cycle.store import Store

    first = invoke("improve", "--headless", "--yes", "-n", "2", "-c", "1")
    assert first.exit_code == 0, first.output
    with Store.open(quickstart / ".cycle" / "cycle.db") as store:
        (row,) = store.cycles.recent()
        assert row.config["overrides"] == {"iterations": 2, "concurrency": 1}
        store.cycles.set_status(row.id, "interrupted")  # as a kill leaves it to resume
    refused = invoke("improve", "--headless", "--yes", "--resume", "-n", "3")
    assert refused.exit_code == 2
    assert "--iterations 3 (it ran with 2)" in refused.output
    kept = invoke("improve", "--headless", "--yes", "--resume")
    assert "run.iterations: 3 -> 2 (--iterations)" in kept.output, kept.output
