"""PostgreSQL as the store's second backend: a team's shared store.

``Store.open("postgresql://...")`` opens the same store on a PostgreSQL database. The
store's SQL is written once, in the dialect both databases share; this module makes a
psycopg connection look like the sqlite3 connection the store is written against:

- ``execute`` / ``executemany`` take sqlite3's ``?`` placeholders (rewritten to
  psycopg's ``%s`` once per statement text) and return a cursor of plain tuples;
- errors come out as sqlite3's exception classes (IntegrityError for a broken
  constraint, OperationalError for the rest), so the store's error handling (a busy
  store, a write that failed and was rolled back) is one code for both, and every
  message has the connection string's password masked;
- ``in_transaction`` as sqlite3 says it.

What differs is said where it differs (``Dialect``): the write transaction, the table
list, JSON in SQL, and the schema's types (``pg_ddl``, applied to the one definition of
the migrations in cycle/store/migrations.py).

A write transaction serialises on a transaction-level advisory lock of the store's
schema, as SQLite's ``BEGIN IMMEDIATE`` serialises on the file: a writer that reads and
then writes (the next version number, a label move) does it alone, so no two writers
on any number of machines hand out the same version or lose a move. Readers never wait.
The lock waits at most ``BUSY_TIMEOUT`` seconds (``lock_timeout``), then the store says
it is busy, as on SQLite.

psycopg is an optional dependency (``pip install 'cycle[postgres]'``): a SQLite store
never imports it.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any

from cycle.errors import StoreConnectionLost, StoreError

SCHEMES = ("postgresql://", "postgres://")

#: the key of the advisory lock a write transaction takes (per schema: two stores in one
#: database, e.g. one schema per project, do not wait for each other)
_WRITE_LOCK = "SELECT pg_advisory_xact_lock(hashtext('cycle:' || current_schema()))"


def is_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL store (a ``postgresql://`` URL) rather than a file."""
    return isinstance(target, str) and target.startswith(SCHEMES)


_PASSWORD_PARAM = re.compile(r"(?i)(password=)[^&\s]*")

#: why a URL in a shared file may not hold its password
SHARED_PASSWORD = ("the URL holds a password, and cycle.yaml is shared with the project: give it "
                   "through PGPASSWORD or ~/.pgpass, or put the whole URL in CYCLE_STORE")


def has_password(url: str) -> bool:
    span = _userinfo(url)
    return bool(span and span[1] > span[0]) or bool(_PASSWORD_PARAM.search(url))


def _authority_end(url: str) -> int:
    """Where a URL's user[:password] ends (the index of its ``@``), or -1. A password typed
    without percent-encoding may hold ``@``, ``/``, ``:`` or ``?``: the user's part runs to
    the last ``@`` before the query; an ``@`` only in the query (an application_name of
    ``me@host``) ends no user's part."""
    start = url.find("://") + 3
    first_at = url.find("@", start)
    if start < 3 or first_at < 0:
        return -1
    first_q = url.find("?", start)
    if first_q < 0:
        return url.rfind("@")
    if first_at < first_q:
        return url.rfind("@", 0, first_q)
    # a ? before any @: the query's (after the path's /) or the password's own
    if "/" in url[start:first_q]:
        return -1
    query = url.find("?", first_at)
    return url.rfind("@", 0, query) if query >= 0 else url.rfind("@")


def _userinfo(url: str) -> tuple[int, int] | None:
    """The span of the password in ``url``'s authority (as typed), if it has one."""
    start = url.find("://")
    end = _authority_end(url)
    if end < 0:
        return None
    colon = url.find(":", start + 3, end)
    return (colon + 1, end) if colon >= 0 else None


def masked(url: str) -> str:
    """``url`` with its password (in the authority or as a ``password=`` parameter) shown
    as ``***``: what messages, reports and logs may show of a connection string. A password
    with ``@``, ``/`` or ``:`` not percent-encoded is masked whole too."""
    span = _userinfo(url)
    if span is not None:
        url = url[:span[0]] + "***" + url[span[1]:]
    return _PASSWORD_PARAM.sub(r"\1***", url)


