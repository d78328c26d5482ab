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
from typing import Any, Protocol

from cycle.llm.base import ModelOutput


class CallJournal(Protocol):
    def replay(self, key: str) -> ModelOutput | None:
        """The recorded answer of the call ``key``, or None."""

    async def record(self, key: str, output: ModelOutput, *, role: str,
                     context: dict[str, Any], attempts: int) -> None:
        """Keep a paid call's answer (and its cost) durably before it is used."""


def journal_key(context: dict[str, Any], cache_key: str) -> str | None:
    """The call's key within its run (or its cycle's round), or None outside any run."""
    scope = [context.get(k) for k in ("run_id", "cycle_id", "round")]
    if not any(x is not None for x in scope):
        return None
    return hashlib.sha256(f"{scope}|{cache_key}".encode()).hexdigest()
