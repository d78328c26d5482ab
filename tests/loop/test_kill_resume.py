"""Kill `cycle improve` mid-round (SIGKILL, and Ctrl-C), resume it, and check the store:
no duplicated results, no model call repeated for a stored result, a sound database."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"

# The real CLI in a subprocess, on the offline model made a little slow (30 ms a call)
# so that a round is long enough to be killed in the middle of it.
WRAPPER = '''
import asyncio, signal, sys
# a suite started in the background of a non-interactive shell ignores SIGINT, and this
# process inherits that: Python then installs no KeyboardInterrupt, and Ctrl-C would be a
# signal the cycle never hears (as for any program started that way)
signal.signal(signal.SIGINT, signal.default_int_handler)
from cycle.testing.offline import OfflineAPI
from cycle.llm.registry import register_provider

class SlowOffline(OfflineAPI):
    async def generate(self, messages, tools, config):
        await asyncio.sleep(0.03)
        return await super().generate(messages, tools, config)

register_provider("slow", SlowOffline)
from cycle.cli import main
sys.argv = ["cycle", *sys.argv[1:]]
main()
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("cases", "prompts"):
        shutil.copytree(QUICKSTART / name, tmp_path / name)
    config = yaml.safe_load((QUICKSTART / "cycle.yaml").read_text())
    config.update(agent="slow:default", judge="slow:default", improver="slow:default")
    config["run"] = {"iterations": 3, "concurrency": 2, "timeout": 60}
    config["improve"] = {"acceptance": "significant", "stop": {"max_rounds": 2}}
    (tmp_path / "cycle.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "run_cycle.py").write_text(WRAPPER)
    return tmp_path


def _env(project: Path) -> dict[str, str]:
    """This checkout on the path, the project's own store, and where a counting wrapper
    logs the calls it answers."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CYCLE_TEST_CALL_LOG": str(project / "calls.log")}
    env.pop("CYCLE_STORE", None)
    return env


