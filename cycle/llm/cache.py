"""A response cache in SQLite, shared safely by processes.

The key is a hash of everything that decides an answer: the provider and
model, the messages, the tools, the generation config (not the timeout) and
the *iteration*, so that running a case five times asks the model five times
instead of replaying one answer, and for an evaluation that must be a fresh
sample (each of a cycle's), that evaluation. Only successful answers are stored; an
error is never cached. Entries expire after ``ttl`` seconds.

The file is its own (default ``.cycle/cache.db``), in WAL mode with a busy
timeout, so that several processes (parallel runs, a TUI beside a headless
run) can read and write it at once.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Self

from cycle.errors import ConfigError
from cycle.llm.base import GenerateConfig, ModelOutput
from cycle.records import Message, ToolDef

#: bump when the key's ingredients or the stored form change
KEY_VERSION = 1
DEFAULT_PATH = Path(".cycle") / "cache.db"
DEFAULT_TTL = 7 * 24 * 3600.0

_SCHEMA = """
create table if not exists responses (
    key text primary key,
    model text not null,
    created_at real not null,
    expires_at real,
    output text not null
);
create index if not exists responses_expires on responses(expires_at);
"""


def cache_key(
    model: str,
    messages: list[Message],
    tools: list[ToolDef],
    config: GenerateConfig,
    iteration: int,
    sample: str | None = None,
) -> str:
    """The cache key of one call (a sha256 of its canonical JSON). ``sample`` names an
    evaluation whose answers must be drawn afresh: the same call in another sample is
    another key (the same sample, resumed, is the same key)."""
    payload: dict[str, Any] = {
        "v": KEY_VERSION,
        "model": model,
        "messages": [m.model_dump(mode="json") for m in messages],
        "tools": [t.model_dump(mode="json") for t in tools],
        # the timeout changes how long we wait, not what the model answers
        "config": config.model_dump(mode="json", exclude={"timeout"}),
        "iteration": iteration,
    }
    if sample is not None:
        payload["sample"] = sample
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """Successful model answers by call key, with a time to live."""

    def __init__(self, path: str | Path = DEFAULT_PATH, *, ttl: float | None = DEFAULT_TTL) -> None:
        self.path = Path(path)
        self.ttl = ttl
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None
        )
        try:
            self._conn.execute("pragma journal_mode=wal")
            self._conn.execute("pragma synchronous=normal")
            self._conn.execute("pragma busy_timeout=30000")
            with self._lock:
                self._conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as e:
            # a damaged file, or one that is not a cache: said here, before any call is
            # paid for, instead of an internal error (nothing in it is worth keeping)
            self._conn.close()
            raise ConfigError(
                f"cannot use the response cache: {e}", file=str(self.path),
                hint="It only saves repeated calls: delete the file, or run with --no-cache "
                "(or set cache.path in cycle.yaml to another file).") from None

    def get(self, key: str) -> ModelOutput | None:
        """The stored answer for ``key``, or None (absent or expired)."""
        with self._lock:
            row = self._conn.execute(
                "select output, expires_at from responses where key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        output, expires_at = row
        if expires_at is not None and expires_at <= time.time():
            return None
        try:
            return ModelOutput.model_validate_json(output)
        except ValueError:
            # written by an incompatible release: treat as a miss, it will be overwritten
            return None

    def put(self, key: str, output: ModelOutput) -> None:
        """Store a successful answer."""
        now = time.time()
        expires = None if self.ttl is None else now + self.ttl
        stored = output.model_copy(update={"cache_hit": False, "latency": 0.0})
        with self._lock:
            self._conn.execute(
                "insert or replace into responses(key, model, created_at, expires_at, output) "
                "values (?, ?, ?, ?, ?)",
                (key, output.model, now, expires, stored.model_dump_json()),
            )

    def take_server(self, endpoint: str) -> str | None:
        """What an earlier release kept here of a compatible server (its ``servers``
        table), taken out: what servers accept lives in the store now (cycle.store.servers),
        which keeps it from here on; the cache keeps no second copy."""
        with self._lock:
            try:
                row = self._conn.execute(
                    "select accepted from servers where endpoint = ?", (endpoint,)).fetchone()
                if row is not None:
                    self._conn.execute("delete from servers where endpoint = ?", (endpoint,))
            except sqlite3.OperationalError:  # no such table: a cache of this release
                return None
        return row[0] if row else None

    def clear(self) -> None:
        """Delete every entry."""
        with self._lock:
            self._conn.execute("delete from responses")

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("select count(*) from responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
