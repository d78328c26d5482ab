"""Leases (cycle.store.locks): one process at a time runs a cycle or a run."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.errors import LockedError
from cycle.store import Store
from cycle.store.locks import acquire, held, release


@pytest.fixture
def store(store_target):
    """The store on each backend (tests/conftest.py: a SQLite file, a PostgreSQL schema)."""
    with Store.open(store_target) as s:
        yield s


def _hold(store: Store, name: str, host: str, pid: int) -> None:
    with store.transaction() as db:
        db.execute("INSERT INTO locks (name, host, pid, acquired_at) VALUES (?, ?, ?, '2026-01-01')",
                   (name, host, pid))


def test_a_lease_held_by_a_live_process_of_this_machine_refuses(store):
    import socket

    _hold(store, "cycle:c-1", socket.gethostname(), os.getppid())  # alive, not us
    with pytest.raises(LockedError) as e:
        acquire(store, "cycle:c-1", what="cycle c-1", resume_hint="cycle improve --resume c-1")
    assert f"process {os.getppid()} on this machine" in e.value.message
    assert e.value.exit_code == 2


def test_a_lease_of_a_process_that_is_gone_is_taken_over(store):
    import socket
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    _hold(store, "run:r-1", socket.gethostname(), int(gone.stdout))
    with held(store, "run:r-1", what="run r-1", resume_hint="x"):
        (pid,) = store.db.execute("SELECT pid FROM locks").fetchone()
        assert pid == os.getpid()
    assert store.db.execute("SELECT count(*) FROM locks").fetchone()[0] == 0


def test_a_lease_on_another_machine_is_taken_over_only_when_asked(store):
    _hold(store, "cycle:c-2", "build-runner-7", 4242)
    with pytest.raises(LockedError) as e:
        acquire(store, "cycle:c-2", what="cycle c-2", resume_hint="cycle improve --resume c-2")
    assert "process 4242 on build-runner-7" in e.value.message and "--take-over" in e.value.hint
    acquire(store, "cycle:c-2", what="cycle c-2", resume_hint="x", take_over=True)
    release(store, "cycle:c-2")
    assert store.db.execute("SELECT count(*) FROM locks").fetchone()[0] == 0


def test_a_run_being_run_elsewhere_is_not_resumed_beside_it(tmp_path, monkeypatch):
    import shutil
    from pathlib import Path

    quickstart = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
    for name in ("cases", "prompts", "cycle.yaml"):
        (shutil.copytree if name != "cycle.yaml" else shutil.copy)(quickstart / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, ["run", "cycle.yaml", "-n", "1"])
    assert done.exit_code in (0, 1), done.output
    (run_id,) = [p.stem for p in (tmp_path / "reports").glob("*.json")]
    with Store.open(tmp_path / ".cycle" / "cycle.db") as s:
        _hold(s, f"run:{run_id}", "ci-runner-2", 77)
    r = CliRunner().invoke(cli, ["run", "cycle.yaml", "--resume", run_id])
    assert r.exit_code == 2, r.output
    assert f"run {run_id} is being run by process 77 on ci-runner-2" in r.output
    taken = CliRunner().invoke(cli, ["run", "cycle.yaml", "--resume", run_id, "--take-over"])
    assert taken.exit_code in (0, 1), taken.output
