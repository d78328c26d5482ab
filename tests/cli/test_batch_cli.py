"""`cycle run --batch` (issue 17): the real CLI, the real openai SDK and the loopback
server's batch endpoints. The run's calls go in batch jobs at half the price; a run killed
(SIGKILL) while its job runs resumes by polling that job, and pays for nothing twice."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli

ROOT = Path(__file__).resolve().parents[2]

PROMPT = """\
id: support
system: You are a support agent.
user_template: "{{ question }}"
params:
  model: openai:gpt-4o-mini
"""
CASES = "".join(f"- id: c{i}\n  input: {{question: Where is order {i}?}}\n" for i in range(6))
CONFIG = """\
prompt: prompts/support.yaml
criteria:
  - id: short
    check: {type: regex, pattern: '^.{0,400}$'}
  - id: helpful
    rubric: Does it help the customer?
cases: [cases/*.yaml]
run: {iterations: 2}
providers:
  openai: {base_url: 'BASE', batch_poll: 0.05, batch_window: 0.2}
"""


@pytest.fixture
def project(loopback_project):
    return loopback_project(PROMPT, CASES, CONFIG)


def _runs(project: Path) -> dict[str, dict]:
    with sqlite3.connect(project / ".cycle" / "cycle.db") as conn:
        conn.row_factory = sqlite3.Row
        return {r["id"]: dict(r) for r in conn.execute("SELECT * FROM runs")}


def _cost(project: Path, run_id: str) -> float:
    with sqlite3.connect(project / ".cycle" / "cycle.db") as conn:
        return conn.execute("SELECT sum(cost) FROM calls WHERE run_id = ?", [run_id]).fetchone()[0]


def test_a_batch_run_sends_its_calls_in_jobs_at_half_the_price(project, server):
    runner = CliRunner()
    batched = runner.invoke(cli, ["run", "cycle.yaml", "--batch", "--no-cache", "--json"])
    assert batched.exit_code == 0, batched.output
    # the agent's 12 calls in one job, then the judge's 12 in another: none sent alone
    assert server.batches.created == 2 and server.request_count == 24
    out = json.loads(batched.stdout)
    assert out["summary"]["passed"] == 6 and out["summary"]["errors"] == 0
    with sqlite3.connect(project / ".cycle" / "cycle.db") as conn:
        jobs = conn.execute("SELECT calls, state, run_id FROM batch_jobs").fetchall()
    assert [(n, state) for n, state, _ in jobs] == [(12, "completed"), (12, "completed")]
    assert {r for _, _, r in jobs} == {out["run_id"]}

    live = runner.invoke(cli, ["run", "cycle.yaml", "--no-cache", "--json"])
    assert live.exit_code == 0, live.output
    assert server.batches.created == 2  # live: no job
    live_id = json.loads(live.stdout)["run_id"]
    assert _cost(project, out["run_id"]) == pytest.approx(_cost(project, live_id) / 2)


def test_batch_does_not_go_with_an_eval_file(project):
    result = CliRunner().invoke(cli, ["run", "--eval", "x.json", "--batch"])
    assert result.exit_code == 2 and "--batch does not apply to --eval" in result.output


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_batch_run_killed_while_its_job_runs_resumes_by_polling_it(project, server, backend,
                                                                      request):
    """On either backend of the store: the job's id is in the store, so the resume (here
    from another process, as on another machine for a team's store) polls it."""
    from cycle.store import Store

    target = (project / ".cycle" / "cycle.db" if backend == "sqlite"
              else request.getfixturevalue("postgres").schema_url())
    server.batches.delay = 1.5  # the agent's job runs long enough to be killed under it
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CYCLE_STORE": str(target)}
    proc = subprocess.Popen([sys.executable, "-m", "cycle", "run", "cycle.yaml", "--batch",
                             "--no-cache"], cwd=project, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        found = Store.open_existing(target)
        if found is not None:
            with found as store:
                if store.db.execute("SELECT count(*) FROM batch_jobs").fetchone()[0]:
                    break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert server.batches.created == 1 and server.request_count == 0  # nothing answered yet
    with Store.open(target) as store:
        (run_id,) = [r.id for r in store.runs.recent()]
        (job_id,) = store.db.execute("SELECT id FROM batch_jobs").fetchone()

    # resumed without --batch: it started with --batch, so it resumes in batch mode
    resumed = CliRunner().invoke(cli, ["--store", str(target), "run", "cycle.yaml",
                                       "--no-cache", "--resume", run_id])
    assert resumed.exit_code == 0, resumed.output
    assert "resumed with run.batch: False -> True (--batch)" in resumed.output
    assert f"batch {job_id} resumed" in resumed.output  # the progress says it
    assert "Cases 6: 6 passed" in resumed.output
    # the agent's job polled, not submitted again; then the judge's job
    assert server.batches.created == 2 and server.request_count == 24
    with Store.open(target) as store:
        paid = store.db.execute("SELECT role, count(*) FROM calls WHERE run_id = ? "
                                "GROUP BY role", [run_id]).fetchall()
    assert dict(paid) == {"agent": 12, "judge": 12}  # each call paid once


def test_a_dry_run_of_a_batch_run_prices_the_calls_at_the_batch_price(project, server):
    runner = CliRunner()
    live = json.loads(runner.invoke(cli, ["run", "--dry-run", "--json", "--no-cache"]).stdout)
    batch = json.loads(runner.invoke(cli, ["run", "--dry-run", "--json", "--no-cache",
                                           "--batch"]).stdout)
    assert batch["cost"] == pytest.approx([c / 2 for c in live["cost"]])
    assert any("batch prices" in n for n in batch["notes"])
    assert server.request_count == 0 and server.batches.created == 0


def test_improve_with_batch_evaluates_in_jobs_and_asks_the_improver_live(project, server):
    config = project / "cycle.yaml"
    config.write_text(config.read_text() + "improve: {batch: true, low_score: 100, "
                      "stop: {max_rounds: 1}}\n")
    result = CliRunner().invoke(cli, ["improve", "cycle.yaml", "--headless", "--yes"])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(project / ".cycle" / "cycle.db") as conn:
        in_jobs = conn.execute("SELECT sum(calls) FROM batch_jobs").fetchone()[0]
        runs = {r for (r,) in conn.execute("SELECT DISTINCT run_id FROM batch_jobs")}
        roles = dict(conn.execute("SELECT role, count(*) FROM calls GROUP BY role").fetchall())
    assert roles.get("improver", 0) >= 1
    assert any(r.endswith("-r0") for r in runs)  # the baseline's evaluation went in jobs
    # every call was in a job but the improver's, which went alone
    assert server.request_count == in_jobs + roles["improver"]
    assert in_jobs == roles["agent"] + roles["judge"]


def test_batch_works_without_a_providers_section(loopback_project, server, monkeypatch):
    """Issue 32: with no ``providers:`` section the batch timing is the defaults' (it was
    read from the Struct's class: a descriptor, and every call failed with a TypeError);
    both ``cycle run --batch`` and ``improve.batch`` go through jobs."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    config = CONFIG.split("providers:")[0]
    project = loopback_project(PROMPT, CASES, config + "improve: {batch: true, stop: {max_rounds: 1}}\n")
    runner = CliRunner()
    ran = runner.invoke(cli, ["run", "cycle.yaml", "--batch", "--no-cache", "--json"])
    assert ran.exit_code == 0, ran.output
    assert server.batches.created == 2  # the agent's calls, then the judge's, in jobs
    assert "TypeError" not in ran.output
    created = server.batches.created
    improved = runner.invoke(cli, ["improve", "cycle.yaml", "--headless", "--yes", "--no-cache"])
    assert improved.exit_code in (0, 1), improved.output
    assert "TypeError" not in improved.output and "member_descriptor" not in improved.output
    assert server.batches.created > created
    assert (project / ".cycle" / "cycle.db").exists()
