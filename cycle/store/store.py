"""Store: cycle's memory in one SQLite file (through sqlite-utils), or in a team's
PostgreSQL database (``Store.open("postgresql://...")``, cycle/store/postgres.py).

This module opens the file (refusing what is not a cycle store, migrating an
older one), and holds prompt versions and their labels. Runs and cycles are
kept by its two logs, ``store.runs`` (``RunLog``, cycle/store/runs.py) and
``store.cycles`` (``CycleLog``, cycle/store/cycles.py), which write through
``Store.transaction()``.

Concurrency: WAL mode plus a busy timeout, and every writer that reads
before it writes (choosing the next version number, moving a label) does so
inside ``BEGIN IMMEDIATE``, so two processes writing at once serialise
instead of losing a write or handing out the same number twice. On PostgreSQL a
write transaction takes the store's advisory lock for the same effect, across machines.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from cycle.authors import current_author
from cycle.errors import NotFoundError, StoreError, StoreFormatError
from cycle.ids import now_iso
from cycle.prompts import semver
from cycle.prompts.diff import VersionDiff, diff_prompts
from cycle.prompts.template import check_templates
from cycle.records import (
    BUILTIN_PROMPTS,
    HEAD,
    PRODUCTION,
    SOURCES,
    Example,
    LabelMove,
    Prompt,
    PromptSummary,
    Protection,
    ToolDef,
    Version,
)
from cycle.store.batches import StoreBatches
from cycle.store.journal import StoreJournal
from cycle.store.migrations import MIGRATIONS, apply_migrations, check_format
from cycle.store.postgres import dialect_of, is_url
from cycle.store.servers import StoreServers

if TYPE_CHECKING:
    from cycle.store.cycles import CycleLog
    from cycle.store.human_labels import HumanLabels
    from cycle.store.judge_consistency import JudgeConsistency
    from cycle.store.protection import Protections


#: a store's place: a file's path, or a PostgreSQL URL (``postgresql://...``)
StoreTarget = str | Path


def default_path(config_dir: str | Path | None = None) -> StoreTarget:
    """Where the store is when none is named: $CYCLE_STORE (a file or a PostgreSQL URL),
    else .cycle/cycle.db beside the config (or in the current folder)."""
    import os

    if os.environ.get("CYCLE_STORE"):
        return store_target(os.environ["CYCLE_STORE"])
    folder = Path(config_dir or ".")
    return _configured(folder / "cycle.yaml") or folder / ".cycle" / "cycle.db"


def _configured(config: Path) -> StoreTarget | None:
    """The ``store:`` of the project's cycle.yaml, for the commands that do not load it
    (history, runs, labels...); None when it sets none. The config is validated where it
    is loaded: a file that does not parse here is left to say so there."""
    try:
        text = config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if "store:" not in text:  # most projects keep the default: no YAML parse
        return None
    import yaml

    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, OverflowError, RecursionError):
        # (2001-02-30 and !!int x raise ValueError; deep nesting RecursionError)
        return None
    value = data.get("store") if isinstance(data, dict) else None
    if not isinstance(value, str) or not value:
        return None
    if is_url(value):
        from cycle.store.postgres import SHARED_PASSWORD, has_password

        if has_password(value):
            raise StoreError(f"{config}: store: {SHARED_PASSWORD}")
        return value
    return config.parent / value


def store_target(value: str | Path) -> StoreTarget:
    """A store named by a person: a PostgreSQL URL stays text, a path is a path; a URL of
    another kind (mysql://...) is refused, not taken as a file of that name."""
    if is_url(value):
        return value
    scheme = re.match(r"([a-z][a-z0-9+.-]*)://", str(value), re.IGNORECASE)
    if isinstance(value, str) and scheme:
        raise StoreFormatError(
            f"{scheme.group(1)}:// is not a store cycle can open: a store is a SQLite "
            "file's path or a postgresql:// URL",
            hint="Give a file's path (e.g. .cycle/cycle.db) or a postgresql:// URL.")
    return Path(value)


def shown_target(target: StoreTarget) -> str:
    """A store as messages, headers and hints may show it (a URL's password masked)."""
    from cycle.store.postgres import masked

    return masked(str(target)) if is_url(target) else str(target)
from cycle.store.runs import RunLog

#: seconds a writer waits for another process's transaction before giving up
BUSY_TIMEOUT = 30.0

_PROMPT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
_LABEL = re.compile(r"^[A-Za-z][A-Za-z0-9._-]*$")
_HEX = re.compile(r"^[0-9a-f]{4,64}$")

_VERSION_COLUMNS = (
    "prompt_id, seq, version, hash, parent, source, message, created_at, "
    "system, user_template, params, metadata, tools, author, examples, second_parent, rubrics"
)


def _row_to_version(row: sqlite3.Row | tuple[Any, ...]) -> Version:
    (prompt_id, seq, version, hash_, parent, source, message, created_at,
     system, user_template, params, metadata, tools, author, examples, second_parent,
     rubrics) = row
    prompt = Prompt(
        id=prompt_id,
        system=system,
        user_template=user_template,
        params=json.loads(params),
        tools=tuple(ToolDef.model_validate(t) for t in json.loads(tools)) if tools else (),
        examples=tuple(Example.model_validate(e) for e in json.loads(examples)) if examples else (),
        rubrics=json.loads(rubrics) if rubrics else {},
        metadata=json.loads(metadata),
    )
    return Version(
        prompt_id=prompt_id, seq=seq, version=version, hash=hash_, parent=parent,
        second_parent=second_parent, source=source, message=message, created_at=datetime.fromisoformat(created_at),
        author=author, prompt=prompt,
    )


def check_label_name(name: str) -> str:
    """A label is a word (``staging``, ``prod-eu``), never a version number or hash."""
    if not _LABEL.match(name) or semver.is_semver(name):
        raise StoreError(
            f"'{name}' cannot be a label name",
            hint="A label starts with a letter and holds letters, digits, '.', '_' or '-' "
            "(e.g. staging); it cannot look like a version number.",
        )
    return name


def _checked_save(prompt: Prompt, *, bump: str, source: str, version: str | None) -> str | None:
    """Refuse what cannot be saved (a bad id, bump or source, a template that does not
    compile); the version number asked for, normalized, if any."""
    if not _PROMPT_ID.match(prompt.id):
        raise StoreError(
            f"'{prompt.id}' cannot be a prompt id",
            hint="Use letters, digits, '.', '_', '-' or '/', starting with a letter or digit.",
        )
    if bump not in semver.BUMPS:
        raise StoreError(f"unknown bump '{bump}'", hint=f"Use one of: {', '.join(semver.BUMPS)}.")
    if source not in SOURCES:
        raise StoreError(f"unknown source '{source}'", hint=f"Use one of: {', '.join(SOURCES)}.")
    check_templates(prompt)  # a template that does not compile never becomes a version
    if version is None:
        return None
    try:
        return semver.normalize(version)
    except ValueError as e:
        raise StoreError(str(e)) from None


class Store:
    """The store. Open it with ``Store.open(path or URL)``; close it (or use ``with``)."""

    def __init__(self, db: sqlite3.Connection, path: Path | None, *, where: str | None = None
                 ) -> None:
        #: sqlite3's connection, or a PostgreSQL one with its interface
        self.db = db
        #: the store's file (None on PostgreSQL)
        self.path = path
        #: the store as messages name it (a PostgreSQL URL without its password)
        self.where = where or str(path)
        self.dialect = dialect_of(db)
        #: what ``reopen`` connects to again (the URL's password included)
        self._target: StoreTarget | None = None if path is None else path.absolute()
        # the TUI's threads read through connections of their own (``reopen``); a
        # connection shared by threads anyway has its writers take turns
        self._lock = threading.RLock()
        #: runs, their results, verdicts and model calls
        self.runs = RunLog(self)
        #: every paid model call, kept the moment it arrives (see cycle.llm.journal)
        self.journal = StoreJournal(self)
        #: provider batch jobs and their calls (see cycle.llm.batch)
        self.batches = StoreBatches(self)
        #: what OpenAI-compatible servers were found to accept (see cycle.llm.compat)
        self.servers = StoreServers(self)

    @cached_property
    def cycles(self) -> CycleLog:
        """Cycles, rounds and suggestions (loaded when first used: a run does not)."""
        from cycle.store.cycles import CycleLog

        return CycleLog(self)

    @cached_property
    def judge_consistency(self) -> JudgeConsistency:
        """What cycle judge consistency measured of judges (loaded when first used)."""
        from cycle.store.judge_consistency import JudgeConsistency

        return JudgeConsistency(self)

    @cached_property
    def human_labels(self) -> HumanLabels:
        """People's labels of stored outputs (loaded when first used)."""
        from cycle.store.human_labels import HumanLabels

        return HumanLabels(self)

    @cached_property
    def protections(self) -> Protections:
        """Protected labels: who may move them (cycle.store.protection)."""
        from cycle.store.protection import Protections

        return Protections(self)

    # -- opening -----------------------------------------------------------

    @classmethod
    def open(cls, path: StoreTarget, *, create: bool = True) -> Store:
        """Open (creating directories and file if ``create``) and migrate the store at ``path``
        (a file, or a ``postgresql://`` URL).

        Raises StoreFormatError, changing nothing, if the file is not a cycle
        store or was written by a newer release; NotFoundError if it does not
        exist and ``create`` is false.
        """
        if is_url(path):
            return cls._open_postgres(str(path), create=create)
        p = Path(store_target(path))
        if p.is_dir():
            raise StoreFormatError(f"{p} is a directory, not a cycle store",
                                   hint="Give the path of the store file, e.g. .cycle/cycle.db.")
        if not p.exists():
            if not create:
                # most often the command ran outside the project's folder
                raise NotFoundError(
                    f"no cycle store at {p} (from {Path.cwd()})",
                    hint="Run it in your project's folder (where cycle.yaml and .cycle/ "
                    "are), or point --store / CYCLE_STORE at its store; a new project "
                    "makes one with cycle prompt import FILE or cycle run.",
                )
            p.parent.mkdir(parents=True, exist_ok=True)
        # autocommit (isolation_level None): a statement outside transaction() commits
        # alone; transaction() says BEGIN IMMEDIATE itself
        conn = sqlite3.connect(str(p), timeout=BUSY_TIMEOUT, check_same_thread=False,
                               isolation_level=None)
        with _opening(conn, str(p)):
            pending = check_format(conn, str(p))  # reads only: a refused file stays as it was
            # WAL: readers never block the writer; NORMAL is durable across crashes of
            # the process (only a power cut may lose the last commits)
            _enable_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            store = cls(conn, p)
            if pending:
                store._migrate()
        return store

    @classmethod
    def _open_postgres(cls, url: str, *, create: bool) -> Store:
        from cycle.store.postgres import connect

        conn = connect(url, busy_timeout=BUSY_TIMEOUT)
        store = cls(conn, None, where=conn.where)  # type: ignore[arg-type]
        store._target = url
        with _opening(conn, conn.where):
            if conn.execute("SELECT current_schema()").fetchone()[0] is None:
                path = conn.execute("SHOW search_path").fetchone()[0]
                raise StoreError(
                    f"the store {conn.where} names no schema that exists (search_path {path})",
                    hint="Create it first (CREATE SCHEMA name), or fix its name in the URL's "
                    "options=-csearch_path%3Dname.")
            pending = check_format(conn, conn.where)  # reads only
            if pending and not create and len(pending) == len(MIGRATIONS):
                raise NotFoundError(
                    f"no cycle store at {conn.where} (the database holds no cycle tables)",
                    hint="A new project makes one with cycle prompt import FILE or cycle run "
                    "--store URL; or point --store / CYCLE_STORE at the team's store.")
            if pending:
                store._migrate()
        return store

    @classmethod
    def open_existing(cls, path: StoreTarget) -> Store | None:
        """The store at ``path``, or None when there is none yet (no file; a database
        without cycle's tables): for what reads a store when there is one."""
        try:
            return cls.open(path, create=False)
        except NotFoundError:
            return None

    def _migrate(self) -> None:
        # re-check under the write lock: another process may have migrated meanwhile
        with self.transaction() as db:
            if check_format(db, self.where):
                apply_migrations(db)

    def reopen(self) -> Store:
        """Another connection to this store, for a thread to read through (close it there,
        or use ``with``). A connection is never to be shared with a thread that outlives
        its owner's use of it: SQLite's, closed by one thread while another is inside one
        of its statements, crashes the process (a TUI worker still reading when the app
        quits and its store is closed: cycle.tui.reading)."""
        if self._target is None:
            raise StoreError(f"the store {self.where} cannot be opened again",
                             hint="Open it with Store.open(path or URL).")
        return Store.open(self._target, create=False)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: ``BEGIN IMMEDIATE`` (a savepoint when nested).

        Use it for anything that reads and then writes, so that concurrent
        writers queue on the busy timeout instead of racing. On any error
        everything written inside is rolled back; SQLite errors become
        StoreError.
        """
        with self._lock:
            conn = self.db
            if conn.in_transaction:
                with _savepoint(conn):
                    yield conn
                return
            try:
                for statement in self.dialect.begin:
                    conn.execute(statement)
            except sqlite3.OperationalError as e:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StoreError(
                    f"the store {self.where} is busy: {e}",
                    hint=f"Another process held it for more than {BUSY_TIMEOUT:.0f}s; try again.",
                ) from e
            try:
                yield conn
            except BaseException as e:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(e, sqlite3.Error):
                    raise _write_failed(e) from e
                raise
            else:
                try:
                    conn.execute("COMMIT")
                except sqlite3.Error as e:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise _write_failed(e) from e

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every read inside sees the store as it was at the first one
        (SQLite's WAL snapshot, PostgreSQL's REPEATABLE READ) while other processes write
        on; for a reader of many tables that must agree, such as a copy of the store."""
        with self._lock:
            conn = self.db
            for statement in self.dialect.snapshot:
                conn.execute(statement)
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")  # it wrote nothing: nothing to keep

    def _query(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        return self.db.execute(sql, params).fetchall()

    # -- versions ----------------------------------------------------------

    def save_version(
        self,
        prompt: Prompt,
        *,
        bump: str = "patch",
        source: str = "manual",
        message: str = "",
        parent: str | None = None,
        second_parent: str | None = None,
        move_head: bool = True,
        version: str | None = None,
        author: str | None = None,
        who: str | None = None,
        force: bool = False,
    ) -> Version:
        """Store ``prompt`` as a new version, or return the version that already has its content.

        The number is ``version`` when given and above the prompt's latest
        (a prompt file may name its version), else the latest bumped by
        ``bump``; the first version is 1.0.0 with label ``head`` and source
        ``initial`` (``production`` is never set by saving: a person promotes a version,
        ``cycle promote``). ``parent`` defaults to the
        version ``head`` points at; ``second_parent``: the other version a merge was
        made from. ``move_head`` moves ``head`` to the new
        version. Identical content writes nothing and moves no label.

        ``author`` (default: cycle.authors.current_author()) is recorded with the version;
        ``who``, with the head move (default: the author). A protected ``head``
        (``protect``) that ``who`` may not move refuses the save, unless ``force`` or
        ``move_head`` is false; a new prompt's first version always gets its head.
        """
        wanted = _checked_save(prompt, bump=bump, source=source, version=version)
        author = author or current_author()
        who = who or author
        digest = prompt.content_hash
        with self.transaction() as db:
            existing = self._query(
                f"SELECT {_VERSION_COLUMNS} FROM versions WHERE prompt_id = ? AND hash = ?",
                (prompt.id, digest),
            )
            if existing:
                return _row_to_version(existing[0])
            now = now_iso()
            latest = self._query(
                "SELECT seq, version FROM versions WHERE prompt_id = ? ORDER BY seq DESC LIMIT 1",
                (prompt.id,),
            )
            first = not latest
            forced = False
            if first:
                db.execute("INSERT INTO prompts (id, created_at) VALUES (?, ?)", (prompt.id, now))
                seq, number = 1, wanted or semver.FIRST
                if source == "manual":
                    source = "initial"
                if parent is not None:
                    raise NotFoundError(f"prompt '{prompt.id}' has no version {parent} yet")
            else:
                forced = move_head and self._check_move(prompt.id, HEAD, who, force)
                last_seq, last_version = latest[0]
                seq = last_seq + 1
                if wanted and semver.parse(wanted) > semver.parse(last_version):
                    number = wanted
                else:
                    number = semver.bump(last_version, bump)
                if parent is None:
                    parent = self._label_target(prompt.id, HEAD) or last_version
                else:
                    parent = self._resolve_in(prompt.id, parent).version
                if second_parent is not None:
                    second_parent = self._resolve_in(prompt.id, second_parent).version
            db.execute(
                f"INSERT INTO versions ({_VERSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    prompt.id, seq, number, digest, parent, source, message, now,
                    prompt.system, prompt.user_template,
                    json.dumps(prompt.params, ensure_ascii=False),
                    json.dumps(prompt.metadata, ensure_ascii=False),
                    json.dumps([t.model_dump(exclude_none=True) for t in prompt.tools],
                               ensure_ascii=False) if prompt.tools else None,
                    author,
                    json.dumps([e.canonical() for e in prompt.examples],
                               ensure_ascii=False) if prompt.examples else None,
                    second_parent,
                    json.dumps(prompt.rubrics, ensure_ascii=False) if prompt.rubrics else None,
                ),
            )
            reason = message or f"new version ({source})"
            if first or move_head:
                self._move(prompt.id, HEAD, number, action="save", reason=reason, who=who, now=now,
                           forced=forced)
            row = self._query(
                f"SELECT {_VERSION_COLUMNS} FROM versions WHERE prompt_id = ? AND version = ?",
                (prompt.id, number),
            )
        return _row_to_version(row[0])

    def find_version(self, prompt: Prompt) -> Version | None:
        """The stored version with ``prompt``'s content, if any."""
        rows = self._query(
            f"SELECT {_VERSION_COLUMNS} FROM versions WHERE prompt_id = ? AND hash = ?",
            (prompt.id, prompt.content_hash),
        )
        return _row_to_version(rows[0]) if rows else None

    def resolve(self, ref: str) -> Version:
        """``"id"`` (= ``id@head``), ``"id@1.2.0"``, ``"id@<label>"`` or ``"id@<hash prefix>"``."""
        prompt_id, at, spec = ref.partition("@")
        if at and not spec.strip():  # "id@" is a label left out, not head
            raise NotFoundError(f"'{ref}' names no version after '@'",
                                hint=f"Write {prompt_id}@LABEL, {prompt_id}@1.2.0, or {prompt_id} for head.")
        return self._resolve_in(prompt_id, spec or HEAD)

    def get_version(self, prompt_id: str, version: str) -> Version:
        """A version of ``prompt_id`` by number, label or hash prefix; NotFoundError lists what exists."""
        return self._resolve_in(prompt_id, version)

    def has_prompt(self, prompt_id: str) -> bool:
        """Whether ``prompt_id`` has at least one stored version."""
        return bool(self._query("SELECT 1 FROM prompts WHERE id = ?", (prompt_id,)))

    def _require_prompt(self, prompt_id: str) -> None:
        if self.has_prompt(prompt_id):
            return
        # cycle's own prompts (cycle-judge, cycle-improver) are not the user's to pick from
        known = [r[0] for r in self._query(
            "SELECT id FROM prompts WHERE id NOT LIKE 'cycle-%' ORDER BY id LIMIT 21")]
        if known:
            shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
            hint = f"Known prompts: {shown}."
        else:
            hint = f"The store {self.where} holds no prompt yet: import one with cycle prompt import FILE."
        raise NotFoundError(f"unknown prompt '{prompt_id}'", hint=hint)

    def _resolve_in(self, prompt_id: str, spec: str) -> Version:
        self._require_prompt(prompt_id)
        spec = spec.strip()
        if semver.is_semver(spec):
            rows = self._query(
                f"SELECT {_VERSION_COLUMNS} FROM versions WHERE prompt_id = ? AND version = ?",
                (prompt_id, semver.normalize(spec)),
            )
            if rows:
                return _row_to_version(rows[0])
            raise NotFoundError(f"prompt '{prompt_id}' has no version {spec}", hint=self._known_hint(prompt_id))
        target = self._label_target(prompt_id, spec)
        if target is not None:
            return self._resolve_in(prompt_id, target)
        if _HEX.match(spec):
            rows = self._query(
                f"SELECT {_VERSION_COLUMNS} FROM versions "
                "WHERE prompt_id = ? AND substr(hash, 1, ?) = ? LIMIT 2",
                (prompt_id, len(spec), spec),
            )
            if len(rows) == 1:
                return _row_to_version(rows[0])
            if len(rows) > 1:
                raise NotFoundError(
                    f"hash prefix '{spec}' matches several versions of '{prompt_id}'",
                    hint="Give more characters of the hash, or the version number.",
                )
        raise NotFoundError(
            f"prompt '{prompt_id}' has no version or label '{spec}'", hint=self._known_hint(prompt_id)
        )

    def _known_hint(self, prompt_id: str) -> str:
        labels = self.labels(prompt_id)
        versions = [r[0] for r in self._query(
            "SELECT version FROM versions WHERE prompt_id = ? ORDER BY seq DESC LIMIT 6", (prompt_id,)
        )]
        count = self.count_versions(prompt_id)
        shown = ", ".join(reversed(versions[:5]))
        if count > 5:
            shown = f"... {shown} ({count} in all; see cycle history {prompt_id})"
        label_text = ", ".join(f"{k} -> {v}" for k, v in labels.items())
        return f"Labels: {label_text}. Versions: {shown}."

    def history(self, prompt_id: str, *, limit: int = 50, offset: int = 0) -> list[Version]:
        """Versions of ``prompt_id``, newest first, one page at a time."""
        self._require_prompt(prompt_id)
        rows = self._query(
            f"SELECT {_VERSION_COLUMNS} FROM versions WHERE prompt_id = ? "
            "ORDER BY seq DESC LIMIT ? OFFSET ?",
            (prompt_id, limit, offset),
        )
        return [_row_to_version(r) for r in rows]

    def count_versions(self, prompt_id: str) -> int:
        """How many versions ``prompt_id`` has (0 for an unknown prompt)."""
        # versions are never deleted and seq counts them from 1: the max is the count
        rows = self._query("SELECT max(seq) FROM versions WHERE prompt_id = ?", (prompt_id,))
        return int(rows[0][0] or 0)

    def list_prompts(self, *, builtin: bool = True) -> list[PromptSummary]:
        """Every prompt with its version count, latest version and labels, by id
        (``builtin=False``: without cycle's own prompts, BUILTIN_PROMPTS)."""
        rows = self._query(
            """
            SELECT p.id, l.seq, l.version, l.created_at
            FROM prompts p
            JOIN versions l ON l.prompt_id = p.id
              AND l.seq = (SELECT max(seq) FROM versions m WHERE m.prompt_id = p.id)
            ORDER BY p.id
            """
        )
        labels: dict[str, dict[str, str]] = {}
        for prompt_id, name, version in self._query(
            "SELECT prompt_id, name, version FROM labels ORDER BY prompt_id, name"
        ):
            labels.setdefault(prompt_id, {})[name] = version
        return [
            PromptSummary(
                id=pid, versions=count, latest=latest, labels=_ordered(labels.get(pid, {})),
                updated_at=datetime.fromisoformat(at),
            )
            for pid, count, latest, at in rows if builtin or pid not in BUILTIN_PROMPTS
        ]

    def last_used_prompt(self) -> str | None:
        """The prompt a person worked on last: of the newest run, else the newest version
        (cycle's own prompts aside)."""
        hidden = tuple(BUILTIN_PROMPTS)
        marks = ",".join("?" * len(hidden))
        newest_run = (f"SELECT prompt_id FROM runs WHERE prompt_id NOT IN ({marks}) "
                      "ORDER BY started_at DESC, rowid DESC LIMIT 1")
        newest_version = (f"SELECT prompt_id FROM versions WHERE prompt_id NOT IN ({marks}) "
                          "ORDER BY created_at DESC, rowid DESC LIMIT 1")
        for sql in (newest_run, newest_version):
            row = self._query(sql, hidden)
            if row and row[0][0]:
                return str(row[0][0])
        return None

    # -- labels ------------------------------------------------------------

    def labels(self, prompt_id: str) -> dict[str, str]:
        """Label -> version for ``prompt_id``: head, production, then the user's, by name."""
        rows = self._query("SELECT name, version FROM labels WHERE prompt_id = ?", (prompt_id,))
        return _ordered(dict(rows))

    def _label_target(self, prompt_id: str, label: str) -> str | None:
        rows = self._query(
            "SELECT version FROM labels WHERE prompt_id = ? AND name = ?", (prompt_id, label)
        )
        return rows[0][0] if rows else None

    def _move(
        self, prompt_id: str, label: str, version: str, *, action: str, reason: str, who: str,
        now: str, forced: bool = False,
    ) -> LabelMove | None:
        # callers hold the write transaction
        current = self._label_target(prompt_id, label)
        if current == version:
            return None
        self.db.execute(
            "INSERT INTO labels (prompt_id, name, version, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (prompt_id, name) DO UPDATE SET version = excluded.version, "
            "updated_at = excluded.updated_at",
            (prompt_id, label, version, now),
        )
        (move_id,) = self.db.execute(
            "INSERT INTO label_moves (prompt_id, label, from_version, to_version, action, reason, "
            "who, at, forced) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (prompt_id, label, current, version, action, reason, who, now, int(forced)),
        ).fetchone()
        return LabelMove(
            id=int(move_id), prompt_id=prompt_id, label=label, from_version=current,
            to_version=version, action=action, reason=reason, who=who,
            at=datetime.fromisoformat(now), forced=forced,
        )

    def set_label(
        self, prompt_id: str, label: str, version: str, *, reason: str = "", who: str | None = None,
        force: bool = False,
    ) -> LabelMove | None:
        """Point ``label`` (created if new) at ``version``; the move is recorded with ``who``
        (default: cycle.authors.current_author()).

        Returns the recorded move, or None when the label already pointed there. A
        protected label that ``who`` may not move raises ProtectedLabelError, unless
        ``force`` (the move then records that it was forced).
        """
        check_label_name(label)
        who = who or current_author()
        with self.transaction():
            target = self._resolve_in(prompt_id, version)
            if self._label_target(prompt_id, label) == target.version:
                return None  # no move: a protection has nothing to refuse
            forced = self._check_move(prompt_id, label, who, force)
            return self._move(prompt_id, label, target.version, action="label", reason=reason,
                              who=who, now=now_iso(), forced=forced)

    def rollback(
        self, prompt_id: str, to_version: str, *, label: str = HEAD, reason: str = "",
        who: str | None = None, force: bool = False,
    ) -> Version:
        """Move an existing ``label`` (``head`` by default) back to ``to_version``; recorded
        with ``who`` (default: the current author). A protected label refuses as in
        ``set_label``.

        Nothing is deleted: later versions stay in the history and can be
        labelled again. Returns the version the label now points at.
        """
        who = who or current_author()
        with self.transaction():
            self._require_prompt(prompt_id)
            if self._label_target(prompt_id, label) is None:
                raise NotFoundError(
                    f"prompt '{prompt_id}' has no label '{label}'",
                    hint="Labels: " + ", ".join(self.labels(prompt_id)) + ". "
                    f"Create one with: cycle label {prompt_id} VERSION {label}",
                )
            target = self._resolve_in(prompt_id, to_version)
            if self._label_target(prompt_id, label) != target.version:
                forced = self._check_move(prompt_id, label, who, force)
                self._move(prompt_id, label, target.version, action="rollback",
                           reason=reason or f"rollback to {target.version}", who=who,
                           now=now_iso(), forced=forced)
        return target

    def label_moves(
        self, prompt_id: str, *, label: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[LabelMove]:
        """Recorded label moves of ``prompt_id``, newest first, one page at a time."""
        sql = ("SELECT id, prompt_id, label, from_version, to_version, action, reason, who, at, "
               "forced FROM label_moves WHERE prompt_id = ?")
        params: list[Any] = [prompt_id]
        if label is not None:
            sql += " AND label = ?"
            params.append(label)
        sql += " ORDER BY id DESC LIMIT ? OFFSET ?"
        params.extend((limit, offset))
        keys = ("id", "prompt_id", "label", "from_version", "to_version", "action", "reason", "who",
                "at", "forced")
        return [LabelMove(**dict(zip(keys, row, strict=True)) | {"forced": bool(row[-1])})
                for row in self._query(sql, params)]

    def protection(self, prompt_id: str, label: str) -> Protection | None:
        """The protection that covers ``label`` of ``prompt_id`` (None: not protected)."""
        return self.protections.of(prompt_id, label)

    def _check_move(self, prompt_id: str, label: str, who: str, force: bool) -> bool:
        # callers hold the write transaction: the check and the move see the same state
        return self.protections.check(prompt_id, label, who, force=force)

    def count_label_moves(self, prompt_id: str, *, label: str | None = None) -> int:
        """How many label moves of ``prompt_id`` (of ``label`` only, when given) are recorded."""
        sql = "SELECT count(*) FROM label_moves WHERE prompt_id = ?"
        params: list[Any] = [prompt_id]
        if label is not None:
            sql += " AND label = ?"
            params.append(label)
        return int(self._query(sql, params)[0][0])

    # -- comparing ---------------------------------------------------------

    def diff(self, prompt_id: str, a: str, b: str) -> VersionDiff:
        """Per-field unified diffs from version ``a`` to version ``b`` (numbers, labels or hashes)."""
        va = self._resolve_in(prompt_id, a)
        vb = self._resolve_in(prompt_id, b)
        return diff_prompts(va.prompt, vb.prompt, a=va.version, b=vb.version, prompt_id=prompt_id)

    def latest_scores(self, prompt_id: str) -> dict[str, float]:
        """Version -> score of its latest finished run (the ``score`` of the run's summary JSON)."""
        scores: dict[str, float] = {}
        for version, summary in self._query(
            "SELECT version, summary FROM runs WHERE prompt_id = ? AND status = 'finished' "
            "AND summary IS NOT NULL ORDER BY coalesce(finished_at, started_at), rowid",
            (prompt_id,),
        ):
            try:
                score = json.loads(summary).get("score")
            except (ValueError, AttributeError):
                continue
            if isinstance(score, int | float):
                scores[version] = float(score)
        return scores


@contextmanager
def _opening(conn: Any, where: str) -> Iterator[None]:
    """Close ``conn`` when opening the store fails; a database's error said as the store's."""
    try:
        yield
    except sqlite3.Error as e:
        conn.close()
        raise StoreError(f"cannot open the store {where}: {e}") from e
    except BaseException:
        conn.close()
        raise


@contextmanager
def _savepoint(conn: sqlite3.Connection) -> Iterator[None]:
    """A transaction inside a transaction: undone alone on error, kept with its outer one."""
    conn.execute("SAVEPOINT nested")
    try:
        yield
    except BaseException:
        # an error such as a failed COMMIT may have ended the whole transaction already
        if conn.in_transaction:
            conn.execute("ROLLBACK TO SAVEPOINT nested")
            conn.execute("RELEASE SAVEPOINT nested")
        raise
    conn.execute("RELEASE SAVEPOINT nested")


def _enable_wal(db: sqlite3.Connection) -> None:
    # WAL is a property of the file, set once. Switching needs a moment of exclusive
    # access, and SQLite answers "locked" at once rather than waiting on the busy
    # timeout when another process is opening the same new store: so retry briefly.
    deadline = time.monotonic() + BUSY_TIMEOUT
    delay = 0.005
    while True:
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                return
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def _ordered(labels: dict[str, str]) -> dict[str, str]:
    # head and production first, as people look for them; then the user's labels by name
    first = {k: labels[k] for k in (HEAD, PRODUCTION) if k in labels}
    rest = {k: labels[k] for k in sorted(labels) if k not in first}
    return first | rest


def _write_failed(error: sqlite3.Error) -> StoreError:
    """A write that did not happen; on a full disk, how to go on (nothing is lost: what
    was committed stays, and a run or cycle resumes from it)."""
    full = "full" in str(error).lower()
    return StoreError(
        f"store write failed, nothing was saved: {error}",
        hint="Free some space on the store's disk, then resume: cycle improve cycle.yaml "
        "--resume (a run: cycle run cycle.yaml --resume RUN_ID)." if full else None)