def cli(project: Path, *args: str) -> subprocess.Popen:
    """The real CLI, through the project's wrapper (its slow or counting provider)."""
    return subprocess.Popen([sys.executable, str(project / "run_cycle.py"), *args], cwd=project,
                            env=_env(project), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def start(project: Path, *args: str) -> subprocess.Popen:
    return cli(project, "improve", "cycle.yaml", "--headless", "--yes", *args)


def wait_for_candidate_results(db: Path, proc: subprocess.Popen, at_least: int = 4) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the cycle ended before it could be killed: " + proc.communicate()[1]
        if db.exists():
            try:
                with sqlite3.connect(db, timeout=5) as conn:
                    n = conn.execute("SELECT count(*) FROM results WHERE run_id LIKE '%-r1'").fetchone()[0]
            except sqlite3.OperationalError:
                n = 0
            if n >= at_least:
                return
        time.sleep(0.01)
    raise AssertionError("round 1's candidate never started")


def snapshot(db: Path) -> tuple[set, dict]:
    with sqlite3.connect(db) as conn:
        keys = set(conn.execute("SELECT run_id, case_id, iteration FROM results").fetchall())
        calls = {}
        for run_id, case_id, iteration, role, n in conn.execute(
            "SELECT run_id, case_id, iteration, role, count(*) FROM calls WHERE run_id IS NOT NULL "
            "GROUP BY run_id, case_id, iteration, role"
        ):
            calls[(run_id, case_id, iteration, role)] = n
    return keys, calls


def check_resumed(db: Path, before_keys: set, before_calls: dict) -> str:
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        (cycle_id, status, reason), = conn.execute("SELECT id, status, stop_reason FROM cycles").fetchall()
        assert status == "finished" and reason.startswith("max_rounds"), reason
        dupes = conn.execute("SELECT run_id, case_id, iteration FROM results GROUP BY run_id, case_id, "
                             "iteration HAVING count(*) > 1").fetchall()
        assert dupes == []
        per_run = dict(conn.execute("SELECT run_id, count(*) FROM results GROUP BY run_id").fetchall())
        assert per_run[f"{cycle_id}-r0"] == 15 and per_run[f"{cycle_id}-r1"] == 15
        improver_calls = dict(conn.execute(
            "SELECT round, count(*) FROM calls WHERE role = 'improver' GROUP BY round").fetchall())
        assert improver_calls.get(1) == 1  # the suggestions were stored: not asked for again
        rounds = conn.execute("SELECT round, status, stage FROM rounds ORDER BY round").fetchall()
        assert rounds[:3] == [(0, "finished", "baseline"), (1, "finished", "improve"),
                              (2, "finished", "improve")]
        # a confirmation follows when exploring kept a candidate
        assert rounds[3:] in ([], [(3, "finished", "confirm")])
    _, after_calls = snapshot(db)
    for (run_id, case_id, iteration, role), n in before_calls.items():
        if (run_id, case_id, iteration) in before_keys:  # a result stored before the kill
            assert after_calls[(run_id, case_id, iteration, role)] == n, (run_id, case_id, iteration, role)
    return cycle_id


def test_sigkill_mid_round_then_resume(project: Path) -> None:
    db = project / ".cycle" / "cycle.db"
    proc = start(project)
    wait_for_candidate_results(db, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    keys, calls = snapshot(db)
    assert any(run.endswith("-r1") for run, _, _ in keys)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM cycles").fetchone()[0] == "running"  # killed: never marked
    # but `cycle cycles` sees that its process is gone, and says how to resume it
    listed = subprocess.run([sys.executable, "-m", "cycle", "cycles", "--json"], cwd=project,
                            env=_env(project), capture_output=True, text=True, timeout=60,
                            check=True)
    (row,) = json.loads(listed.stdout)
    assert row["status"] == "interrupted", listed.stderr
    assert f"resume with: cycle improve cycle.yaml --resume {row['id']}" \
        in row["stop_reason"]

    resumed = start(project, "--resume", "--events", "resumed.jsonl")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert "resuming cycle" in out and "report: reports/" in out
    cycle_id = check_resumed(db, keys, calls)
    assert (project / "reports" / f"{cycle_id}.md").exists()
    # the resumed cycle tells its views the rounds it had: the dashboard keeps round 0
    from cycle import events as ev
    from cycle.tui.state import DashboardState

    state = DashboardState()
    lines = (project / "resumed.jsonl").read_text().splitlines()
    started = json.loads(lines[0])
    assert started["kind"] == "cycle_started" and started["resumed"]
    assert [r["round"] for r in started["restored"]][:1] == [0]
    state.apply(ev.CycleStarted(cycle_id=started["cycle_id"], prompt_id=started["prompt_id"],
                                version=started["version"], resumed=True,
                                restored=tuple(started["restored"])))
    assert state.rounds[0].score is not None and state.scores[0] == state.rounds[0].score
    # and, beside its score, its judge's agreement with people: none labelled yet
    judge = state.rounds[0].judge
    assert judge is not None and judge.model == "offline:default" and judge.labels == 0
    assert judge.text() == "uncalibrated (no labels)"


def test_ctrl_c_marks_the_cycle_interrupted_and_resume_continues(project: Path) -> None:
    db = project / ".cycle" / "cycle.db"
    proc = start(project)
    wait_for_candidate_results(db, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Resume with: cycle improve" in err
    keys, calls = snapshot(db)
    with sqlite3.connect(db) as conn:
        cycle_id, status, reason = conn.execute("SELECT id, status, stop_reason FROM cycles").fetchone()
    assert status == "interrupted" and f"resume with: cycle improve cycle.yaml --resume {cycle_id}" in reason

    resumed = start(project, "--resume", cycle_id)
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert check_resumed(db, keys, calls) == cycle_id


def test_sigkill_of_a_tool_using_cycle_then_resume(tmp_path: Path) -> None:
    """examples/agent-tools on the slow offline model: each iteration is a tool loop of
    two or three model turns. Killed mid-round, resumed: the same guarantees, and the
    stored traces of the finished iterations are whole."""
    example = ROOT / "examples" / "agent-tools"
    for name in ("cases", "prompts"):
        shutil.copytree(example / name, tmp_path / name)
    config = yaml.safe_load((example / "cycle.yaml").read_text())
    config.update(agent="slow:default", judge="slow:default", improver="slow:default")
    config["run"] = {"iterations": 3, "concurrency": 2, "timeout": 60}
    config["improve"] = {"acceptance": "significant", "stop": {"max_rounds": 2}, "low_score": 95}
    (tmp_path / "cycle.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "run_cycle.py").write_text(WRAPPER)
    db = tmp_path / ".cycle" / "cycle.db"
    proc = start(tmp_path)
    wait_for_candidate_results(db, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    keys, calls = snapshot(db)

    resumed = start(tmp_path, "--resume")
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    cycle_id = check_resumed(db, keys, calls)
    from cycle.store import Store

    with Store.open(db) as store:
        candidate = store.runs.load_results(f"{cycle_id}-r1")
    assert all([c.name for c in r.tool_calls] == ["lookup_order", "refund"] for r in candidate)
    assert all([e.kind for e in r.trace].count("tool_result") == 2 for r in candidate)
    assert all(r.state == {"session": {"refunded": True}} for r in candidate)


COUNTING_WRAPPER = '''
import asyncio, os, sys
from cycle.testing.offline import OfflineAPI
from cycle.llm.registry import register_provider

class CountedOffline(OfflineAPI):
    """The offline model, a little slow, writing one line per answer it gives (paid)."""
    async def generate(self, messages, tools, config):
        await asyncio.sleep(0.01)
        out = await super().generate(messages, tools, config)
        with open(os.environ["CYCLE_TEST_CALL_LOG"], "a") as f:
            f.write("call\\n")
        return out

register_provider("counted", CountedOffline)
from cycle.cli import main
sys.argv = ["cycle", *sys.argv[1:]]
main()
'''


def _conversation_project(path: Path) -> Path:
    example = ROOT / "examples" / "conversation"
    for name in ("cases", "prompts"):
        shutil.copytree(example / name, path / name)
    config = yaml.safe_load((example / "cycle.yaml").read_text())
    config.update(agent="counted:default", judge="counted:default", improver="counted:default")
    config["run"] = {"iterations": 2, "concurrency": 2, "timeout": 60}
    config["cache"] = {"enabled": False}  # only the call journal can spare a re-payment
    config["improve"]["stop"] = {"max_rounds": 2}
    for case in (cases := yaml.safe_load((path / "cases" / "returns.yaml").read_text())):
        case["conversation"]["user"]["model"] = "counted:default"
    (path / "cases" / "returns.yaml").write_text(yaml.safe_dump(cases))
    (path / "cycle.yaml").write_text(yaml.safe_dump(config))
    (path / "run_cycle.py").write_text(COUNTING_WRAPPER)
    return path


def _start_counted(project: Path, *args: str) -> subprocess.Popen:
    return start(project, "-q", *args)


def _calls(project: Path) -> int:
    log = project / "calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.mark.parametrize("fraction", [0.3, 0.7])
def test_a_killed_conversation_cycle_re_pays_only_the_calls_in_flight(tmp_path, fraction):
    """The response cache off, conversations with a simulated user (agent turns, user turns,
    judge and improver calls): killed with SIGKILL part way, resumed, the cycle has paid
    for at most the calls that were in flight (2 cases at a time) more than a cycle that
    was never killed, and every paid call is one row of the cost totals."""
    whole = _conversation_project(tmp_path / "whole")
    proc = _start_counted(whole)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    uncut = _calls(whole)

    cut = _conversation_project(tmp_path / "cut")
    proc = _start_counted(cut)
    deadline = time.monotonic() + 60
    while _calls(cut) < uncut * fraction:
        assert proc.poll() is None and time.monotonic() < deadline, "ended before the kill"
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    resumed = _start_counted(cut, "--resume")
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert uncut <= _calls(cut) <= uncut + 2, (uncut, _calls(cut))
    with sqlite3.connect(cut / ".cycle" / "cycle.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        paid = conn.execute("SELECT count(*) FROM calls WHERE cache_hit = 0 AND error IS NULL "
                            "AND output IS NOT NULL").fetchone()[0]
        assert conn.execute("SELECT status FROM cycles").fetchone()[0] == "finished"
    assert uncut <= paid <= _calls(cut)  # each answer kept once; one in flight may be lost


def test_a_killed_run_resumed_re_pays_only_the_calls_in_flight(tmp_path):
    """`cycle run --resume RUN_ID`, the cache off: the same promise as for a cycle."""
    def run(project: Path, *args: str) -> subprocess.Popen:
        return cli(project, "run", "cycle.yaml", "-q", "--no-reports", *args)

    whole = _conversation_project(tmp_path / "whole")
    proc = run(whole)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1), err
    uncut = _calls(whole)

    cut = _conversation_project(tmp_path / "cut")
    proc = run(cut)
    while _calls(cut) < uncut // 2:
        assert proc.poll() is None, "ended before the kill"
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    with sqlite3.connect(cut / ".cycle" / "cycle.db") as conn:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
    resumed = run(cut, "--resume", run_id)
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode in (0, 1), err
    assert uncut <= _calls(cut) <= uncut + 2, (uncut, _calls(cut))


def test_a_second_resume_of_a_running_cycle_refuses_and_the_first_finishes(project: Path) -> None:
    """Two `cycle improve --resume` of one cycle: the second refuses before it writes
    anything (exit 2, naming the process that runs it); the first finishes the cycle,
    whose results are whole. The first resume takes over the lease of the killed one."""
    db = project / ".cycle" / "cycle.db"
    proc = start(project)
    wait_for_candidate_results(db, proc)
    proc.send_signal(signal.SIGKILL)  # its lease stays, held by a process that is gone
    proc.wait(timeout=10)
    keys, calls = snapshot(db)
    with sqlite3.connect(db) as conn:
        (cycle_id,) = conn.execute("SELECT id FROM cycles").fetchone()

    first = start(project, "--resume", cycle_id)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the first holds the lease
        assert first.poll() is None, first.communicate()[1]
        with sqlite3.connect(db, timeout=5) as conn:
            held = conn.execute("SELECT pid FROM locks WHERE name = ?",
                                [f"cycle:{cycle_id}"]).fetchone()
        if held and held[0] == first.pid:
            break
        time.sleep(0.01)
    # the first is paused while the second starts (on a loaded machine it would otherwise
    # finish first), at a moment it holds no write transaction the second would wait on:
    # stopped inside one, it goes on a moment and is stopped again
    for _ in range(200):
        first.send_signal(signal.SIGSTOP)
        try:
            with sqlite3.connect(db, timeout=0.2) as conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.rollback()
            break
        except sqlite3.OperationalError:
            first.send_signal(signal.SIGCONT)
            time.sleep(0.005)
    else:
        raise AssertionError("the first resume never stood outside a write transaction")
    try:
        second = start(project, "--resume", cycle_id)
        _, err = second.communicate(timeout=60)
    finally:
        first.send_signal(signal.SIGCONT)
    assert second.returncode == 2, err
    assert f"cycle {cycle_id} is being run by process {first.pid} on this machine" in err
    assert "Traceback" not in err

    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert check_resumed(db, keys, calls) == cycle_id
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM locks").fetchone()[0] == 0  # given back