def secrets_of(url: str) -> list[str]:
    """The password(s) ``url`` holds, as typed and percent-decoded: what no message may
    quote (libpq's complaint about a URL quotes the part it could not read)."""
    from urllib.parse import unquote

    found: list[str] = []
    span = _userinfo(url)
    if span is not None and span[1] > span[0]:
        found.append(url[span[0]:span[1]])
    found += [m.group(0)[len("password="):] for m in re.finditer(r"(?i)password=[^&\s]*", url)]
    found += [unquote(f) for f in found]
    return [f for f in dict.fromkeys(found) if f]


def _scrubbed(text: str, secrets: Sequence[str]) -> str:
    """``text`` with each of ``secrets``, and any quoted token holding a piece of one (libpq
    quotes a URL's unreadable part, which may begin or end inside the password), masked."""
    from difflib import SequenceMatcher

    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")

    def quoted(m: re.Match[str]) -> str:
        token = m.group(2)
        for secret in secrets:
            match = SequenceMatcher(None, token, secret, autojunk=False).find_longest_match()
            if match.size >= min(4, len(secret)):
                return f"{m.group(1)}***{m.group(1)}"
        return m.group(0)

    return re.sub(r"([\"'])([^\"']*)\1", quoted, text) if secrets else text


@lru_cache(maxsize=512)
def pg_sql(sql: str) -> str:
    """sqlite3's ``?`` placeholders as psycopg's ``%s`` (outside quoted text), and every
    ``%`` doubled (psycopg reads ``%`` as the start of a placeholder)."""
    out: list[str] = []
    quote = ""
    for ch in sql:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            out.append("%s")
            continue
        if ch == "%":
            out.append("%%")
            continue
        out.append(ch)
    return "".join(out)


_INTEGER_KEY = re.compile(r"\bINTEGER PRIMARY KEY\b", re.IGNORECASE)
_REAL = re.compile(r"\bREAL\b", re.IGNORECASE)
_CREATE_TABLE = re.compile(r"^\s*CREATE TABLE (IF NOT EXISTS )?(\w+) \(", re.IGNORECASE)


def pg_ddl(sql: str) -> str:
    """A migration statement, written for SQLite, as PostgreSQL takes it.

    ``INTEGER PRIMARY KEY`` (SQLite's alias of the row id, numbered on insert) becomes
    ``SERIAL PRIMARY KEY``; ``REAL`` (SQLite's 8-byte float) ``DOUBLE PRECISION``; a table
    without such a key gets a ``rowid SERIAL`` column, the insertion order SQLite keeps
    for every table and the store's queries sort by (``ORDER BY started_at, rowid``).
    """
    sql = _REAL.sub("DOUBLE PRECISION", sql)
    if _CREATE_TABLE.match(sql):
        if _INTEGER_KEY.search(sql):
            sql = _INTEGER_KEY.sub("SERIAL PRIMARY KEY", sql)
        else:
            sql = _CREATE_TABLE.sub(lambda m: m.group(0) + "rowid SERIAL, ", sql, count=1)
    return sql


#: what to do when the connection to the store is lost mid-command
LOST_HINT = ("Check the server is up and reachable, then run the command again: what was "
             "stored before is kept, and a run or cycle resumes from it (cycle run CONFIG "
             "--resume RUN_ID, cycle improve CONFIG --resume), paying nothing the journal kept.")


