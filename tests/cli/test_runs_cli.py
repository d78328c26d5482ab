"""`cycle runs` lists the stored runs; `compare` and `run --resume` take ids by prefix,
suffix, @last and @prev."""

import json

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from tests.cli.test_run_cli import project

CRITERIA = """
    criteria:
      - id: no_guarantees
        check: {type: not_contains, values: [guarantee]}
    run: {iterations: 1}
"""


def invoke(tmp_path, *args):
    return CliRunner().invoke(cli, ["--store", str(tmp_path / "store.db"), *args])


def two_runs(tmp_path) -> tuple[str, list[str]]:
    cfg = project(tmp_path, CRITERIA)
    ids = []
    for _ in range(2):
        r = invoke(tmp_path, "run", cfg, "--json", "--no-reports")
        assert r.exit_code == 0, r.output
        ids.append(json.loads(r.output)["run_id"])
    return cfg, ids


def test_lists_runs_newest_first_with_their_figures(tmp_path):
    _, (first, second) = two_runs(tmp_path)
    r = invoke(tmp_path, "runs")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].split()[:4] == ["run", "prompt@version", "from", "status"]
    assert lines[1].startswith(second) and lines[2].startswith(first)
    assert "support@1.0.0" in lines[1] and "100.0" in lines[1] and "100%" in lines[1]
    assert "offline model" in lines[-1]  # the rows are marked, and the mark explained
    rows = json.loads(invoke(tmp_path, "runs", "--json").output)
    assert [row["id"] for row in rows] == [second, first]
    assert rows[0]["score"] == 100.0 and rows[0]["cases"] == 2 and rows[0]["offline"] is True


def test_filters_by_prompt_version_and_date(tmp_path):
    two_runs(tmp_path)
    assert len(json.loads(invoke(tmp_path, "runs", "support", "--version", "1.0.0", "--json").output)) == 2
    assert json.loads(invoke(tmp_path, "runs", "support", "--version", "9.9.9", "--json").output) == []
    assert json.loads(invoke(tmp_path, "runs", "other", "--json").output) == []
    assert len(json.loads(invoke(tmp_path, "runs", "--since", "1h", "--json").output)) == 2
    assert json.loads(invoke(tmp_path, "runs", "--until", "2001-01-01", "--json").output) == []
    assert len(json.loads(invoke(tmp_path, "runs", "--since", "2001-01-01", "-n", "1",
                                 "--json").output)) == 1
    r = invoke(tmp_path, "runs", "--until", "2001-01-01")
    assert "No runs matching the filters" in r.output
    r = invoke(tmp_path, "runs", "--since", "last tuesday")
    assert r.exit_code == 2 and "--since" in r.output and "2026-11-01" in r.output
    r = invoke(tmp_path, "runs", "--version", "1.0.0")
    assert r.exit_code == 2 and "needs the prompt" in r.output


@pytest.mark.parametrize("value", ["99999999d", "0001-01-01"])
def test_a_date_out_of_range_is_a_usage_error(tmp_path, value):
    """--since 99999999d (before year 1) and a local 0001-01-01 (year 0 in UTC) were
    internal errors: OverflowError / ValueError, exit 4."""
    two_runs(tmp_path)
    r = invoke(tmp_path, "runs", "--since", value)
    assert r.exit_code == 2 and "out of the range of dates" in r.output, r.output


def test_cycle_rounds_are_runs_too(tmp_path):
    cfg = project(tmp_path, CRITERIA, "improve: {stop: {max_rounds: 1}}\n")
    assert invoke(tmp_path, "run", cfg, "-q", "--no-reports").exit_code == 0
    r = invoke(tmp_path, "improve", cfg, "--headless", "--yes", "-q")
    assert r.exit_code == 0, r.output
    rows = json.loads(invoke(tmp_path, "runs", "--json").output)
    cycle_id = next(row["cycle_id"] for row in rows if row["cycle_id"])
    assert "round 0 baseline" in invoke(tmp_path, "runs").output
    only_cycle = json.loads(invoke(tmp_path, "runs", "--cycle", cycle_id, "--json").output)
    assert only_cycle and all(row["cycle_id"] == cycle_id for row in only_cycle)
    no_cycles = json.loads(invoke(tmp_path, "runs", "--no-cycles", "--json").output)
    assert len(no_cycles) == 1 and no_cycles[0]["cycle_id"] is None


