"""``cycle store copy SRC DST``: a store filled by real commands moved SQLite -> PostgreSQL
-> SQLite answers every command the same, new work on the copy takes the next ids, a
store with rows is never merged into, a copy that does not read back as its source is
not kept, and the password never shows (tests/conftest.py's throw-away cluster)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import NamedTuple

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.prompts.semver import bump
from cycle.store import Store, copying
from cycle.store.migrations import RECORD_TABLE
from cycle.store.store import shown_target
from cycle.testing.postgres import PASSWORD
from tests.stored import copied


def cycle(*args: str):
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert PASSWORD not in r.output
    return r


def copy(src: str | Path, dst: str | Path, *, code: int = 0):
    """``cycle store copy SRC DST --json``: its figures (or, failing, the result)."""
    r = cycle("store", "copy", str(src), str(dst), "--json")
    assert r.exit_code == code, r.output
    return json.loads(r.output) if code == 0 else r


class Filled(NamedTuple):
    store: Path
    config: Path
    run_id: str


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Filled:
    """A SQLite store as a person's first day leaves it: a run, a cycle, people's labels."""
    tmp = tmp_path_factory.mktemp("filled")
    store, config = tmp / "cycle.db", copied("quickstart", tmp) / "cycle.yaml"
    r = cycle("--store", str(store), "run", str(config), "-n", "2", "--no-reports", "-q")
    assert r.exit_code in (0, 1), r.output
    r = cycle("--store", str(store), "improve", str(config), "--headless", "--yes",
              "--report-dir", str(tmp / "reports"))
    assert r.exit_code == 0, r.output
    with Store.open(store) as s:
        run_id = s.runs.recent(limit=10)[-1].id  # the first run: of 2 iterations
    out = tmp / "labels.jsonl"
    assert cycle("--store", str(store), "judge", "sample", run_id, "--n", "6", "--out",
                 str(out), "--labeler", "ann").exit_code == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    for k, x in enumerate(lines):
        x["score"] = float(40 + 7 * k % 50)
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert cycle("--store", str(store), "judge", "labels", "import", str(out)).exit_code == 0
    return Filled(store, config, run_id)


def contents(target: str | Path) -> dict[str, tuple[int, str]]:
    with Store.open(target) as store:
        return {t.table: (t.rows, t.sha256) for t in copying.contents(store)}


def test_a_store_copied_to_postgresql_and_back_answers_every_command_the_same(
        filled, postgres, tmp_path, monkeypatch):
    """SQLite -> PostgreSQL -> SQLite (a new file in a new folder): history, runs, cycles,
    a run's cases and the judge's agreement with people say the same on all three, each
    table the same rows and hash; 7 rows at a time, so every table streams in batches."""
    monkeypatch.setattr(copying, "BATCH", 7)
    url, back = postgres.schema_url(), tmp_path / "new" / "cycle.db"
    there = copy(filled.store, url)
    again = copy(url, back)
    assert there["tables"] == again["tables"]
    assert contents(filled.store) == contents(url) == contents(back)
    tables = {t["table"]: t["rows"] for t in there["tables"]}
    with Store.open(filled.store) as store:
        assert set(tables) == store.dialect.tables(store.db) - {RECORD_TABLE}
    assert tables["verdicts"] > 7 * 10 and tables["human_labels"] == 6 * 3 and tables["rounds"]
    assert there["rows"] == sum(tables.values()) and there["verified"]
    assert there["destination"].startswith("postgresql://cycle:***@")
    assert again["source"] == there["destination"] and again["destination"] == str(back)

    def said(store: str | Path, *args: str) -> str:
        r = cycle("--store", str(store), *args)
        assert r.exit_code == 0, r.output
        return r.output.replace(shown_target(store), "STORE")

    run_id = filled.run_id
    for args in (("history", "support-reply"), ("history", "support-reply", "--labels"),
                 ("history", "support-reply", "--json"), ("runs", "--json"), ("runs",),
                 ("cycles", "--json"), ("runs", "show", run_id, "--json"),
                 ("judge", "agreement", run_id, "--json"), ("prompt", "list", "--all")):
        first = said(filled.store, *args)
        assert said(url, *args) == first, args
        assert said(back, *args) == first, args


def test_the_command_shows_each_table_and_says_it_verified(filled, tmp_path):
    r = cycle("store", "copy", str(filled.store), str(tmp_path / "copy.db"))
    assert r.exit_code == 0, r.output
    expected = contents(filled.store)
    lines = r.output.splitlines()
    assert lines[0] == f"{filled.store} -> {tmp_path / 'copy.db'}"
    assert lines[1].split() == ["table", "rows", "sha256"]
    shown = {cells[0]: (int(cells[1]), cells[2]) for cells in map(str.split, lines[2:-1])}
    assert shown == {t: (n, sha[:12]) for t, (n, sha) in expected.items()}
    rows = sum(n for n, _ in expected.values())
    assert lines[-1].startswith(f"copied {rows} rows in {len(expected)} tables, verified (")


def test_new_work_on_a_copy_in_postgresql_takes_the_next_numbers_and_ids(filled, postgres):
    """The copied ids were written as they were: every sequence moved past them, so a new
    version, label move, run, result, verdict and call insert without a collision, and
    the new run is the newest."""
    url = postgres.schema_url()
    copy(filled.store, url)
    keys = {"results": "id", "verdicts": "id", "calls": "id", "label_moves": "id",
            "runs": "rowid", "versions": "rowid", "labels": "rowid"}

    def highest() -> dict[str, int]:
        with Store.open(url) as store:
            return {t: store.db.execute(f"SELECT max({k}) FROM {t}").fetchone()[0]
                    for t, k in keys.items()}

    before = highest()
    with Store.open(url) as store:
        latest = store.history("support-reply", limit=1)[0]
        head = store.resolve("support-reply@head")
        v = store.save_version(head.prompt.model_copy(update={"system": "After the copy."}),
                               message="written after the copy")
        assert (v.version, v.seq) == (bump(latest.version), latest.seq + 1)
        store.set_label("support-reply", "staging", v.version)
    r = cycle("--store", url, "run", str(filled.config), "-n", "1", "--no-reports", "-q")
    assert r.exit_code in (0, 1), r.output
    after = highest()
    assert all(after[t] > before[t] for t in keys), (before, after)
    with Store.open(filled.store) as store:
        copied_runs = {run.id for run in store.runs.recent(limit=100)}
    with Store.open(url) as store:
        # the new run (of the prompt file's version) lists first: its rowid is the highest
        assert store.runs.recent(limit=1)[0].id not in copied_runs
        assert store.labels("support-reply")["staging"] == v.version


def test_a_destination_holding_rows_is_refused_and_left_as_it_was(filled, store_target):
    with Store.open(store_target) as store:
        store.save_version(copied_prompt(), message="the destination's own")
    before = contents(store_target)
    r = copy(filled.store, store_target, code=2)
    assert "is not a blank store: it holds 4 rows (label_moves 1, prompts 1, versions 1, labels 1)" in r.output
    assert "never merges two stores" in r.output and "Traceback" not in r.output
    assert contents(store_target) == before
    # nor is a store copied into itself
    r = copy(filled.store, filled.store, code=2)
    assert "are the same store" in r.output


def copied_prompt():
    from cycle.records import Prompt

    return Prompt(id="own", system="Mine.")


def test_a_copy_that_does_not_read_back_as_its_source_is_not_kept(filled, store_target,
                                                                 monkeypatch):
    """A row lost on the way (the reader drops verdicts' last): the command fails naming
    the table and both figures, and the destination is as blank as before."""
    read = copying.source_rows

    def losing(src, table, shape):
        batches = list(read(src, table, shape))
        if table == "verdicts":
            batches[-1] = batches[-1][:-1]
        yield from batches

    monkeypatch.setattr(copying, "source_rows", losing)
    verdicts = contents(filled.store)["verdicts"]
    r = copy(filled.store, store_target, code=2)
    assert "nothing was kept" in r.output
    assert (f"verdicts: {verdicts[0]} rows (sha256 {verdicts[1][:12]}) in the source, "
            f"{verdicts[0] - 1} (sha256 ") in r.output
    assert "Traceback" not in r.output
    assert {rows for rows, _ in contents(store_target).values()} == {0}
    monkeypatch.undo()
    copy(filled.store, store_target)  # the blank destination takes the copy once it is right
    assert contents(store_target) == contents(filled.store)


def test_a_missing_source_is_not_found_and_makes_no_destination(postgres, tmp_path):
    r = copy(tmp_path / "nowhere.db", tmp_path / "new.db", code=2)
    assert "no cycle store at" in r.output and "nowhere.db to copy" in r.output
    assert not (tmp_path / "new.db").exists()
    blank = postgres.schema_url()  # a schema without cycle's tables is no store either
    r = copy(blank, tmp_path / "new.db", code=2)
    assert "no cycle store at postgresql://cycle:***@" in r.output
    assert not (tmp_path / "new.db").exists()


def test_a_table_of_a_later_migration_is_copied_and_a_stranger_is_refused(
        postgres, tmp_path, monkeypatch):
    """Tables are the schema's, not a list: one a later migration adds is copied after the
    table it refers to, with its order kept; a table made by hand refuses the copy."""
    from cycle.store import migrations

    def m999_notes(db) -> None:
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, "
                   "run_id TEXT NOT NULL REFERENCES runs(id), body TEXT)")
        db.execute("CREATE TABLE tags (run_id TEXT NOT NULL REFERENCES runs(id), "
                   "tag TEXT NOT NULL, PRIMARY KEY (run_id, tag))")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, m999_notes])
    src = tmp_path / "src.db"
    with Store.open(src) as store:
        store.db.execute("INSERT INTO runs (id, status) VALUES ('r1', 'finished')")
        store.db.executemany("INSERT INTO notes (id, run_id, body) VALUES (?, 'r1', ?)",
                             [(5, "five"), (2, "two, line\nbreak"), (9, None)])
        store.db.executemany("INSERT INTO tags (run_id, tag) VALUES ('r1', ?)",
                             [("zeta",), ("alpha",)])
    url = postgres.schema_url()
    order = [t["table"] for t in copy(src, url)["tables"]]
    assert order.index("runs") < order.index("notes") and order.index("runs") < order.index("tags")
    with Store.open(url) as store:
        assert store.db.execute("SELECT id, body FROM notes ORDER BY id").fetchall() == [
            (2, "two, line\nbreak"), (5, "five"), (9, None)]
        # the insertion order, not the key's: zeta was written first
        assert [r[0] for r in store.db.execute("SELECT tag FROM tags ORDER BY rowid")] == [
            "zeta", "alpha"]
    assert contents(url) == contents(src)

    with closing(sqlite3.connect(src)) as db:
        db.execute("CREATE TABLE mine (x INTEGER)")
    r = copy(src, tmp_path / "other.db", code=2)
    assert "do not hold the same tables (only in the source: mine;" in r.output


def test_a_row_the_destination_cannot_hold_fails_the_copy_naming_its_table(postgres, tmp_path):
    """SQLite's INTEGER is 8 bytes, PostgreSQL's 4: a pid beyond 2**31 (written by hand)
    fails the copy with the table named, and nothing of the tables before it is kept."""
    src = tmp_path / "src.db"
    with Store.open(src) as store:
        store.save_version(copied_prompt())
        store.db.execute("INSERT INTO locks (name, host, pid, acquired_at) "
                         "VALUES ('run:x', 'here', ?, 'now')", (2**40,))
    url = postgres.schema_url()
    r = copy(src, url, code=2)
    assert "copying table locks from " in r.output and "out of range" in r.output
    assert "Nothing was written to postgresql://cycle:***@" in r.output
    assert "Traceback" not in r.output
    assert {rows for rows, _ in contents(url).values()} == {0}


def test_a_copy_whose_connection_is_lost_keeps_nothing_and_says_copy_again(
        filled, postgres, monkeypatch):
    """The server ends the copy's connection half-way (a restart, pg_terminate_backend):
    one message saying the connection was lost, that nothing was written and to copy
    again (not how to resume a run); the destination holds no row, and the next copy
    makes it whole (found trying to break the team store)."""
    import psycopg

    url = postgres.schema_url()
    tables: list[str] = []
    real = copying._copy_table

    def copy_then_lose(src, dst, table, shape):
        real(src, dst, table, shape)
        tables.append(table)
        if len(tables) == 3:
            pid = dst.db.execute("SELECT pg_backend_pid()").fetchone()[0]
            with psycopg.connect(postgres.url(), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    monkeypatch.setattr(copying, "_copy_table", copy_then_lose)
    r = copy(filled.store, url, code=2)
    assert "error: lost the connection to the store" in r.output, r.output
    assert "Nothing was written" in r.output and "copy again" in r.output
    assert "--resume" not in r.output and "Traceback" not in r.output
    monkeypatch.setattr(copying, "_copy_table", real)
    assert not any(n for n, _ in contents(url).values())
    copy(filled.store, url)
    assert contents(url) == contents(filled.store)
