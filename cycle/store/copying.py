"""A whole store copied into another and verified (``cycle store copy SRC DST``): a person
starts on a local SQLite file and moves the project to the team's PostgreSQL database, or
back, or into a new file.

- DST must be blank: a new file, or an empty schema (``Store.open`` migrates it). A store
  holding any row is refused, never merged into.
- SRC is read in one snapshot (``Store.snapshot``): a process writing to it meanwhile does
  not tear the copy, which is SRC as it was when the copy began.
- The tables are the schema's, not a list of ours: every table but the migration record
  (``Store.open`` wrote the same one on both) and SQLite's own, parents before children
  as their foreign keys say (prompts, versions, labels; runs, results, verdicts). A table
  a later migration adds is copied with the rest; the two stores must hold the same
  tables and columns.
- Rows keep their ids and their insertion order: SQLite's hidden ``rowid``, and the
  ``rowid`` column ``pg_ddl`` gives a PostgreSQL table without an INTEGER PRIMARY KEY, is
  copied like a column (the store's queries sort by it: ``ORDER BY started_at, rowid``).
  On PostgreSQL every SERIAL sequence then moves past the copied ids, so that the next
  version, run or result does not collide with them.
- Rows stream ``BATCH`` at a time (a server cursor on PostgreSQL): a large store is never
  in memory at once.
- The whole copy is one write transaction on DST. It commits only when every table read
  back from DST has SRC's row count and content hash (``digest``); else nothing is kept.
"""

from __future__ import annotations

import graphlib
import hashlib
import sqlite3
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from cycle.errors import StoreConnectionLost, StoreError
from cycle.store.migrations import RECORD_TABLE, applied_names

if TYPE_CHECKING:
    from cycle.store.store import Store

#: rows read, written and hashed at a time
BATCH = 1000

#: a hash as the command shows it
SHOWN_HASH = 12


class TableCopy(Struct, frozen=True):
    """A table as copied: its rows and the sha256 of its content, SRC's and DST's alike."""

    table: str
    rows: int
    sha256: str


class TableShape(Struct, frozen=True):
    """How a table is read on both stores: the column that keeps its insertion order, and
    the columns copied and hashed (that one first, the others by name)."""

    key: str
    columns: tuple[str, ...]


def copy_store(src: Store, dst: Store) -> list[TableCopy]:
    """Copy every row of ``src`` into ``dst``, a blank store at the same migrations, and
    verify it; the tables in the order copied.

    Raises StoreError, with nothing written to ``dst``, when ``dst`` is ``src`` or holds
    rows, when their tables or columns differ, when a row cannot be written, or when a
    table read back from ``dst`` is not ``src``'s.
    """
    if src.where == dst.where or (src.path is not None and dst.path is not None
                                  and src.path.resolve() == dst.path.resolve()):
        raise StoreError(f"{src.where} and {dst.where} are the same store",
                         hint="Copy into another file, or another database or schema.")
    try:
        with src.snapshot(), dst.transaction():
            tables = copied_tables(src, dst)
            _refuse_unless_blank(dst, tables)
            shapes = {table: _shape(src, dst, table) for table in tables}
            for table, shape in shapes.items():
                _copy_table(src, dst, table, shape)
            copied = _verify(src, dst, shapes)
            if dst.dialect.name == "postgresql":
                _advance_sequences(dst, tables)
    except StoreConnectionLost as e:  # the hint of a run's lost connection is not a copy's
        e.hint = (f"Nothing was written to {dst.where} (the copy is one transaction): copy "
                  "again once the server answers.")
        raise
    return copied


def contents(store: Store) -> list[TableCopy]:
    """Every table a copy of ``store`` would write, with its row count and content hash,
    in one snapshot: the figures ``cycle store copy`` verifies, of one store."""
    with store.snapshot():
        return [digest(store, table, _shape(store, store, table))
                for table in copied_tables(store, store)]


def copied_tables(src: Store, dst: Store) -> list[str]:
    """The tables a copy writes, parents before children (each layer by name); StoreError
    when the two stores' tables or migrations differ."""
    mine, theirs = _own_tables(src), _own_tables(dst)
    if mine != theirs:
        raise StoreError(
            f"{src.where} and {dst.where} do not hold the same tables (only in the source: "
            f"{', '.join(sorted(mine - theirs)) or 'none'}; only in the destination: "
            f"{', '.join(sorted(theirs - mine)) or 'none'})",
            hint="A copy takes every table of the source; a table that is not cycle's was "
            "added by hand: move it yourself, or drop it from a copy of the file.")
    if set(applied_names(src.db)) != set(applied_names(dst.db)):
        raise StoreError(f"{src.where} and {dst.where} record different migrations",
                         hint="Open both with this release of cycle, which migrates them.")
    # a foreign key's parent goes first (both databases check each row as it is written);
    # a table's key to itself is left out: its rows come in insertion order, parents first
    graph = {t: (dst.dialect.references(dst.db, t) & mine) - {t} for t in mine}
    sorter = graphlib.TopologicalSorter(graph)
    try:
        sorter.prepare()
    except graphlib.CycleError as e:
        raise StoreError(f"the tables {', '.join(e.args[1])} refer to each other in a circle: "
                         "no order copies them", hint="This is a bug in cycle: please report it.") from e
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        order.extend(ready)
        sorter.done(*ready)
    return order


def _own_tables(store: Store) -> set[str]:
    # the migration record is written by Store.open on both (the same migrations); sqlite_*
    # are SQLite's own (sqlite_sequence, sqlite_stat1), never a store's data
    return {t for t in store.dialect.tables(store.db)
            if t != RECORD_TABLE and not t.startswith("sqlite_")}


