"""Runs, results, verdicts and model calls in the store.

The runner writes iteration results with their verdicts, and the model
calls made for them, in small batches: one transaction at most every
``FLUSH_EVERY`` seconds (WAL mode, no fsync storm), so a killed run loses at
most that much work and resumes from the rest. ``CallRecorder`` subscribes to the event
bus and buffers ``ModelCalled`` rows until that commit (or ``flush()``).
Reading back gives the rows and records; ``cycle.evals.results.load_run``
aggregates them into a ``RunResult`` for reports, ``cycle compare`` and resuming.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from cycle.errors import NotFoundError
from cycle.events import Event, ModelCalled
from cycle.ids import now_iso
from cycle.records import (
    IterationResult,
    MemberVerdict,
    RoleUsage,
    RunRow,
    ToolCall,
    TraceEvent,
    Verdict,
)
from cycle.store.params import in_list

if TYPE_CHECKING:
    from cycle.store.store import Store

#: a trace to and from JSON (pydantic-core: one call each way)
_TRACE: TypeAdapter[tuple[TraceEvent, ...]] = TypeAdapter(tuple[TraceEvent, ...])

#: seconds between two result writes of a running suite (see the module docstring)
FLUSH_EVERY = 0.25


_RUN_COLUMNS = (
    "id, prompt_id, version, status, started_at, finished_at, config, agent_model, "
    "judge_model, judge_version, offline, cycle_id, round, role, summary"
)


def call_row(event: ModelCalled, *, key: str | None = None, output: str | None = None,
             retried: bool = False) -> tuple[Any, ...]:
    """The ``calls`` row of a call (``INSERT_CALL``'s values); the call journal adds the
    call's key and its answer, and marks the charge of an attempt asked again
    (``retried``: part of a call whose own row is another)."""
    scope = event.scope
    return (
        datetime.fromtimestamp(event.at, UTC).isoformat(timespec="microseconds"),
        scope.run_id, scope.cycle_id, scope.round, scope.case_id, scope.iteration, event.role, event.model, event.input_tokens,
        event.cached_input_tokens, event.output_tokens, event.cost, int(event.cost_estimated),
        event.latency, int(event.cache_hit), event.attempts, event.error, key, output,
        1 if retried else None,
    )


INSERT_CALL = (
    "INSERT INTO calls (at, run_id, cycle_id, round, case_id, iteration, role, model, "
    "input_tokens, cached_input_tokens, output_tokens, cost, cost_estimated, latency, "
    "cache_hit, attempts, error, key, output, retried) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_RESULT = (
    "INSERT INTO results (run_id, case_id, iteration, status, score, passed, error, input, "
    "output, tool_calls, latency, agent_cost, judge_cost, input_tokens, output_tokens, "
    "started_at, finished_at, trace, state) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_VERDICT = (
    "INSERT INTO verdicts (result_id, criterion_id, kind, score, passed, weight, required, "
    "reasoning, failed_turns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_MEMBER = (
    "INSERT INTO panel_verdicts (result_id, criterion_id, member, score, passed, reasoning) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)


class RunLog:
    """Runs, their iteration results with verdicts, and the model calls made for them."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(
        self,
        *,
        run_id: str,
        prompt_id: str | None = None,
        version: str | None = None,
        config: dict[str, Any] | None = None,
        agent_model: str | None = None,
        judge_model: str | None = None,
        judge_version: str | None = None,
        offline: bool = False,
        cycle_id: str | None = None,
        round: int | None = None,
        role: str = "eval",
    ) -> None:
        """Insert a run with status 'running'."""
        self.store.journal.fresh.add(run_id)
        with self.store.transaction() as db:
            db.execute(
                f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, 'running', ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                (run_id, prompt_id, version, now_iso(), json.dumps(config or {}, default=str),
                 agent_model, judge_model, judge_version, int(offline), cycle_id, round, role),
            )

    def get(self, run_id: str) -> RunRow | None:
        row = self.store.db.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else self._row(row)

    @staticmethod
    def _row(r: tuple[Any, ...]) -> RunRow:
        return RunRow(
            id=r[0], prompt_id=r[1], version=r[2], status=r[3], started_at=r[4], finished_at=r[5],
            config=json.loads(r[6] or "{}"), agent_model=r[7], judge_model=r[8], judge_version=r[9],
            offline=bool(r[10]), cycle_id=r[11], round=r[12], role=r[13],
            summary=json.loads(r[14]) if r[14] else None,
        )

    def require(self, run_id: str) -> RunRow:
        row = self.get(run_id)
        if row is None:
            raise NotFoundError(f"no run '{run_id}' in the store", hint=self._recent_hint())
        return row

    def _recent_hint(self) -> str:
        recent = [r[0] for r in self.store.db.execute(
            "SELECT id FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 5").fetchall()]
        if not recent:
            return "The store has no runs yet."
        return "Recent runs: " + ", ".join(recent) + " (all of them: cycle runs)."

    def resolve(self, ref: str) -> str:
        """The run id a person means: an id, ``@last``, ``@prev``, or a unique prefix or
        suffix of an id (``run-20261122-1643`` or the random ``7dd7d1``)."""
        if ref in ("@last", "@prev"):
            skip = 0 if ref == "@last" else 1
            row = self.store.db.execute(
                "SELECT id FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1 OFFSET ?",
                (skip,)).fetchone()
            if row is None:
                have = "no runs" if skip == 0 else "only one run"
                raise NotFoundError(f"{ref}: the store has {have}",
                                    hint="Run one first: cycle run cycle.yaml.")
            return row[0]
        from cycle.store.lookup import by_part

        return by_part(self.store.db, "runs", ref, what="run", hint=self._recent_hint())

    def recent(self, *, prompt_id: str | None = None, version: str | None = None,
               since: str | None = None, until: str | None = None, cycle_id: str | None = None,
               evals_only: bool = False, limit: int | None = 20) -> list[RunRow]:
        """Runs newest first, of a prompt (and version), started in [since, until) (ISO times),
        of one cycle, or (``evals_only``) of no cycle."""
        clauses: list[str] = ["cycle_id IS NULL"] if evals_only else []
        params: list[Any] = []
        for column, op, value in (("prompt_id", "=", prompt_id), ("version", "=", version),
                                  ("started_at", ">=", since), ("started_at", "<", until),
                                  ("cycle_id", "=", cycle_id)):
            if value is not None:
                clauses.append(f"{column} {op} ?")
                params.append(value)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self.store.db.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs {where} ORDER BY started_at DESC, rowid DESC"
            + ("" if limit is None else " LIMIT ?"),
            (*params, *(() if limit is None else (limit,)))).fetchall()
        return [self._row(r) for r in rows]

    def finish(self, run_id: str, *, status: str, summary: dict[str, Any] | None = None) -> None:
        """Set the final status ('finished', 'interrupted', 'failed') and the summary figures."""
        with self.store.transaction() as db:
            db.execute(
                "UPDATE runs SET status = ?, finished_at = ?, summary = ? WHERE id = ?",
                (status, now_iso(), json.dumps(summary, default=str) if summary is not None else None,
                 run_id),
            )

    def mark_running(self, run_id: str) -> None:
        """A stored run continues (resumed, or grown): its journal is looked up again."""
        self.store.journal.fresh.discard(run_id)
        with self.store.transaction() as db:
            db.execute("UPDATE runs SET status = 'running', finished_at = NULL WHERE id = ?", (run_id,))

    def case_means(self, run_id: str) -> dict[str, float | None]:
        """Case id -> mean score of its judged iterations (None: every iteration errored)."""
        rows = self.store.db.execute(
            "SELECT case_id, AVG(CASE WHEN status != 'error' THEN score END) FROM results "
            "WHERE run_id = ? GROUP BY case_id", (run_id,)).fetchall()
        return {case_id: mean for case_id, mean in rows}

    def agent_case_costs(self, run_id: str) -> dict[str, float]:
        """Case id -> the mean dollars per iteration of the agent role's stored calls (every
        call billed, errored iterations too: they were paid for), for the cases with a
        stored iteration. What ``improve.objective: cost`` compares."""
        runs = dict(self.store.db.execute(
            "SELECT case_id, count(*) FROM results WHERE run_id = ? GROUP BY case_id",
            (run_id,)).fetchall())
        paid = dict(self.store.db.execute(
            "SELECT case_id, coalesce(sum(cost), 0) FROM calls WHERE run_id = ? AND "
            "coalesce(role, 'agent') = 'agent' AND coalesce(cache_hit, 0) = 0 "
            "GROUP BY case_id", (run_id,)).fetchall())
        return {case: float(paid.get(case) or 0.0) / n for case, n in runs.items() if n}

    def delete_errors(self, run_id: str) -> int:
        """Remove a run's errored iterations (before resuming re-runs them)."""
        with self.store.transaction() as db:
            ids = [r[0] for r in db.execute(
                "SELECT id FROM results WHERE run_id = ? AND status = 'error'", (run_id,)).fetchall()]
            if ids:
                marks, bound = in_list(ids)
                db.execute(f"DELETE FROM panel_verdicts WHERE result_id IN ({marks})", bound)
                db.execute(f"DELETE FROM verdicts WHERE result_id IN ({marks})", bound)
                db.execute(f"DELETE FROM results WHERE id IN ({marks})", bound)
            return len(ids)

    def write_results(
        self, run_id: str | None, results: Iterable[IterationResult], *,
        calls: Iterable[tuple[Any, ...]] = (),
    ) -> None:
        """Write iteration results with their verdicts, and call rows, in one transaction."""
        results = list(results)
        rows = list(calls)
        if not (results or rows):
            return
        with self.store.transaction() as conn:
            if results:
                assert run_id is not None, "results belong to a run"
                _insert_results(conn, run_id, results)
            if rows:
                conn.executemany(INSERT_CALL, rows)

    def repeats_cases(self, run_id: str) -> bool:
        """Whether the run judged some case twice or more."""
        return self.store.db.execute(
            "SELECT 1 FROM results WHERE run_id = ? AND score IS NOT NULL GROUP BY case_id "
            "HAVING count(*) >= 2 LIMIT 1", (run_id,)).fetchone() is not None

    def mean_call_cost(self, role: str) -> float | None:
        """The mean dollars of the store's answered calls of ``role`` (None: none yet)."""
        return self.store.db.execute(
            "SELECT avg(cost) FROM calls WHERE role = ? AND error IS NULL AND "
            "coalesce(cache_hit, 0) = 0", (role,)).fetchone()[0]

    def load_results(self, run_id: str, case_id: str | None = None) -> list[IterationResult]:
        """The stored iterations of a run (or of one of its cases), with their verdicts,
        by case and iteration."""
        columns = ["run_id"] if case_id is None else ["run_id", "case_id"]
        params = [run_id] if case_id is None else [run_id, case_id]
        return self._results(" AND ".join(f"{c} = ?" for c in columns), params)

    def load_cases(self, run_id: str, case_ids: list[str]) -> dict[str, list[IterationResult]]:
        """The stored iterations of these cases of a run, by case, in one read (on a
        team's database, a statement is a round trip)."""
        out: dict[str, list[IterationResult]] = {c: [] for c in case_ids}
        marks, bound = in_list(case_ids)
        for r in self._results(f"run_id = ? AND case_id IN ({marks})", [run_id, *bound]):
            out[r.case_id].append(r)
        return out

    def _results(self, where: str, params: list[Any]) -> list[IterationResult]:
        db = self.store.db
        rows = db.execute(
            "SELECT id, case_id, iteration, status, score, passed, error, input, output, "
            "tool_calls, latency, agent_cost, judge_cost, input_tokens, output_tokens, "
            f"started_at, finished_at, trace, state FROM results WHERE {where} "
            "ORDER BY case_id, iteration", params).fetchall()
        verdicts: dict[int, list[Verdict]] = {}
        # by the results' ids (the index on result_id): a join filtered on the results'
        # columns lets SQLite scan every verdict in id order, once per case read
        ids = [row[0] for row in rows]
        for start in range(0, len(ids), 500):
            marks, chunk = in_list(ids[start:start + 500])
            members: dict[tuple[int, str], list[MemberVerdict]] = {}
            for row in db.execute(
                    "SELECT result_id, criterion_id, member, score, passed, reasoning FROM "
                    f"panel_verdicts WHERE result_id IN ({marks}) ORDER BY id", chunk):
                members.setdefault((row[0], row[1]), []).append(MemberVerdict(
                    model=row[2], score=row[3], passed=bool(row[4]), reasoning=row[5] or ""))
            verdicts_rows = db.execute(
                "SELECT result_id, criterion_id, kind, score, passed, weight, required, "
                "reasoning, failed_turns FROM verdicts WHERE result_id IN "
                f"({marks}) ORDER BY id", chunk).fetchall()
            for row in verdicts_rows:
                verdicts.setdefault(row[0], []).append(Verdict(
                    criterion_id=row[1], kind=row[2], score=row[3], passed=bool(row[4]),
                    weight=row[5], required=bool(row[6]), reasoning=row[7] or "",
                    failed_turns=tuple(json.loads(row[8])) if row[8] else (),
                    members=tuple(members.get((row[0], row[1]), ())),
                ))
        return [IterationResult(
            case_id=row[1], iteration=row[2], status=row[3], score=row[4],
            passed=None if row[5] is None else bool(row[5]), error=row[6],
            input=json.loads(row[7]) if row[7] else None, output=row[8] or "",
            tool_calls=tuple(ToolCall(**t) for t in json.loads(row[9])) if row[9] else (),
            latency=row[10] or 0.0, agent_cost=row[11] or 0.0, judge_cost=row[12] or 0.0,
            input_tokens=row[13] or 0, output_tokens=row[14] or 0,
            started_at=row[15] or "", finished_at=row[16] or "",
            verdicts=tuple(verdicts.get(row[0], ())),
            trace=_TRACE.validate_json(row[17]) if row[17] else (),
            state=json.loads(row[18]) if row[18] else {},
        ) for row in rows]

    def tally_rows(self, run_id: str) -> Iterator[tuple[Any, ...]]:
        """Per iteration of a run, what its figures need (``cycle.evals.results.Tally``,
        after the case id): no output, verdicts or trace leaves SQLite (the user turns are
        counted there)."""
        return self.store.db.execute(
            "SELECT case_id, iteration, status, score, CASE WHEN passed IS NULL THEN NULL "
            "ELSE passed != 0 END, coalesce(latency, 0.0), "
            "status != 'error' OR coalesce(output, '') != '', "
            "CASE WHEN trace IS NULL THEN 0 ELSE "
            f"{self.store.dialect.count_json_items('trace', 'kind', 'user')} END "
            "FROM results WHERE run_id = ? ORDER BY case_id, iteration", (run_id,))

    def criterion_means(self, run_id: str) -> dict[str, float]:
        """Criterion id -> mean score over every verdict of a run."""
        return dict(self.store.db.execute(
            "SELECT v.criterion_id, avg(v.score) FROM verdicts v JOIN results r "
            "ON r.id = v.result_id WHERE r.run_id = ? GROUP BY v.criterion_id ORDER BY "
            "min(v.id)", (run_id,)).fetchall())

    def panel_means(self, run_id: str) -> dict[str, dict[str, float]]:
        """A run judged by a panel: criterion id -> member -> its mean score, criteria and
        members in the order they were first written ({} for a single judge)."""
        out: dict[str, dict[str, float]] = {}
        for criterion, member, mean in self.store.db.execute(
                "SELECT p.criterion_id, p.member, avg(p.score) FROM panel_verdicts p JOIN "
                "results r ON r.id = p.result_id WHERE r.run_id = ? GROUP BY p.criterion_id, "
                "p.member ORDER BY min(p.id)", (run_id,)):
            out.setdefault(criterion, {})[member] = mean
        return out

    def panel_units(self, run_id: str) -> dict[str, list[tuple[int, float, float]]]:
        """A run judged by a panel: criterion id -> each scored iteration's members' scores
        as (how many, their sum, the sum of their squares): what their agreement is computed
        from, summed in the database (a large run's member rows never reach Python)."""
        out: dict[str, list[tuple[int, float, float]]] = {}
        for criterion, n, total, squares in self.store.db.execute(
                "SELECT p.criterion_id, count(*), sum(p.score), sum(p.score * p.score) FROM "
                "panel_verdicts p JOIN results r ON r.id = p.result_id WHERE r.run_id = ? "
                "GROUP BY p.criterion_id, p.result_id ORDER BY p.result_id", (run_id,)):
            out.setdefault(criterion, []).append((int(n), float(total), float(squares)))
        return out

    def judged_inputs(self, run_id: str) -> Iterator[tuple[str, str | None]]:
        """(case id, its input as stored) of each case a run judged (or errored) once or
        more: what a resume compares the cases it is given with."""
        return self.store.db.execute(
            "SELECT case_id, min(input) FROM results WHERE run_id = ? GROUP BY case_id",
            (run_id,))

    def paid(self, run_id: str) -> dict[str, float]:
        """Dollars a run's calls were billed, per role (cache hits cost nothing): what a
        resumed run has already spent of its cap."""
        return {role or "agent": cost for role, cost in self.store.db.execute(
            "SELECT role, coalesce(sum(cost), 0) FROM calls WHERE run_id = ? AND "
            "coalesce(cache_hit, 0) = 0 GROUP BY role", (run_id,)).fetchall()}

    def offline_versions(self, prompt_id: str) -> set[str]:
        """Versions of ``prompt_id`` whose evaluations came from the offline (or scripted)
        model."""
        return {v for (v,) in self.store.db.execute(
            "SELECT DISTINCT version FROM runs WHERE prompt_id = ? AND offline = 1",
            [prompt_id])}

    def typical_output(self) -> dict[tuple[str, str], float]:
        """(role, model) -> the mean output tokens of the store's paid calls (what a dry
        run's likely figure assumes an answer takes)."""
        return {(r[0], r[1]): float(r[2]) for r in self.store.db.execute(
            "SELECT role, model, avg(output_tokens) FROM calls WHERE error IS NULL AND "
            "coalesce(cache_hit, 0) = 0 AND output_tokens > 0 GROUP BY role, model")}

    def usage_by_role(self, run_id: str) -> dict[str, RoleUsage]:
        """Calls, tokens and cost of a run, per role (agent, judge, ...). Calls are logical
        calls: a charged attempt asked again (its row ``retried``, kept before the retry's
        wait) is not one, its call's own row is; its tokens and cost are in the sums (it
        was paid) and it is counted apart (``retried_charged``)."""
        rows = self.store.db.execute(
            "SELECT role, count(*) - coalesce(sum(retried), 0), coalesce(sum(input_tokens), 0), "
            "coalesce(sum(output_tokens), 0), coalesce(sum(cost), 0), max(cost_estimated), "
            "coalesce(sum(cache_hit), 0), coalesce(sum(retried), 0) "
            # ordered: PostgreSQL's grouping gives rows in any order, SQLite's by role
            "FROM calls WHERE run_id = ? GROUP BY role ORDER BY coalesce(role, '')",
            (run_id,),
        ).fetchall()
        return {r[0] or "agent": RoleUsage(calls=r[1], input_tokens=r[2], output_tokens=r[3],
                                           cost=r[4], cost_estimated=bool(r[5]), cache_hits=r[6],
                                           retried_charged=r[7])
                for r in rows}