def _as_sqlite_error(error: Exception, conn: PgConnection | None = None) -> Exception:
    """A psycopg error as the sqlite3 error the store handles: IntegrityError for a broken
    constraint, OperationalError for the rest; the password masked in its message. A
    connection that is gone (the server restarted, the backend terminated, the network
    down) is no error of a statement: StoreError, said once, with how to go on."""
    import psycopg

    if conn is not None and conn._conn.closed:
        return StoreConnectionLost(
            f"lost the connection to the store {conn.where}: {_said(error)}", hint=LOST_HINT)
    if isinstance(error, psycopg.errors.QueryCanceled) and conn is not None:
        # statement_timeout, set on the user or the database by its administrator: not
        # the store's content (a store "is not a cycle store") nor a bug of cycle's
        return StoreError(
            f"the store {conn.where} cancelled a statement: {_said(error)}",
            hint="The database's statement_timeout (set on its user or database) is shorter "
            "than cycle's statement took: raise it for cycle's user (ALTER ROLE USER SET "
            "statement_timeout = '5min'), then run again; a run or cycle resumes with --resume.")
    if isinstance(error, psycopg.errors.IntegrityError):
        return sqlite3.IntegrityError(_said(error))
    return sqlite3.OperationalError(_said(error))


def _said(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return _PASSWORD_PARAM.sub(r"\1***", text)


@lru_cache(maxsize=1)
def _bool_as_int() -> type:
    """psycopg's dumper of a bool for the store: SQLite stores a bool as 0/1 in an INTEGER
    column, and a PostgreSQL boolean would not fit one; so 0 or 1, an int2, as psycopg
    sends those ints."""
    import psycopg
    from psycopg.adapt import Dumper

    class BoolAsInt(Dumper):
        oid = psycopg.adapters.types["int2"].oid

        def dump(self, obj: bool) -> bytes:
            return b"1" if obj else b"0"

    return BoolAsInt


# The error handling below is a try/except in each method rather than one context
# manager: a run executes tens of thousands of statements, and entering a generator-based
# context manager cost each one several microseconds (benchmarks/RESULTS.md, team store).


class PgCursor:
    """A psycopg cursor as the store reads sqlite3's: rows are tuples."""

    def __init__(self, cursor: Any, conn: PgConnection) -> None:
        self._cursor = cursor
        self._conn = conn

    def __del__(self) -> None:
        # no one can read this cursor any more: the next statement may reuse it
        self._conn._release(self._cursor)

    def fetchone(self) -> tuple[Any, ...] | None:
        try:
            return self._cursor.fetchone()  # type: ignore[no-any-return]
        except self._conn.errors as e:
            raise _as_sqlite_error(e, self._conn) from None

    def fetchall(self) -> list[tuple[Any, ...]]:
        try:
            return self._cursor.fetchall()  # type: ignore[no-any-return]
        except self._conn.errors as e:
            raise _as_sqlite_error(e, self._conn) from None

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        try:
            yield from self._cursor
        except self._conn.errors as e:
            raise _as_sqlite_error(e, self._conn) from None

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)


#: cursors a connection keeps for reuse
_SPARES = 2


class PgConnection:
    """A psycopg connection in autocommit mode (a statement outside a transaction commits
    alone, as the store's sqlite3 connection does), with sqlite3's interface."""

    dialect = "postgresql"

    def __init__(self, conn: Any, where: str) -> None:
        import psycopg
        from psycopg.pq import TransactionStatus

        self._conn = conn
        #: the URL with its password masked
        self.where = where
        #: what the methods turn into sqlite3's errors: psycopg's
        self.errors = psycopg.Error
        self._idle = TransactionStatus.IDLE
        conn.adapters.register_dumper(bool, _bool_as_int())
        #: cursors no one reads any more, for the next statements: a fresh psycopg cursor
        #: looks up its types' adapters again, a quarter of a short statement's CPU. A list
        #: (pop and append are atomic) as threads may share the connection (a TUI worker)
        self._spares: list[Any] = []

    def _cursor(self) -> Any:
        try:
            return self._spares.pop()
        except IndexError:
            return self._conn.cursor()

    def _release(self, cursor: Any) -> None:
        if len(self._spares) < _SPARES:
            self._spares.append(cursor)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> PgCursor:
        try:
            # a closed connection refuses a new cursor: inside the try, said as the rest
            cursor = self._cursor()
            # psycopg reads placeholders (and so a doubled %) only when given parameters
            cursor.execute(pg_sql(sql) if params else sql, params or None)
        except self.errors as e:
            raise _as_sqlite_error(e, self) from None
        return PgCursor(cursor, self)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            cursor = self._cursor()
            cursor.executemany(pg_sql(sql), rows)
        except self.errors as e:
            raise _as_sqlite_error(e, self) from None
        self._release(cursor)

    @property
    def in_transaction(self) -> bool:
        # a lost connection holds no transaction any more: nothing to roll back
        return bool(not self._conn.closed
                    and self._conn.pgconn.transaction_status != self._idle)

    def close(self) -> None:
        self._conn.close()