def _refuse_unless_blank(dst: Store, tables: list[str]) -> None:
    held = {t: n for t in tables if (n := int(dst.db.execute(
        f"SELECT count(*) FROM {_q(t)}").fetchone()[0]))}
    if held:
        shown = ", ".join(f"{t} {n}" for t, n in held.items())
        raise StoreError(
            f"the destination {dst.where} is not a blank store: it holds {sum(held.values())} "
            f"rows ({shown}); nothing was copied",
            hint="A copy never merges two stores: give a new file, or an empty schema of the "
            "team's database (CREATE SCHEMA NAME, then postgresql://.../DB?options="
            "-csearch_path%3DNAME).")


def _shape(src: Store, dst: Store, table: str) -> TableShape:
    (key, columns), (dst_key, dst_columns) = _side(src, table), _side(dst, table)
    if key != dst_key or set(columns) != set(dst_columns):
        raise StoreError(
            f"table {table} differs between {src.where} (columns {', '.join(columns)}) and "
            f"{dst.where} (columns {', '.join(dst_columns)})",
            hint="Both are at this release's migrations, so one was changed by hand: a copy "
            "would lose what only one has.")
    return TableShape(key, (key, *sorted(set(columns) - {key})))


def _side(store: Store, table: str) -> tuple[str, list[str]]:
    """The column numbering ``table``'s rows in ``store`` and its columns, that one among them."""
    dialect = store.dialect
    columns = dialect.columns(store.db, table)
    key = dialect.integer_key(store.db, table)
    if key is not None:
        return key, columns
    if dialect.name == "sqlite":
        return "rowid", ["rowid", *columns]  # hidden, but named and written like a column
    if "rowid" not in columns:
        raise StoreError(f"table {table} of {store.where} has neither an integer key nor a "
                         "rowid column: its order cannot be kept",
                         hint="Its tables are made by cycle's migrations, which give each one; "
                         "this one was made by hand.")
    return "rowid", columns


def _q(name: str) -> str:
    """An identifier quoted for both databases (``key`` is a column's name)."""
    return '"' + name.replace('"', '""') + '"'


def _select(table: str, shape: TableShape) -> str:
    return (f"SELECT {', '.join(map(_q, shape.columns))} FROM {_q(table)} "
            f"ORDER BY {_q(shape.key)}")


def source_rows(src: Store, table: str, shape: TableShape) -> Iterator[list[tuple[Any, ...]]]:
    """``table``'s rows in ``src`` in insertion order, ``BATCH`` at a time: what is copied."""
    return src.dialect.batches(src.db, _select(table, shape), BATCH)


def _copy_table(src: Store, dst: Store, table: str, shape: TableShape) -> None:
    insert = (f"INSERT INTO {_q(table)} ({', '.join(map(_q, shape.columns))}) "
              f"VALUES ({', '.join('?' * len(shape.columns))})")
    try:
        for rows in source_rows(src, table, shape):
            dst.db.executemany(insert, rows)
    except sqlite3.Error as e:
        raise StoreError(
            f"copying table {table} from {src.where} to {dst.where} failed: {e}",
            hint=f"Nothing was written to {dst.where} (the copy is one transaction).") from e


def digest(store: Store, table: str, shape: TableShape) -> TableCopy:
    """``table``'s row count and the sha256 of its rows in insertion order, as read from
    ``store`` now (a copy's destination is read back, not trusted)."""
    sha = hashlib.sha256()
    count = 0
    for rows in store.dialect.batches(store.db, _select(table, shape), BATCH):
        # both drivers give the store's types (INTEGER, REAL / DOUBLE PRECISION, TEXT) as
        # int, float, str or None, and a tuple's repr is one text for both: an int's
        # digits, a float's shortest exact repr, text quoted with its newlines escaped
        # (so a row is one line), NULL as None
        sha.update("".join(repr(tuple(row)) + "\n" for row in rows).encode())
        count += len(rows)
    return TableCopy(table, count, sha.hexdigest())


def _verify(src: Store, dst: Store, shapes: dict[str, TableShape]) -> list[TableCopy]:
    copied: list[TableCopy] = []
    wrong: list[str] = []
    for table, shape in shapes.items():
        mine, theirs = digest(src, table, shape), digest(dst, table, shape)
        if mine != theirs:
            wrong.append(f"{table}: {mine.rows} rows (sha256 {mine.sha256[:SHOWN_HASH]}) in "
                         f"the source, {theirs.rows} (sha256 {theirs.sha256[:SHOWN_HASH]}) "
                         "read back from the destination")
        copied.append(mine)
    if wrong:
        raise StoreError(
            f"the copy in {dst.where} is not {src.where}'s content, so nothing was kept: "
            + "; ".join(wrong),
            hint=f"{dst.where} is as blank as before. A value one database holds otherwise "
            "than the other, or a bug in cycle: please report it, with the table named.")
    return copied


def _advance_sequences(dst: Store, tables: list[str]) -> None:
    # the copied ids were written explicitly, which moves no sequence: without this the
    # next insert would take id 1 again and collide with a copied row
    serial = dst.db.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema "
        "= current_schema() AND column_default LIKE 'nextval(%'").fetchall()
    for table, column in serial:
        if table in tables:
            dst.db.execute(
                f"SELECT setval(pg_get_serial_sequence(?, ?), coalesce(max({_q(column)}), 0) "
                f"+ 1, false) FROM {_q(table)}", (table, column))