def test_compare_takes_last_prev_prefix_and_suffix(tmp_path):
    _, (first, second) = two_runs(tmp_path)
    r = invoke(tmp_path, "compare", "@prev", "@last", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert (out["a"], out["b"]) == (first, second)
    r = invoke(tmp_path, "compare", first[-6:], second[:-3], "--json")  # suffix, prefix
    assert r.exit_code == 0, r.output
    assert (json.loads(r.output)["a"], json.loads(r.output)["b"]) == (first, second)


def test_ambiguous_and_unknown_run_ids_say_what_to_do(tmp_path):
    _, (first, second) = two_runs(tmp_path)
    r = invoke(tmp_path, "compare", "run-", "@last")
    assert r.exit_code == 2
    assert "matches several runs" in r.output and first in r.output and second in r.output
    r = invoke(tmp_path, "compare", "nope", "@last")
    assert r.exit_code == 2 and "no run 'nope'" in r.output and "cycle runs" in r.output
    assert "Traceback" not in r.output


def test_prev_needs_two_runs(tmp_path):
    cfg = project(tmp_path, CRITERIA)
    invoke(tmp_path, "run", cfg, "-q", "--no-reports")
    r = invoke(tmp_path, "compare", "@prev", "@last")
    assert r.exit_code == 2 and "@prev: the store has only one run" in r.output


def test_resume_takes_a_suffix(tmp_path):
    cfg, (first, _) = two_runs(tmp_path)
    r = invoke(tmp_path, "run", cfg, "--resume", first[-6:], "--json", "--no-reports")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["run_id"] == first


def test_runs_show_prints_one_run_case_by_case_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _, (first, _second) = two_runs(tmp_path)
    r = invoke(tmp_path, "runs", "show", first[-6:])  # a unique suffix
    assert r.exit_code == 0, r.output
    assert first in r.output and "Cases 2:" in r.output
    data = json.loads(invoke(tmp_path, "runs", "show", "@prev", "--json").output)
    assert data["run_id"] == first and len(data["cases"]) == 2 and data["reports"] == {}
    assert not (tmp_path / "reports").exists()
    wrong = invoke(tmp_path, "runs", "support", first)
    assert wrong.exit_code == 2 and "cycle runs show RUN_ID" in wrong.output


def test_a_killed_run_shows_as_interrupted_with_the_command_that_resumes_it(tmp_path):
    """A run whose process was killed (kill -9: its lease left behind, its row 'running')
    was listed and shown as 'running', with no word of how to go on; a killed cycle
    already said 'interrupted' and how to resume it."""
    import socket
    import subprocess
    import sys

    from cycle.store import Store

    cfg, (_, last) = two_runs(tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid of this machine that no longer runs
    with Store.open(tmp_path / "store.db") as store, store.transaction() as db:
        db.execute("UPDATE runs SET status = 'running', finished_at = NULL WHERE id = ?", (last,))
        db.execute("INSERT INTO locks (name, host, pid, acquired_at) VALUES (?, ?, ?, 'x')",
                   (f"run:{last}", socket.gethostname(), gone.pid))
    resume = f"resume with: cycle run {cfg} --resume {last}"
    r = invoke(tmp_path, "runs")
    assert r.exit_code == 0 and " interrupted " in r.output and resume in r.output, r.output
    assert json.loads(invoke(tmp_path, "runs", "--json").output)[0]["status"] == "interrupted"
    r = invoke(tmp_path, "runs", "show", last)
    assert f"Run interrupted: its process is gone (killed?); {resume}" in r.output, r.output
    r = invoke(tmp_path, "run", cfg, "--resume", last, "--json", "--no-reports")
    assert r.exit_code == 0, r.output  # the command it gives works
    assert json.loads(invoke(tmp_path, "runs", "--json").output)[0]["status"] == "finished"


@pytest.mark.parametrize("args", [["runs", "-n", "1" + "0" * 22], ["cycles", "-n", "1" + "0" * 22],
                                  ["history", "support", "-n", "1" + "0" * 22],
                                  ["history", "support", "--offset", "1" + "0" * 22]])
def test_a_listing_size_past_what_the_store_holds_is_a_usage_error(tmp_path, args):
    """-n 10**22 reached SQLite's LIMIT: 'internal error: OverflowError: Python int too
    large to convert to SQLite INTEGER'."""
    two_runs(tmp_path)
    r = invoke(tmp_path, *args)
    assert r.exit_code == 2 and "is not in the range" in r.output, r.output