#: cases a stored run's results are read at once: what a report holds at most
CASES_READ = 100


class StoredResults:
    """A stored run's results, read when asked (``RunResult.source``). A report asks for
    the run's cases in their order (``follow``), each's results and then its
    representative: read in that order, ``CASES_READ`` cases a read, so a report holds at
    most that many cases' results whatever the run's size. Asked out of order, it reads
    the one case asked (never a hundred to use one)."""

    def __init__(self, log: RunLog, run_id: str) -> None:
        self.log = log
        self.run_id = run_id
        self._read: dict[str, list[IterationResult]] = {}
        self._order: list[str] = []
        self._at: dict[str, int] = {}
        self._last: str | None = None

    def follow(self, order: list[str]) -> None:
        """The order a report asks for the cases in (the run's)."""
        self._order, self._at = order, {c: i for i, c in enumerate(order)}

    def of(self, case_id: str) -> list[IterationResult]:
        if case_id not in self._read:
            at = self._at.get(case_id)
            after_last = self._last is None or self._at.get(self._last, -2) + 1 == at
            ahead = (self._order[at:at + CASES_READ] if at is not None and after_last
                     else [case_id])
            self._read = self.log.load_cases(self.run_id, ahead)
        self._last = case_id
        return self._read[case_id]

    def criterion_means(self) -> dict[str, float]:
        return self.log.criterion_means(self.run_id)

    def shared(self) -> SharedReads:
        """The run's results read once for several readers going through it side by side
        (the reports, written together)."""
        return SharedReads(self.log, self.run_id, self._order)


