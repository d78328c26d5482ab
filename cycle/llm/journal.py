"""The call journal: every paid model call, kept the moment its answer arrives.

A run or a cycle killed at any moment loses only the calls in flight: the answers
that arrived are in the journal before anything uses them, so a resumed run replays
them instead of paying again, whatever the response cache says (it may be off).
Unlike the cache, the journal is scoped to one run (or one round of a cycle): a new
run asks the model again, as fresh samples must.

``Model`` looks a call up before sending it (``replay``) and writes its answer before
using it (``record``). The store implements it (``cycle.store.journal``): a journal
row is the call's row in the cost totals, so a paid call is counted exactly once,
even when the process died before the result that used it was written.
"""

from __future__ import annotations

import hashlib
from typing import Protocol

from cycle.llm.base import ModelOutput
from cycle.records.scope import CallScope


class CallJournal(Protocol):
    def replay(self, key: str, scope: CallScope) -> ModelOutput | None:
        """The recorded answer of the call ``key`` (made in ``scope``), or None."""

    async def record(self, key: str, output: ModelOutput, *, role: str,
                     scope: CallScope, attempts: int) -> None:
        """Keep a paid call's answer (and its cost) durably before it is used."""


def journal_key(scope: str, cache_key: str) -> str:
    """The call's key within its scope."""
    return hashlib.sha256(f"{scope}|{cache_key}".encode()).hexdigest()