def connect(url: str, *, busy_timeout: float) -> PgConnection:
    """Connect to the PostgreSQL store at ``url``; StoreError (password masked) when the
    driver is missing or the server cannot be reached."""
    where = masked(url)
    try:
        import psycopg
        from psycopg.types.numeric import FloatLoader
    except ImportError:
        raise StoreError(
            f"the store {where} is on PostgreSQL, and its driver is not installed",
            hint="Install it: pip install 'cycle[postgres]' (psycopg 3).") from None
    try:
        # the URL's own options (a search_path: one schema per store) keep theirs
        given = psycopg.conninfo.conninfo_to_dict(url).get("options") or ""
        conn = psycopg.connect(
            url, autocommit=True, connect_timeout=10, application_name="cycle",
            options=f"{given} -c lock_timeout={int(busy_timeout * 1000)}".strip())
    except psycopg.Error as e:
        raise StoreError(
            f"cannot open the store {where}: {_scrubbed(_said(e), secrets_of(url))}",
            hint="Check the server is running and the URL (host, port, database, user); "
            "the password comes from the URL, PGPASSWORD or ~/.pgpass (in the URL, write its @ : / %"
            " ? and spaces as %40 %3A %2F %25 %3F %20).") from None
    _refuse_dropped_schema(conn, given, where)
    # avg() of integers is numeric in PostgreSQL: the store's readers do float arithmetic
    conn.adapters.register_loader("numeric", FloatLoader)
    return PgConnection(conn, where)


_SEARCH_PATH = re.compile(r"search_path\s*=\s*(\S+)")


def _refuse_dropped_schema(conn: Any, options: str, where: str) -> None:
    """Close ``conn`` and refuse when the server's session does not have the search_path
    the URL's options asked for: a connection pooler (PgBouncer with
    ``ignore_startup_parameters = options``) drops them, and the store would be written
    into another schema (public) without a word."""
    asked = _SEARCH_PATH.search(options.replace("\\ ", " "))
    if asked is None:
        return
    row = conn.execute("SELECT current_setting('search_path')").fetchone()
    have = row[0] if row else ""

    def norm(path: str) -> str:
        return path.replace(" ", "").replace('"', "")

    if norm(have) != norm(asked.group(1)):
        conn.close()
        raise StoreError(
            f"cannot open the store {where}: the server's session has search_path {have!r}, "
            f"not the URL's {asked.group(1)!r}: something between cycle and PostgreSQL (a "
            "pooler such as PgBouncer) dropped the URL's options, and the store would go to "
            "another schema",
            hint="Connect to PostgreSQL itself, or give cycle's user its schema (ALTER ROLE "
            "USER SET search_path = NAME) and leave options out of the URL.")


#: names of the server's cursors ``batches`` declares (one connection may hold several)
_CURSORS = itertools.count(1)


