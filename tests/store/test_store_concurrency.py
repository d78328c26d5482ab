"""Two processes writing the same store at once lose nothing and never share a version number;
what a transaction (or one inside another) keeps and undoes."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cycle.errors import StoreError
from cycle.prompts.semver import parse
from cycle.store import Store

ROOT = Path(__file__).resolve().parents[2]
N = 40

WRITER = """
import sys, time
from pathlib import Path
from cycle.records import Prompt
from cycle.store import Store

path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
# start together: each says it is ready and waits for the other
gate = Path(path).parent.parent
(gate / f"ready-{name}").touch()
deadline = time.monotonic() + 60
while len(list(gate.glob("ready-*"))) < 2 and time.monotonic() < deadline:
    time.sleep(0.005)
# both processes may arrive at a blank file together: opening migrates it once
store = Store.open(path)
for k in range(n):
    store.save_version(Prompt(id=f"own-{name}", system=f"step {k}"), message=name)
    store.save_version(Prompt(id="shared", system=f"{name} step {k}"), message=name, who=name)
    store.save_version(Prompt(id="same", system="identical content from both"))
store.close()
"""


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path):
    path = tmp_path / "store" / "cycle.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, str(N)], env=env,
                         stderr=subprocess.PIPE, text=True)
        for name in ("a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err

    with Store.open(path) as store:
        assert store.count_versions("own-a") == N
        assert store.count_versions("own-b") == N
        shared = store.history("shared", limit=10 * N)
        assert len(shared) == 2 * N
        numbers = [v.version for v in shared]
        assert len(set(numbers)) == 2 * N
        # numbers follow creation order without a gap: 1.0.0 .. 1.0.(2N-1)
        assert sorted(parse(x) for x in numbers) == [(1, 0, k) for k in range(2 * N)]
        assert sorted(v.seq for v in shared) == list(range(1, 2 * N + 1))
        systems = {v.prompt.system for v in shared}
        assert systems == {f"{w} step {k}" for w in "ab" for k in range(N)}
        assert store.labels("shared")["head"] == shared[0].version
        # every head move is recorded: the first save creates head and production
        moves = store.label_moves("shared", label="head", limit=10 * N)
        assert len(moves) == 2 * N
        assert {m.who for m in moves} == {"a", "b"}
        # identical content saved 2N times by two processes is one version
        assert store.count_versions("same") == 1


def test_a_write_outside_a_transaction_is_committed_and_a_failed_inner_one_is_undone_alone(
        tmp_path: Path):
    """What another process sees: a lone statement commits at once; a transaction inside a
    transaction that fails takes back its own writes and no others; a failed outer one all."""
    path = tmp_path / "cycle.db"
    store = Store.open(path)
    other = sqlite3.connect(path)

    def runs() -> list[str]:
        return [r[0] for r in other.execute("SELECT id FROM runs ORDER BY id")]

    store.db.execute("INSERT INTO runs (id, status) VALUES ('alone', 'finished')")
    assert runs() == ["alone"]
    with store.transaction() as db:
        db.execute("INSERT INTO runs (id, status) VALUES ('outer', 'finished')")
        with pytest.raises(ZeroDivisionError), store.transaction() as inner:
            inner.execute("INSERT INTO runs (id, status) VALUES ('inner', 'finished')")
            1 / 0  # noqa: B018
        with store.transaction() as kept:
            kept.execute("INSERT INTO runs (id, status) VALUES ('kept', 'finished')")
    assert runs() == ["alone", "kept", "outer"]
    with pytest.raises(StoreError, match="nothing was saved"), store.transaction() as db:
        db.execute("INSERT INTO runs (id, status) VALUES ('lost', 'finished')")
        with store.transaction() as inner:
            inner.execute("INSERT INTO runs (id, status) VALUES ('lost-too', 'finished')")
        db.execute("INSERT INTO runs (id, status) VALUES ('x', 'no such status')")
    assert runs() == ["alone", "kept", "outer"]
    assert not store.db.in_transaction
    other.close()
    store.close()


def test_a_reopened_store_is_a_connection_of_its_own_that_outlives_the_first(tmp_path, monkeypatch):
    """What a thread reads through (the TUI's workers): another connection to the same
    store, which closing the first cannot touch, and found again from another folder."""
    from cycle.records import Prompt

    monkeypatch.chdir(tmp_path)
    first = Store.open(Path("s.db"))  # a relative path, as --store may give it
    first.save_version(Prompt(id="p", system="Say hi."), source="initial")
    monkeypatch.chdir(tmp_path.parent)
    own = first.reopen()
    try:
        assert own.db is not first.db
        first.close()
        assert own.history("p")[0].prompt.system == "Say hi."
    finally:
        own.close()
