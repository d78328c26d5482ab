"""`cycle run` SIGKILLed while it waits to ask again (the real CLI, the real openai SDK,
the loopback server): the first answer ended with the server's error (OpenRouter's
``finish_reason: "error"``, its usage billed), and the retry waits its backoff. The
attempt's charge is in the store from before the wait, so the resume's cap starts from it
and the run's stored cost holds it once, beside the answer the resume paid for."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.llm.pricing import DEFAULT_TABLE
from cycle.records import Usage
from cycle.store import Store
from cycle.testing import Fault
from tests.cli.test_before_paying import CONFIG as CHECKED
from tests.cli.test_before_paying import PROMPT
from tests.llm.test_server_quirks import completion

ROOT = Path(__file__).resolve().parents[2]
MODEL = "openai:gpt-4o-mini"

CASES = "- id: c1\n  input: {question: Where is my order?}\n"
#: the support prompt and regex check of the checks before paying, one iteration, a cap
CONFIG = CHECKED + "run: {iterations: 1}\nbudget: 1.0\n"


@pytest.fixture
def project(loopback_project):
    return loopback_project(PROMPT, CASES, CONFIG)


def _failed_rows(db: Path) -> list[tuple[str, float]]:
    with Store.open(db) as store:
        return store.db.execute(
            "SELECT run_id, cost FROM calls WHERE error IS NOT NULL").fetchall()


def test_a_charge_survives_a_sigkill_during_the_backoff(project, server):
    db = project / ".cycle" / "cycle.db"
    failed = json.loads(completion({"content": "Dear Ann, your ord"}, "error").body)
    failed["choices"][0]["error"] = {"code": 502, "message": "Upstream provider failed"}
    # the billed failure, then (were the retry sent) an answer slow enough to be killed under
    server.enqueue(Fault.malformed(json.dumps(failed)), Fault.slow(60))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "cycle", "run", "cycle.yaml", "--no-cache"],
                            cwd=project, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (db.exists() and _failed_rows(db)):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the failed attempt's charge was never kept"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)  # within the backoff: at least 1 s before the retry
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert server.request_count == 1  # killed before the retry was sent
    ((run_id, charge),) = _failed_rows(db)
    billed = DEFAULT_TABLE.cost(MODEL, Usage(input_tokens=10, output_tokens=5)).usd
    assert charge == pytest.approx(billed)
    with Store.open(db) as store:
        assert store.runs.paid(run_id) == pytest.approx({"agent": billed})  # the resume's start

    server.reset()  # the slow answer was never asked for
    resumed = CliRunner().invoke(cli, ["run", "cycle.yaml", "--no-cache", "--json",
                                       "--resume", run_id])
    assert resumed.exit_code == 0, resumed.output
    assert server.request_count == 1 and json.loads(resumed.stdout)["summary"]["passed"] == 1
    with Store.open(db) as store:
        rows = store.db.execute("SELECT error IS NULL, cost FROM calls WHERE run_id = ? "
                                "ORDER BY at", [run_id]).fetchall()
        paid = store.runs.paid(run_id)
        usage = store.runs.usage_by_role(run_id)["agent"]
    assert [ok for ok, _ in rows] == [0, 1]  # the failed attempt's charge, then the answer
    assert rows[0][1] == pytest.approx(billed)
    assert paid == pytest.approx({"agent": billed + rows[1][1]})  # each charge once
    # one call, however many paid attempts: the charge before the kill is a retried attempt
    assert (usage.calls, usage.retried_charged) == (1, 1)
    assert usage.cost == pytest.approx(billed + rows[1][1])
