"""The call journal: every paid model call, kept the moment its answer arrives.

A run or a cycle killed at any moment loses only the calls in flight: the answers
that arrived are in the journal before anything uses them, so a resumed run replays
them instead of paying again, whatever the response cache says (it may be off).
Unlike the cache, the journal is scoped to one run (or one round of a cycle): a new
run asks the model again, as fresh samples must.

``Model`` looks a call up before sending it (``replay``) and writes its answer before
using it (``record``). A call that was paid for and still failed is kept too, the moment
it fails, so that its charge is in the totals once whatever happens next: an answer the
provider withheld (a content filter, a blocked prompt) with its reason, replayed on resume
as the same error (the same request would very likely be withheld again: paying for the
refusal twice is waste); an answer that could not be used (cut on its way, unreadable)
with its charge alone, asked again on resume as any failed call is. A charged attempt
that is asked again keeps its charge alone too, before the backoff's wait (a kill during
the wait loses nothing), marked as such (``retried``: a paid attempt, not a call), and the
answer that follows is kept with its own cost: a run's calls count each call once, its
cost every paid attempt. A call whose charged attempt was asked again and that then
failed without a charge still gets its own row (cost 0), so that it is counted; one stopped
during the wait (a timeout, a kill) is counted when a resume asks it again.

The store implements it (``cycle.store.journal``): a journal row is the call's row in
the cost totals, so a paid call is counted exactly once, even when the process died
before the result that used it was written.
"""

from __future__ import annotations

import hashlib
from typing import Protocol

from cycle.llm.base import ModelOutput
from cycle.records.scope import CallScope


class CallJournal(Protocol):
    def replay(self, key: str, scope: CallScope) -> ModelOutput | None:
        """The recorded answer of the call ``key`` (made in ``scope``), or None; a withheld
        one (``output.withheld``) is replayed as the error it was."""

    async def record(self, key: str, output: ModelOutput, *, role: str,
                     scope: CallScope, attempts: int, error: str | None = None,
                     retried: bool = False) -> None:
        """Keep a paid call's answer (and its cost) durably before it is used. With
        ``error``: the call failed after it was paid (``output.cost``); its answer is kept
        to replay only when the provider withheld it, else only its charge. ``retried``:
        the charge of an attempt that is asked again, not a call of its own (the call's
        answer or failure is recorded after it): counted in the cost, not in the calls."""


def journal_key(scope: str, cache_key: str) -> str:
    """The call's key within its scope."""
    return hashlib.sha256(f"{scope}|{cache_key}".encode()).hexdigest()