class Dialect:
    """What the store says differently to each database (SQLite here; ``PG_DIALECT``)."""

    name = "sqlite"
    #: the statements that open a write transaction
    begin: tuple[str, ...] = ("BEGIN IMMEDIATE",)
    #: the statements that open a read transaction seeing one moment of the store (in WAL
    #: mode SQLite keeps the snapshot of the first read until the transaction ends)
    snapshot: tuple[str, ...] = ("BEGIN",)

    def tables(self, db: Any) -> set[str]:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def columns(self, db: Any, table: str) -> list[str]:
        """``table``'s columns in their order (on SQLite without the hidden ``rowid``)."""
        return [row[0] for row in db.execute("SELECT name FROM pragma_table_info(?) ORDER BY cid",
                                             (table,))]

    def integer_key(self, db: Any, table: str) -> str | None:
        """The column that is ``table``'s ``INTEGER PRIMARY KEY`` (SQLite's row id, a
        ``SERIAL`` on PostgreSQL), if it has one."""
        keys = db.execute("SELECT name, type FROM pragma_table_info(?) WHERE pk > 0",
                          (table,)).fetchall()
        return keys[0][0] if len(keys) == 1 and keys[0][1].upper() == "INTEGER" else None

    def references(self, db: Any, table: str) -> set[str]:
        """The tables ``table``'s foreign keys point at."""
        return {row[0] for row in db.execute(
            'SELECT DISTINCT "table" FROM pragma_foreign_key_list(?)', (table,))}

    def batches(self, db: Any, sql: str, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of the query ``sql`` (no parameters), ``size`` at a time: never all of
        them in memory at once."""
        cursor = db.execute(sql)
        while rows := cursor.fetchmany(size):
            yield rows

    def count_json_items(self, column: str, key: str, value: str) -> str:
        """SQL counting the items of ``column``'s JSON array whose ``key`` is ``value``
        (literals of our own, never a user's text)."""
        return (f"(SELECT count(*) FROM json_each({column}) "
                f"WHERE json_extract(value, '$.{key}') = '{value}')")


class _PgDialect(Dialect):
    name = "postgresql"
    # one statement, one round trip: a run opens thousands of write transactions, and a
    # second round trip for the lock cost each ~30 us of the client's CPU (benchmarks/RESULTS.md)
    begin = (f"BEGIN; {_WRITE_LOCK}",)
    snapshot = ("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",)

    def tables(self, db: Any) -> set[str]:
        return {row[0] for row in db.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'")}

    def columns(self, db: Any, table: str) -> list[str]:
        # pg_ddl's rowid is a column here like any other
        return [row[0] for row in db.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = "
            "current_schema() AND table_name = ? ORDER BY ordinal_position", (table,))]

    def integer_key(self, db: Any, table: str) -> str | None:
        keys = db.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_index i "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = ?::regclass AND i.indisprimary", (table,)).fetchall()
        return keys[0][0] if len(keys) == 1 and keys[0][1] in ("integer", "bigint") else None

    def references(self, db: Any, table: str) -> set[str]:
        return {row[0] for row in db.execute(
            "SELECT DISTINCT r.relname FROM pg_constraint c JOIN pg_class r ON r.oid = c.confrelid "
            "WHERE c.contype = 'f' AND c.conrelid = ?::regclass", (table,))}

    def batches(self, db: Any, sql: str, size: int) -> Iterator[list[tuple[Any, ...]]]:
        # psycopg's own cursor fetches a whole result at once: a cursor of the server's
        # (inside the caller's transaction) hands it over a batch at a time
        name = f"cycle_rows_{next(_CURSORS)}"
        db.execute(f"DECLARE {name} NO SCROLL CURSOR FOR {sql}")
        while rows := db.execute(f"FETCH {int(size)} FROM {name}").fetchall():
            yield rows
        db.execute(f"CLOSE {name}")  # on an error the transaction's end closes it

    def count_json_items(self, column: str, key: str, value: str) -> str:
        return (f"(SELECT count(*) FROM jsonb_array_elements({column}::jsonb) AS item "
                f"WHERE item ->> '{key}' = '{value}')")


SQLITE_DIALECT = Dialect()
PG_DIALECT = _PgDialect()


def dialect_of(db: Any) -> Dialect:
    return PG_DIALECT if getattr(db, "dialect", None) == "postgresql" else SQLITE_DIALECT
