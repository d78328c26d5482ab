"""The store's batch-job ledger (see cycle.llm.batch): every job a run submitted, with the
keys of its calls, committed before anything waits on the job. A run killed while a job
runs finds the job by its calls' keys when it resumes, and polls it instead of paying for
the calls again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cycle.ids import now_iso

if TYPE_CHECKING:
    from cycle.records.scope import CallScope
    from cycle.store.store import Store


class StoreBatches:
    """Batch jobs and their calls, in the store's ``batch_jobs`` and ``batch_calls``."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def job_of(self, key: str) -> str | None:
        row = self.store.db.execute(
            "SELECT job_id FROM batch_calls WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    def submitted(self, job_id: str, *, model: str, keys: Sequence[str],
                  scope: CallScope) -> None:
        with self.store.transaction() as db:
            db.execute(
                "INSERT INTO batch_jobs (id, model, run_id, calls, state, submitted_at)"
                " VALUES (?, ?, ?, ?, 'submitted', ?) ON CONFLICT (id) DO UPDATE SET "
                "model = excluded.model, run_id = excluded.run_id, calls = excluded.calls, "
                "state = excluded.state, submitted_at = excluded.submitted_at, ended_at = NULL",
                [job_id, model, scope.run_id, len(keys), now_iso()])
            db.executemany("INSERT INTO batch_calls (key, job_id) VALUES (?, ?) "
                           "ON CONFLICT (key) DO UPDATE SET job_id = excluded.job_id",
                                [(k, job_id) for k in keys])

    def ended(self, job_id: str, state: str) -> None:
        with self.store.transaction() as db:
            db.execute("UPDATE batch_jobs SET state = ?, ended_at = ? WHERE id = ?",
                       [state, now_iso(), job_id])

    def jobs(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The jobs kept (of one run), oldest first."""
        where, args = ("WHERE run_id = ?", [run_id]) if run_id else ("", [])
        cursor = self.store.db.execute(
            f"SELECT id, model, run_id, calls, state, submitted_at, ended_at FROM batch_jobs "
            f"{where} ORDER BY submitted_at, rowid", args)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor]
