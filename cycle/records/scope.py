"""Where a model call belongs: its run, cycle round, case, iteration and turn.

Every call carries one ``CallScope``. It decides three things, each in one place:
the call journal's scope (a paid call of a run or a cycle's round is kept, and replayed
after a kill, per case: see ``journal``), the cache's independence (``sample`` salts the
cache key, so an evaluation that must be a fresh sample never reuses another's answers),
and the attribution of the call's cost (the ``calls`` row's run, cycle, round, case and
iteration columns).
"""

from __future__ import annotations

from typing import Any

import msgspec


class CallScope(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    run_id: str | None = None
    cycle_id: str | None = None
    round: int | None = None
    case_id: str | None = None
    iteration: int | None = None
    #: the user turn (from 1) and the model step within it, past a conversation's first call
    turn: int | None = None
    step: int | None = None
    #: the tool a user agent answers
    tool: str | None = None
    #: the evaluation's salt: calls of different samples never share a cached answer
    sample: str | None = None

    def at(self, **changes: Any) -> CallScope:
        """The same scope with ``changes`` (``scope.at(turn=2)``)."""
        return msgspec.structs.replace(self, **changes)

    def journal(self) -> str | None:
        """The run (or the cycle's round) and the case a call belongs to, or None outside
        any run: the call journal keeps nothing else. Two cases that send the same
        messages are two samples, not one call replayed."""
        if self.run_id is None and self.cycle_id is None and self.round is None:
            return None
        return repr([self.run_id, self.cycle_id, self.round, self.case_id])

    def fields(self) -> dict[str, Any]:
        """The fields that are set (for a log line or a test)."""
        return {k: v for k in self.__struct_fields__ if (v := getattr(self, k)) is not None}


#: the scope of a call made outside any run (a one-off ``cycle judge``, a test)
NO_SCOPE = CallScope()
