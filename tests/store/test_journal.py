"""The store's call journal (cycle.store.journal): answers group-committed, one commit a
turn of the event loop, each caller going on once its row is kept."""

from __future__ import annotations

import asyncio

from cycle.llm.base import ModelOutput
from cycle.records.scope import CallScope
from cycle.store import Store
from cycle.store.journal import StoreJournal


async def test_a_caller_cancelled_while_its_batch_commits_cancels_no_other(tmp_path):
    """Two answers in one batch; the case of the first times out (its task is cancelled)
    while the batch waits for its commit. The cancel went to the batch's shared future:
    the second caller was cancelled too, though its own case had not timed out, and the
    commit then logged 'InvalidStateError: invalid state' with a traceback (found by
    `cycle run` with run.timeout: 0.000001 on the offline model)."""
    loop_errors: list[dict] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: loop_errors.append(ctx))
    with Store.open(tmp_path / "s.db") as store:
        journal = StoreJournal(store)

        async def record(key: str) -> None:
            await journal.record(key, ModelOutput(text=key, model="offline:default"),
                                 role="agent", scope=CallScope(), attempts=1)

        timed_out = asyncio.create_task(record("a"))
        other = asyncio.create_task(record("b"))
        await asyncio.sleep(0)  # both rows are in the batch, its commit is scheduled
        timed_out.cancel()
        await asyncio.wait([timed_out, other])
        assert timed_out.cancelled()
        assert not other.cancelled() and other.exception() is None
        assert loop_errors == []
        # both rows were kept: the one whose caller was cancelled too (it was paid for)
        assert {k for (k,) in store.db.execute("SELECT key FROM calls").fetchall()} == {"a", "b"}