class SharedReads:
    """A stored run's results read once for several readers (``reader()``) that go
    through the run's cases in its order side by side, as its reports are written
    together: each read of ``CASES_READ`` cases serves every reader, and a read is let go
    once every reader still reading (not ``done``) has passed it, so a few reads' cases
    are held whatever the run's size. Written one after the other, the four reports read
    the run four times (benchmarks/RESULTS.md, issue 40)."""

    def __init__(self, log: RunLog, run_id: str, order: list[str]) -> None:
        self.log = log
        self.run_id = run_id
        self.order = order
        self.at = {c: i for i, c in enumerate(order)}
        #: read number -> its cases' results
        self.held: dict[int, dict[str, list[IterationResult]]] = {}
        self.readers: list[SharedReader] = []

    def reader(self) -> SharedReader:
        reader = SharedReader(self)
        self.readers.append(reader)
        return reader

    def read(self, number: int) -> dict[str, list[IterationResult]]:
        if number not in self.held:
            # the reads every reader still reading is past are let go first
            slowest = min((r.read for r in self.readers if not r.done), default=number)
            for passed in [n for n in self.held if n < slowest]:
                del self.held[passed]
            self.held[number] = self.log.load_cases(
                self.run_id, self.order[number * CASES_READ:(number + 1) * CASES_READ])
        return self.held[number]


