"""The store's call journal (see cycle.llm.journal): paid calls as rows of ``calls``,
each with its key and answer, committed the moment they arrive, apart from the
batches the runner writes its results in (a commit reaches the WAL, which a killed
process does not lose).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from cycle.events import ModelCalled
from cycle.llm.base import ModelOutput
from cycle.store.runs import INSERT_CALL, call_row

if TYPE_CHECKING:
    from cycle.records.scope import CallScope
    from cycle.store.store import Store


class StoreJournal:
    """Paid calls by key, in the store's ``calls`` table.

    ``record`` is group-committed: the answers that arrive within one turn of the event
    loop are written in one transaction, and each caller goes on only once its row is
    committed. So nothing is used before it is kept, and a busy run pays one commit per
    batch rather than per call."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: per event loop: the rows waiting for the next commit and the future it resolves
        self._batches: dict[asyncio.AbstractEventLoop, tuple[asyncio.Future[None], list[Any]]] = {}
        #: runs this process created (``RunLog.create``): no call of theirs was journaled
        #: before this process made it, so a call not yet made has nothing to replay and is
        #: not looked up (a lookup a call: a round trip each on a team's database)
        self.fresh: set[str] = set()

    def replay(self, key: str, scope: CallScope) -> ModelOutput | None:
        if scope.run_id is not None and scope.run_id in self.fresh:
            return None
        row = self.store.db.execute(
            "SELECT output FROM calls WHERE key = ? AND output IS NOT NULL LIMIT 1", [key],
        ).fetchone()
        if row is None:
            return None
        try:
            return ModelOutput.model_validate_json(row[0])
        except ValueError:
            return None  # written by an incompatible release: ask again

    async def record(self, key: str, output: ModelOutput, *, role: str,
                     scope: CallScope, attempts: int) -> None:
        usage = output.usage
        row = call_row(ModelCalled(
            model=output.model, role=role, input_tokens=usage.input_tokens,
            cached_input_tokens=usage.cached_input_tokens, output_tokens=usage.output_tokens,
            cost=output.cost, cost_estimated=output.cost_estimated, latency=output.latency,
            attempts=attempts, scope=scope,
        ), key=key, output=output.model_dump_json(exclude=_NOT_KEPT, exclude_defaults=True))
        loop = asyncio.get_running_loop()
        batch = self._batches.get(loop)
        if batch is None:
            batch = self._batches[loop] = (loop.create_future(), [])
            loop.call_soon(self._commit, loop)
        batch[1].append(row)
        # shielded: the future is the whole batch's, and a caller cancelled while it waits
        # (its case timed out) must cancel only itself, not every caller of the batch
        await asyncio.shield(batch[0])

    def _commit(self, loop: asyncio.AbstractEventLoop) -> None:
        done, rows = self._batches.pop(loop)
        try:
            with self.store.transaction() as db:
                db.executemany(INSERT_CALL, rows)
        except Exception as e:  # noqa: BLE001 - every caller of the batch sees the failure
            done.set_exception(e)
        else:
            done.set_result(None)


#: what a journaled answer leaves out: the raw exchange (large, and where a provider
#: might echo a key), the parsed object (rebuilt on replay) and the per-use flags
_NOT_KEPT = {"raw_request", "raw_response", "parsed", "cache_hit"}
