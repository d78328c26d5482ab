"""Leases: one process at a time runs a cycle or a run.

Before a cycle or run starts or resumes, its process takes the lease ``cycle:ID`` or
``run:ID`` (a row of ``locks``, taken in one write transaction, so two processes
racing for it cannot both win). A second process finds it held and refuses with
``LockedError``, naming the holder, before it writes anything: the first goes on and
the cycle stays resumable. A lease whose process is gone (killed, crashed: a process
of this machine that no longer exists) is taken over; one held on another machine
cannot be checked, so it is taken over only when asked (``take_over``). The lease is
given back when the process ends its work, however it ends.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cycle.errors import LockedError

if TYPE_CHECKING:
    from cycle.store.store import Store


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, someone else's
    return True


def acquire(store: Store, name: str, *, what: str, resume_hint: str,
            take_over: bool = False) -> None:
    """Take the lease ``name`` for this process, or raise ``LockedError`` naming its
    holder (``what``: "cycle c-1", said in the message; ``resume_hint``: the command that
    resumes it once the holder is done)."""
    host, pid = socket.gethostname(), os.getpid()
    with store.transaction() as db:
        row = db.execute("SELECT host, pid, acquired_at FROM locks WHERE name = ?",
                         (name,)).fetchone()
        if row is not None and (row[0], row[1]) != (host, pid) and not take_over:
            holder_host, holder_pid, since = row
            if holder_host != host:
                raise LockedError(
                    f"{what} is being run by process {holder_pid} on {holder_host} (since "
                    f"{since}); a second process would write the same results beside it",
                    hint=f"Wait for it to end, then: {resume_hint}. If that machine's process "
                    "is gone, take the cycle over: add --take-over.")
            if _alive(holder_pid):
                raise LockedError(
                    f"{what} is being run by process {holder_pid} on this machine (since "
                    f"{since}); a second process would write the same results beside it",
                    hint=f"Wait for it to end (or stop it with Ctrl-C), then: {resume_hint}.")
        db.execute(
            "INSERT INTO locks (name, host, pid, acquired_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid, "
            "acquired_at = excluded.acquired_at",
            (name, host, pid, datetime.now(UTC).isoformat(timespec="seconds")))


def abandoned(store: Store, name: str) -> bool:
    """Whether the lease ``name`` is held by a process of this machine that no longer
    exists (killed, crashed): what it ran is interrupted, not running. Reads only."""
    row = store.db.execute("SELECT host, pid FROM locks WHERE name = ?", (name,)).fetchone()
    return row is not None and row[0] == socket.gethostname() and not _alive(int(row[1]))


def release(store: Store, name: str) -> None:
    """Give the lease back (only this process's own)."""
    with store.transaction() as db:
        db.execute("DELETE FROM locks WHERE name = ? AND host = ? AND pid = ?",
                   (name, socket.gethostname(), os.getpid()))


@contextmanager
def held(store: Store, name: str, *, what: str, resume_hint: str,
         take_over: bool = False) -> Iterator[None]:
    """The lease ``name`` for the length of the block."""
    acquire(store, name, what=what, resume_hint=resume_hint, take_over=take_over)
    try:
        yield
    finally:
        release(store, name)