class SharedReader:
    """One reader of ``SharedReads`` (a run's results source, as ``StoredResults``):
    ``read`` is the number of the shared read its cases in order last came from. Asked
    for a case behind that, not the one after the last (a jump back), it takes it from a
    shared read still held, else reads that one case alone (never a hundred to use one)."""

    def __init__(self, shared: SharedReads) -> None:
        self.shared = shared
        self.read = 0
        #: it reads no more (its report is written)
        self.done = False
        self._last: int | None = None
        self._own: dict[str, list[IterationResult]] = {}

    def of(self, case_id: str) -> list[IterationResult]:
        shared = self.shared
        at = shared.at.get(case_id)
        after_last = at is not None and (self._last is None or at == self._last + 1)
        self._last = at
        if case_id in self._own:
            return self._own[case_id]
        if at is not None:
            number = at // CASES_READ
            # in order: a case in this shared read or one ahead (a pass that skips cases,
            # as a report's failed ones: the others read every case, so the read is
            # theirs too), or the one after the last in an earlier read (a second pass).
            # A reader ahead waits for the others (_side_by_side), so each holds one read
            in_order = after_last or number >= self.read
            if in_order:
                self.read = number
            if in_order or number in shared.held:
                return shared.read(number)[case_id]
        self._own = shared.log.load_cases(shared.run_id, [case_id])
        return self._own[case_id]

    def criterion_means(self) -> dict[str, float]:
        return self.shared.log.criterion_means(self.shared.run_id)


