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


def _recorder(journal: StoreJournal):
    async def record(key: str) -> None:
        await journal.record(key, ModelOutput(text=key, model="offline:default"),
                             role="agent", scope=CallScope(), attempts=1)
    return record


async def test_the_answers_of_one_turn_share_one_commit_and_each_goes_on_a_turn_later(tmp_path):
    """Three answers arriving in one turn of the loop: one transaction keeps all three,
    and each caller goes on in the next turn with its row already committed. Waiting on a
    shared, shielded future took three turns; on a busy loop every turn a case waits is a
    connection idle in the pool, which the SDK's pool checks on every request (6% more
    CPU at 500 cases, 64 in flight, bench_latency.py)."""
    with Store.open(tmp_path / "s.db") as store:
        journal = StoreJournal(store)
        commits: list[int] = []
        store.db.set_trace_callback(lambda sql: commits.append(1) if sql == "COMMIT" else None)
        seen: dict[str, int] = {}
        record = _recorder(journal)

        async def kept(key: str) -> None:
            await record(key)
            # a second connection: what a killed process would leave behind
            with Store.open(tmp_path / "s.db") as other:
                seen[key] = other.db.execute(
                    "SELECT count(*) FROM calls WHERE key = ?", [key]).fetchone()[0]

        tasks = [asyncio.create_task(kept(k)) for k in "abc"]
        await asyncio.sleep(0)  # the three run: rows in one batch, its commit scheduled
        await asyncio.sleep(0)  # the commit, then each caller
        assert all(t.done() for t in tasks)
        assert seen == {"a": 1, "b": 1, "c": 1}
        assert len(commits) == 1


async def test_a_failed_commit_reaches_every_caller_of_its_batch(tmp_path):
    """The store cannot take the rows (its table is gone): each caller raises, none goes
    on to use an answer that was not kept."""
    with Store.open(tmp_path / "s.db") as store:
        journal = StoreJournal(store)
        store.db.execute("DROP TABLE calls")
        record = _recorder(journal)
        results = await asyncio.gather(record("a"), record("b"), return_exceptions=True)
        assert all(isinstance(r, Exception) for r in results), results
        assert "calls" in str(results[0])


def test_answers_from_several_threads_each_with_its_loop_are_all_kept(tmp_path):
    """A model called from a worker thread (``generate_sync`` inside a running loop runs
    its own loop there) while other loops record too: each loop's batch is its own, every
    row is committed, and no batch is left behind."""
    import threading

    with Store.open(tmp_path / "s.db") as store:
        journal = StoreJournal(store)
        record = _recorder(journal)

        def thread(t: int) -> None:
            async def main() -> None:
                await asyncio.gather(*(record(f"{t}-{i}") for i in range(200)))
            asyncio.run(main())

        threads = [threading.Thread(target=thread, args=(t,)) for t in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        assert store.db.execute("SELECT count(*) FROM calls").fetchone()[0] == 6 * 200
        assert journal._batches == {}


def test_a_store_held_by_another_process_fails_the_batch_and_the_next_one_commits(
        tmp_path, monkeypatch):
    """Another process holds the store's write lock past the busy timeout: every caller of
    the batch raises the store's "busy" error (none goes on as if its answer were kept);
    once the lock is let go, the next answers are kept."""
    import sqlite3

    from cycle.errors import StoreError
    from cycle.store import store as store_module

    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.1)
    with Store.open(tmp_path / "s.db") as store:
        journal = StoreJournal(store)
        record = _recorder(journal)
        other = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")

        async def batch(prefix: str) -> list:
            return await asyncio.gather(*(record(f"{prefix}{i}") for i in range(5)),
                                        return_exceptions=True)

        failed = asyncio.run(batch("a"))
        assert all(isinstance(r, StoreError) and "busy" in r.message for r in failed), failed
        other.execute("ROLLBACK")
        other.close()
        assert asyncio.run(batch("b")) == [None] * 5
        assert {k for (k,) in store.db.execute("SELECT key FROM calls")} == {f"b{i}" for i in range(5)}
        assert journal._batches == {}
