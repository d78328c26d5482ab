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
    batch rather than per call.

    A caller waits one turn, not three: the batch's commit is scheduled before any of its
    callers yields, and the loop runs what is ready in order, so each caller wakes with
    its row kept. (Awaiting a shared future, shielded, cost a turn for the commit, one for
    the future's callbacks and one for the shield's: at 64 cases in flight, 100 ms a
    call, on a busy loop that kept about 8 fewer calls in flight, and the connection pool
    checks every idle connection on every request: 6% more CPU, bench_latency.py.)"""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: per event loop: the rows waiting for the next commit
        self._batches: dict[asyncio.AbstractEventLoop, _Batch] = {}
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
                     scope: CallScope, attempts: int, error: str | None = None,
                     retried: bool = False) -> None:
        usage = output.usage
        # a failure's answer is kept only when withheld (replayed as its error); one that
        # could not be used keeps its charge, its output NULL: never replayed, asked again
        kept = (output.model_dump_json(exclude=_NOT_KEPT, exclude_defaults=True)
                if error is None or output.withheld else None)
        row = call_row(ModelCalled(
            model=output.model, role=role, input_tokens=usage.input_tokens,
            cached_input_tokens=usage.cached_input_tokens, output_tokens=usage.output_tokens,
            cost=output.cost, cost_estimated=output.cost_estimated, latency=output.latency,
            attempts=attempts, error=error, scope=scope,
        ), key=key, output=kept, retried=retried)
        loop = asyncio.get_running_loop()
        batch = self._batches.get(loop)
        if batch is None:
            batch = self._batches[loop] = _Batch()
            loop.call_soon(self._commit, loop)
        batch.rows.append(row)
        # The commit runs before this caller wakes (scheduled first); the loop guards a
        # loop that did not keep call_soon's order. A caller cancelled here (its case timed
        # out) cancels only itself: the batch, its row with it, is committed all the same.
        while not batch.finished:
            await asyncio.sleep(0)
        if batch.error is not None:
            raise batch.error

    def _commit(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._batches.pop(loop)
        try:
            with self.store.transaction() as db:
                db.executemany(INSERT_CALL, batch.rows)
        except BaseException as e:  # every caller of the batch sees the failure
            batch.error = e  # (a Ctrl-C too: no caller goes on as if its row were kept)
            if not isinstance(e, Exception):
                raise
        finally:
            batch.finished = True


class _Batch:
    """The answers that arrived in one turn of the loop, and what their commit did."""

    __slots__ = ("error", "finished", "rows")

    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.finished = False
        self.error: BaseException | None = None


#: what a journaled answer leaves out: the raw exchange (large, and where a provider
#: might echo a key), the parsed object (rebuilt on replay) and the per-use flags
_NOT_KEPT = {"raw_request", "raw_response", "parsed", "cache_hit"}
