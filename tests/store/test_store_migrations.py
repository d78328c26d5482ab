"""The schema: a blank store and an old one both end up current; foreign files are refused untouched."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from sqlite_utils import Database

from cycle.errors import StoreFormatError
from cycle.records import Prompt
from cycle.store import Store
from cycle.store.migrations import applied_names, apply_migrations, known_names

TABLES = {"prompts", "versions", "labels", "label_moves", "runs", "results", "verdicts",
          "calls", "suggestions", "cycles", "rounds", "screens"}


def columns(db: Database, table: str) -> set[str]:
    return {c.name for c in db[table].columns}


def index_columns(db: Database, table: str) -> set[tuple[str, ...]]:
    return {tuple(i.columns) for i in db[table].indexes}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_migrations_are_numbered_and_at_least_two():
    names = known_names()
    assert len(names) >= 2
    assert [n[:4] for n in names] == [f"m{i:03d}" for i in range(1, len(names) + 1)]


def test_blank_store_gets_every_table_column_and_index(tmp_path: Path):
    with Store.open(tmp_path / "c.db") as store:
        db = Database(store.db)
        assert TABLES <= set(db.table_names())
        assert applied_names(db.conn) == known_names()
        assert {"id", "prompt_id", "version", "status", "summary", "cycle_id", "round", "role",
                "judge_version", "offline"} <= columns(db, "runs")
        assert {"run_id", "case_id", "iteration", "score", "passed", "tool_calls", "agent_cost",
                "judge_cost", "input_tokens", "output_tokens"} <= columns(db, "results")
        assert {"cached_input_tokens", "cost_estimated", "cache_hit", "attempts"} <= columns(db, "calls")
        assert {"incumbent_version", "candidate_version", "ci_low", "ci_high", "accepted"} <= columns(db, "rounds")
        assert {"target_cases", "decision", "edited_value", "applied"} <= columns(db, "suggestions")
        assert {"who", "forced"} <= columns(db, "label_moves")
        assert "author" in columns(db, "versions")
        assert {"decided_by", "decided_at"} <= columns(db, "suggestions")
        assert {"prompt_id", "label", "allowed", "protected_by", "protected_at"} <= columns(
            db, "protected_labels")
        # a population's candidates as screened, a merge's second parent with them
        assert {"cycle_id", "round", "slot", "version", "parent", "second_parent", "run_id",
                "cases", "gain", "kept"} == columns(db, "screens")
        assert ("prompt_id", "seq") in index_columns(db, "versions")
        assert ("run_id",) in index_columns(db, "results")
        assert ("run_id",) in index_columns(db, "calls")
        assert ("run_id", "case_id", "iteration") in index_columns(db, "results")  # the UNIQUE


def test_a_new_store_is_the_one_sqlite_utils_makes_without_importing_it(tmp_path: Path):
    """A new store is made with plain SQL (importing sqlite_utils cost a first run about
    0.1 s): the same tables, indexes and migration record sqlite_utils.migrations writes,
    so that any release, this one or an older one, reads and migrates it as before."""
    import subprocess
    import sys

    made = subprocess.run(
        [sys.executable, "-c", ("import sys; from cycle.store import Store; "
                                f"Store.open({str(tmp_path / 'new.db')!r}).close(); "
                                "print('sqlite_utils' in sys.modules)")],
        capture_output=True, text=True, check=True)
    assert made.stdout.strip() == "False"
    conn = sqlite3.connect(tmp_path / "by-sqlite-utils.db", isolation_level=None)
    conn.execute("BEGIN")
    apply_migrations(conn, stop_before=None)  # (an option: the sqlite_utils path)
    conn.execute("COMMIT")
    new = sqlite3.connect(tmp_path / "new.db")
    schema = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
    record = "SELECT id, migration_set, name FROM _sqlite_migrations ORDER BY id"
    assert new.execute(schema).fetchall() == conn.execute(schema).fetchall()
    assert new.execute(record).fetchall() == conn.execute(record).fetchall()
    # applied_at as sqlite_utils writes it: '2026-11-27 23:46:40.326374+00:00'
    at = new.execute("SELECT applied_at FROM _sqlite_migrations").fetchone()[0]
    assert at[10] == " " and at.endswith("+00:00")
    new.close()
    conn.close()
    with Store.open(tmp_path / "new.db") as store:  # and it opens as a current store
        assert applied_names(store.db) == known_names()


def test_store_written_by_the_first_release_migrates_itself(tmp_path: Path):
    path = tmp_path / "old.db"
    old = Database(path)
    apply_migrations(old.conn, stop_before="m002_label_moves_who")
    assert applied_names(old.conn) == ["m001_initial"]
    assert "who" not in columns(old, "label_moves")
    # data written by the old release, with the old columns only
    old.execute("INSERT INTO prompts VALUES ('p', '2026-01-01T00:00:00+00:00')")
    old.execute(
        "INSERT INTO versions VALUES ('p', 1, '1.0.0', ?, NULL, 'initial', '', '2026-01-01T00:00:00+00:00', "
        "'s', '{{ input }}', '{}', '{}')", (Prompt(id="p", system="s").content_hash,),
    )
    old.execute("INSERT INTO labels VALUES ('p', 'head', '1.0.0', '2026-01-01T00:00:00+00:00')")
    old.execute("INSERT INTO labels VALUES ('p', 'production', '1.0.0', '2026-01-01T00:00:00+00:00')")
    old.execute("INSERT INTO label_moves (prompt_id, label, from_version, to_version, action, at) "
                "VALUES ('p', 'head', NULL, '1.0.0', 'save', '2026-01-01T00:00:00+00:00')")
    old.conn.commit()
    old.close()

    with Store.open(path) as store:
        db = Database(store.db)
        assert applied_names(db.conn) == known_names()
        assert {"who", "forced"} <= columns(db, "label_moves")
        assert "author" in columns(db, "versions")
        assert {"decided_by", "decided_at"} <= columns(db, "suggestions")
        assert {"prompt_id", "label", "allowed", "protected_by", "protected_at"} <= columns(
            db, "protected_labels")
        assert "second_parent" in columns(db, "screens")
        assert ("prompt_id", "seq") in index_columns(db, "versions")
        assert ("run_id",) in index_columns(db, "results")
        assert store.label_moves("p")[0].who == "user"  # old rows get the default
        assert store.resolve("p@head").prompt.system == "s"
        assert store.save_version(Prompt(id="p", system="t"), who="cycle").version == "1.0.1"
        assert store.label_moves("p")[0].who == "cycle"


def test_text_file_is_refused_and_left_unchanged(tmp_path: Path):
    path = tmp_path / "notes.db"
    path.write_text("these are my notes\n" * 50)
    before = digest(path)
    with pytest.raises(StoreFormatError, match="not a cycle store"):
        Store.open(path)
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_other_sqlite_file_is_refused_and_left_unchanged(tmp_path: Path):
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('Ann')")
    conn.commit()
    conn.close()
    before = digest(path)
    with pytest.raises(StoreFormatError) as e:
        Store.open(path)
    assert "not a cycle store" in str(e.value) and "customers" in str(e.value)
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_store_from_a_newer_release_is_refused_and_left_unchanged(tmp_path: Path):
    path = tmp_path / "new.db"
    Store.open(path).close()
    db = Database(path)
    db["_sqlite_migrations"].insert(
        {"migration_set": "cycle", "name": "m999_from_the_future", "applied_at": "2027-01-01"}
    )
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    before = digest(path)
    with pytest.raises(StoreFormatError) as e:
        Store.open(path)
    assert "newer release" in str(e.value) and "m999_from_the_future" in str(e.value)
    assert digest(path) == before


def test_directory_is_refused(tmp_path: Path):
    with pytest.raises(StoreFormatError, match="directory"):
        Store.open(tmp_path)


def test_a_store_before_tools_and_traces_migrates_and_keeps_its_results(tmp_path: Path):
    """m005 adds tools, traces and state, and widens results.status to 'terminated' in
    place: old rows and the foreign keys pointing at them are untouched."""
    path = tmp_path / "old.db"
    old = Database(path)
    apply_migrations(old.conn, stop_before="m005_tools_and_traces")
    old.execute("INSERT INTO prompts VALUES ('p', '2026-01-01T00:00:00+00:00')")
    old.execute(
        "INSERT INTO versions VALUES ('p', 1, '1.0.0', ?, NULL, 'initial', '', "
        "'2026-01-01T00:00:00+00:00', 's', '{{ input }}', '{}', '{}')",
        (Prompt(id="p", system="s").content_hash,))
    old.execute("INSERT INTO runs (id, status, config, offline) VALUES ('r', 'finished', '{}', 0)")
    old.execute("INSERT INTO results (id, run_id, case_id, iteration, status, score, passed, "
                "input, output) VALUES (1, 'r', 'c', 0, 'passed', 90, 1, '\"hi\"', 'hello')")
    old.execute("INSERT INTO verdicts (result_id, criterion_id, kind, score, passed, weight, "
                "required, reasoning) VALUES (1, 'x', 'check', 90, 1, 1, 0, 'ok')")
    old.conn.commit()
    with pytest.raises(sqlite3.IntegrityError):  # the old constraint
        old.execute("INSERT INTO results (run_id, case_id, iteration, status) "
                    "VALUES ('r', 'c', 1, 'terminated')")
    old.close()

    with Store.open(path) as store:
        assert applied_names(store.db) == known_names()
        [kept] = store.runs.load_results("r")
        assert (kept.output, kept.trace, kept.state, kept.verdicts[0].reasoning) == (
            "hello", (), {}, "ok")
        assert store.get_version("p", "1.0.0").prompt.tools == ()
        with store.transaction() as db:
            db.execute("INSERT INTO results (run_id, case_id, iteration, status) "
                       "VALUES ('r', 'c', 1, 'terminated')")
            with pytest.raises(sqlite3.IntegrityError):
                db.execute("INSERT INTO results (run_id, case_id, iteration, status) "
                           "VALUES ('r', 'c', 2, 'weird')")
        assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert store.db.execute("PRAGMA foreign_key_check").fetchall() == []


def test_the_authors_migration_is_portable_sql():
    """m015 runs on PostgreSQL too: column additions of plain types and a standard table,
    nothing SQLite's own (PRAGMA, INSERT OR REPLACE, rowid, json_ functions)."""
    from cycle.store.migrations import m015_authors

    class Recorder:
        def __init__(self) -> None:
            self.sql: list[str] = []

        def execute(self, sql: str, *args: object) -> None:
            self.sql.append(" ".join(sql.split()))

    db = Recorder()
    m015_authors(db)  # type: ignore[arg-type]
    assert db.sql and all(s.startswith(("ALTER TABLE", "CREATE TABLE", "CREATE INDEX"))
                          for s in db.sql)
    for s in db.sql:
        assert not any(bad in s.upper() for bad in ("PRAGMA", "OR REPLACE", "ROWID", "JSON_"))
        if s.startswith("ALTER TABLE"):
            assert s.split()[-1] in ("TEXT", "INTEGER", "REAL"), s
