"""Leases: one process at a time runs a cycle or a run.

Before a cycle or run starts or resumes, its process takes the lease ``cycle:ID`` or
``run:ID`` (a row of ``locks``, taken in one write transaction, so two processes
racing for it cannot both win). A second process finds it held and refuses with
``LockedError``, naming the holder, before it writes anything: the first goes on and
the cycle stays resumable. A lease whose process is gone (killed, crashed: a process
of this machine that no longer exists) is taken over; one held on another machine
cannot be checked, so it is taken over only when asked (``take_over``). The lease is
given back when the process ends its work, however it ends.

On a PostgreSQL store the holder also holds a session advisory lock of the lease, which
the server frees when the holder's session ends (the process killed, crashed, or its
connection lost: cycle does not reconnect mid-command, so the process writes no more).
So a lease held on another machine whose session has ended is taken over without being
asked, and one whose session is still connected is refused even where the machine's
name cannot be checked.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

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


#: the session advisory lock of a lease, in the two-key space (apart from the store's
#: write lock, a one-key lock of its schema): the schema's hash and the lease name's
_SESSION_KEY = "hashtext('cycle-lease:' || current_schema()), hashtext(?)"


def _bound(store: Store) -> bool:
    return store.dialect.name == "postgresql"


def _take_session_lock(db: Any, name: str) -> bool:
    """Hold the lease's session advisory lock (PostgreSQL); False while another session
    holds it."""
    return bool(db.execute(f"SELECT pg_try_advisory_lock({_SESSION_KEY})",
                           (name,)).fetchone()[0])


def acquire(store: Store, name: str, *, what: str, resume_hint: str,
            take_over: bool = False) -> None:
    """Take the lease ``name`` for this process, or raise ``LockedError`` naming its
    holder (``what``: "cycle c-1", said in the message; ``resume_hint``: the command that
    resumes it once the holder is done)."""
    host, pid = socket.gethostname(), os.getpid()
    with store.transaction() as db:
        row = db.execute("SELECT host, pid, acquired_at, session FROM locks WHERE name = ?",
                         (name,)).fetchone()
        ours = row is not None and (row[0], row[1]) == (host, pid)
        # the session lock, taken first: if the holder's session has ended it is ours
        session = _bound(store) and (bool(row[3]) if ours else _take_session_lock(db, name))
        try:
            if row is not None and not ours and not take_over:
                _refuse_if_held(row, here=host, session=session, what=what,
                                resume_hint=resume_hint)
        except LockedError:
            if session:  # not the lease's after all: its lock goes back
                db.execute(f"SELECT pg_advisory_unlock({_SESSION_KEY})", (name,))
            raise
        db.execute(
            "INSERT INTO locks (name, host, pid, acquired_at, session) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid, "
            "acquired_at = excluded.acquired_at, session = excluded.session",
            (name, host, pid, datetime.now(UTC).isoformat(timespec="seconds"),
             1 if session else None))


def _refuse_if_held(row: tuple[Any, ...], *, here: str, session: bool, what: str,
                    resume_hint: str) -> None:
    """LockedError if the lease's holder (``row``) may be at work: a live process of this
    machine, or a process of another whose session is still connected (or, a lease bound
    to no session, any process of another)."""
    holder_host, holder_pid, since, bound = row
    clash = "a second process would write the same results beside it"
    if holder_host == here:
        if _alive(holder_pid):
            raise LockedError(
                f"{what} is being run by process {holder_pid} on this machine (since "
                f"{since}); {clash}",
                hint=f"Wait for it to end (or stop it with Ctrl-C), then: {resume_hint}.")
        return
    if bound and session:
        return  # its session has ended (killed, crashed, connection lost): it is gone
    # a machine that crashed or left the network may keep its session open on the server
    # until TCP gives up on it: the user, who knows, can still take it over
    connected = ", still connected to the store" if bound else ""
    raise LockedError(
        f"{what} is being run by process {holder_pid} on {holder_host} (since "
        f"{since}){connected}; {clash}",
        hint=f"Wait for it to end, then: {resume_hint}. If that machine's process is gone, "
        "take the cycle over: add --take-over.")


def abandoned(store: Store, name: str) -> bool:
    """Whether the lease ``name`` is held by a process of this machine that no longer
    exists (killed, crashed): what it ran is interrupted, not running. Reads only."""
    row = store.db.execute("SELECT host, pid, session FROM locks WHERE name = ?",
                           (name,)).fetchone()
    if row is None or (row[0], row[1]) == (socket.gethostname(), os.getpid()):
        return False
    if row[2] and _bound(store):
        # the holder's session ended if its lock can be taken (and given straight back)
        if not _take_session_lock(store.db, name):
            return False
        store.db.execute(f"SELECT pg_advisory_unlock({_SESSION_KEY})", (name,))
        return True
    return row[0] == socket.gethostname() and not _alive(int(row[1]))


def release(store: Store, name: str) -> None:
    """Give the lease back (only this process's own)."""
    with store.transaction() as db:
        gone = db.execute("DELETE FROM locks WHERE name = ? AND host = ? AND pid = ?",
                          (name, socket.gethostname(), os.getpid())).rowcount
        if gone and _bound(store):
            db.execute(f"SELECT pg_advisory_unlock({_SESSION_KEY})", (name,))


@contextmanager
def held(store: Store, name: str, *, what: str, resume_hint: str,
         take_over: bool = False) -> Iterator[None]:
    """The lease ``name`` for the length of the block."""
    acquire(store, name, what=what, resume_hint=resume_hint, take_over=take_over)
    try:
        yield
    finally:
        release(store, name)
