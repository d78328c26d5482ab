"""The store's call journal (see cycle.llm.journal): paid calls as rows of ``calls``,
each with its key and answer, written one by one the moment they arrive.

Each row is its own transaction, committed (to the WAL, which a killed process does
not lose) before ``record`` returns, apart from the batches the runner writes its
results in.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cycle.llm.base import ModelOutput

if TYPE_CHECKING:
    from cycle.store.store import Store

_INSERT = (
    "INSERT INTO calls (at, run_id, cycle_id, round, case_id, iteration, role, model, "
    "input_tokens, cached_input_tokens, output_tokens, cost, cost_estimated, latency, "
    "cache_hit, attempts, error, key, output) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, NULL, ?, ?)"
)


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

    def replay(self, key: str) -> ModelOutput | None:
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
                     context: dict[str, Any], attempts: int) -> None:
        row = (
            datetime.now(UTC).isoformat(timespec="microseconds"), context.get("run_id"),
            context.get("cycle_id"), context.get("round"), context.get("case_id"),
            context.get("iteration"), role, output.model, output.usage.input_tokens,
            output.usage.cached_input_tokens, output.usage.output_tokens, output.cost,
            int(output.cost_estimated), output.latency, attempts, key,
            output.model_dump_json(exclude=_NOT_KEPT, exclude_defaults=True),
        )
        loop = asyncio.get_running_loop()
        batch = self._batches.get(loop)
        if batch is None:
            batch = self._batches[loop] = (loop.create_future(), [])
            loop.call_soon(self._commit, loop)
        batch[1].append(row)
        await batch[0]

    def _commit(self, loop: asyncio.AbstractEventLoop) -> None:
        done, rows = self._batches.pop(loop)
        try:
            with self.store.transaction() as db:
                db.conn.executemany(_INSERT, rows)
        except Exception as e:  # noqa: BLE001 - every caller of the batch sees the failure
            done.set_exception(e)
        else:
            done.set_result(None)


#: what a journaled answer leaves out: the raw exchange (large, and where a provider
#: might echo a key), the parsed object (rebuilt on replay) and the per-use flags
_NOT_KEPT = {"raw_request", "raw_response", "parsed", "cache_hit"}