class CallRecorder:
    """A bus subscriber that records ``ModelCalled`` events as rows of ``calls``.

    Rows are buffered and written with the next result (``write_result``) or
    on ``flush()``, so a run costs one transaction per result, not per call.
    With ``run_id`` it records only that run's calls (several runs may share
    a bus); without, every call.
    """

    def __init__(self, log: RunLog, *, run_id: str | None = None) -> None:
        self.log = log
        self.run_id = run_id
        self._pending: list[tuple[Any, ...]] = []

    def __call__(self, event: Event) -> None:
        if not isinstance(event, ModelCalled) or event.journaled:
            return  # the journal wrote the row of a journaled call
        if self.run_id is not None and event.scope.run_id != self.run_id:
            return
        self._pending.append(call_row(event))

    def take(self) -> list[tuple[Any, ...]]:
        rows, self._pending = self._pending, []
        return rows

    def flush(self) -> None:
        self.log.write_results(None, (), calls=self.take())


def _insert_results(conn: sqlite3.Connection, run_id: str, results: list[IterationResult]) -> None:
    """A batch of results and their verdicts in three statements, whatever its size (on a
    team's database each is a round trip): the results, their ids read back by their
    unique (run, case, iteration), the verdicts."""
    conn.executemany(_INSERT_RESULT, [_result_row(run_id, r) for r in results])
    judged = [r for r in results if r.verdicts]
    if not judged:
        return
    cases = sorted({r.case_id for r in judged})
    ids: dict[tuple[str, int], int] = {}
    for start in range(0, len(cases), 500):
        marks, chunk = in_list(cases[start:start + 500])
        for rid, case_id, iteration in conn.execute(
                "SELECT id, case_id, iteration FROM results WHERE run_id = ? AND case_id IN "
                f"({marks})", [run_id, *chunk]):
            ids[(case_id, iteration)] = rid
    conn.executemany(_INSERT_VERDICT, [
        (ids[(r.case_id, r.iteration)], v.criterion_id, v.kind, v.score, int(v.passed), v.weight,
         int(v.required), v.reasoning, json.dumps(v.failed_turns) if v.failed_turns else None)
        for r in judged for v in r.verdicts
    ])
    paneled = [(ids[(r.case_id, r.iteration)], v.criterion_id, m.model, m.score, int(m.passed),
                m.reasoning) for r in judged for v in r.verdicts for m in v.members]
    if paneled:
        conn.executemany(_INSERT_MEMBER, paneled)


def _result_row(run_id: str, r: IterationResult) -> tuple[Any, ...]:
    tool_calls = json.dumps([t.model_dump() for t in r.tool_calls]) if r.tool_calls else None
    return (
        run_id, r.case_id, r.iteration, r.status, r.score,
        None if r.passed is None else int(r.passed), r.error,
        json.dumps(r.input, ensure_ascii=False, default=str), r.output, tool_calls,
        r.latency, r.agent_cost, r.judge_cost, r.input_tokens, r.output_tokens,
        r.started_at, r.finished_at,
        _TRACE.dump_json(r.trace, exclude_defaults=True).decode() if r.trace else None,
        json.dumps(r.state, ensure_ascii=False, default=str) if r.state else None,
    )


