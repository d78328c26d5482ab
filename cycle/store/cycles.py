"""Cycles, rounds and suggestions in the store: writers, readers and the recorder.

``CycleRecorder`` is the event subscriber that writes the improvement cycle as
it happens (a cycle row at start, a round row as each round starts, its run
ids as they are assigned, suggestions as they are proposed and decided, the
verdict and score as the round ends). A killed cycle therefore leaves enough
in the store for ``cycle improve --resume`` to continue where it stopped.

Tables come from m001 (plus m004: ``rounds.reason``, ``incumbent_score``,
``pass_rate``; m018: ``screens``, a population's candidates as screened).
"""

from __future__ import annotations

import json
import os
import re
import socket
from typing import TYPE_CHECKING, Any

from cycle import events as ev
from cycle.errors import NotFoundError
from cycle.ids import now_iso
from cycle.records import (
    CycleRow,
    RejectedSuggestion,
    RoundRow,
    ScreenRow,
    StoredSuggestion,
    Suggestion,
)

if TYPE_CHECKING:
    from cycle.store.store import Store


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def orphaned(row: CycleRow) -> bool:
    """A cycle stored as running whose process is gone (killed, or its machine rebooted):
    it shows as interrupted. Only a process of this machine can be checked."""
    if row.status != "running" or not row.owner:
        return False
    host, _, pid = row.owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, someone else's
    return False


_CYCLE_COLUMNS = tuple(CycleRow.model_fields)
_ROUND_COLUMNS = tuple(RoundRow.model_fields)
_SCREEN_COLUMNS = tuple(ScreenRow.model_fields)




def _cycle(row: tuple[Any, ...]) -> CycleRow:
    data = dict(zip(_CYCLE_COLUMNS, row))
    data["config"] = json.loads(data["config"] or "{}")
    return CycleRow(**data)


# -- the recorder ---------------------------------------------------------------


class CycleLog:
    """Cycles, their rounds and the suggestions each round proposed and decided."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(self, *, cycle_id: str, prompt_id: str, initial_version: str, config: dict[str, Any]
    ) -> None:
        """Insert the cycle row (status running); a second call for the same id does nothing."""
        with self.store.transaction() as db:
            db.execute(
                "INSERT INTO cycles (id, prompt_id, status, config, started_at, initial_version, "
                "total_cost, owner) VALUES (?, ?, 'running', ?, ?, ?, 0, ?) "
                "ON CONFLICT (id) DO NOTHING",
                (cycle_id, prompt_id, json.dumps(config, default=str), now_iso(), initial_version,
                 _owner()),
            )

    def set_status(self, cycle_id: str, status: str) -> None:
        with self.store.transaction() as db:
            if status == "running":  # resumed: this process owns it now
                db.execute("UPDATE cycles SET status = ?, owner = ? WHERE id = ?",
                           (status, _owner(), cycle_id))
            else:
                db.execute("UPDATE cycles SET status = ? WHERE id = ?", (status, cycle_id))

    def finish(self, cycle_id: str, *, status: str, stop_reason: str,
        final_version: str | None, total_cost: float,
    ) -> None:
        """Record how the cycle ended (``interrupted`` keeps it resumable)."""
        with self.store.transaction() as db:
            db.execute(
                "UPDATE cycles SET status = ?, stop_reason = ?, final_version = ?, total_cost = ?, "
                "finished_at = ? WHERE id = ?",
                (status, stop_reason, final_version, total_cost, now_iso(), cycle_id),
            )

    def update_round(self, cycle_id: str, round_no: int, **fields: Any) -> None:
        """Insert the round row if new, then set ``fields`` (column names of ``rounds``)."""
        unknown = set(fields) - set(_ROUND_COLUMNS)
        if unknown:
            raise ValueError(f"unknown round columns: {', '.join(sorted(unknown))}")
        values = {k: (int(v) if isinstance(v, bool) else v) for k, v in fields.items()}
        with self.store.transaction() as db:
            db.execute(
                "INSERT INTO rounds (cycle_id, round, status, started_at) VALUES (?, ?, 'running', ?) "
                "ON CONFLICT (cycle_id, round) DO NOTHING",
                (cycle_id, round_no, now_iso()),
            )
            if values:
                sets = ", ".join(f"{k} = ?" for k in values)
                db.execute(
                    f"UPDATE rounds SET {sets} WHERE cycle_id = ? AND round = ?",
                    (*values.values(), cycle_id, round_no),
                )

    def save_suggestions(self, cycle_id: str, round_no: int, suggestions: list[dict[str, Any]] | list[Suggestion],
                         *, slot: int = 0) -> None:
        """Insert or update suggestions (by id) with their decision and ``applied`` flag, and
        who decided (``decided_by``, when given) and when (``slot``: the candidate of the
        round's population they were made for). The first record of who decided stands: a
        resumed round that passes a decision on again does not re-attribute it."""
        rows = []
        now = now_iso()
        for s in suggestions:
            data = s.model_dump() if isinstance(s, Suggestion) else dict(s)
            by = data.get("decided_by") if data.get("decision", "pending") != "pending" else None
            rows.append((
                data["id"], cycle_id, round_no, data["type"], data.get("priority", "medium"),
                data.get("current_value", ""), data["suggested_value"], data.get("reasoning", ""),
                data.get("expected_improvement", ""), json.dumps(data.get("target_cases") or []),
                data.get("decision", "pending"), data.get("reason", ""), data.get("edited_value"),
                int(bool(data.get("applied", False))), data.get("tool") or None, slot,
                by, now if by else None, data.get("source_case") or None,
                None if data.get("example_input") is None else json.dumps(
                    data["example_input"], ensure_ascii=False),
                data.get("criterion") or None,
            ))
        with self.store.transaction() as db:
            for row in rows:
                db.execute(
                    "INSERT INTO suggestions (id, cycle_id, round, type, priority, current_value, "
                    "suggested_value, reasoning, expected_improvement, target_cases, decision, reason, "
                    "edited_value, applied, tool, slot, decided_by, decided_at, source_case, "
                    "example_input, criterion) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (id) DO UPDATE SET decision = excluded.decision, reason = excluded.reason, "
                    "edited_value = excluded.edited_value, applied = excluded.applied, "
                    "decided_by = COALESCE(suggestions.decided_by, excluded.decided_by), "
                    "decided_at = COALESCE(suggestions.decided_at, excluded.decided_at)",
                    row,
                )

    def save_screen(self, screen: ScreenRow) -> None:
        """Record a candidate's screen; a resumed round's screen of the same slot replaces
        it (the same version and run, its gain reckoned again from the same results)."""
        values = screen.model_dump()
        values["kept"] = int(screen.kept)
        keys = ", ".join(_SCREEN_COLUMNS)
        updates = ", ".join(f"{k} = excluded.{k}" for k in _SCREEN_COLUMNS
                            if k not in ("cycle_id", "round", "slot"))
        with self.store.transaction() as db:
            db.execute(
                f"INSERT INTO screens ({keys}) VALUES ({', '.join('?' * len(_SCREEN_COLUMNS))}) "
                f"ON CONFLICT (cycle_id, round, slot) DO UPDATE SET {updates}",
                [values[k] for k in _SCREEN_COLUMNS],
            )

    def get(self, cycle_id: str) -> CycleRow:
        rows = self.store.db.execute(
            f"SELECT {', '.join(_CYCLE_COLUMNS)} FROM cycles WHERE id = ?", (cycle_id,)
        ).fetchall()
        if not rows:
            raise NotFoundError(f"no cycle '{cycle_id}' in the store", hint=self._recent_hint())
        return _cycle(rows[0])

    def resolve(self, ref: str) -> str:
        """The cycle id a person means: an id, or a unique prefix or suffix of one
        (``c-20261128-0836`` or the random ``302e6d``), as for runs."""
        from cycle.store.lookup import by_part

        return by_part(self.store.db, "cycles", ref, what="cycle", hint=self._recent_hint())

    def _recent_hint(self) -> str:
        known = [r[0] for r in self.store.db.execute(
            "SELECT id FROM cycles ORDER BY started_at DESC LIMIT 5").fetchall()]
        return ("Recent cycles: " + ", ".join(known)) if known else "No cycle has run in this store yet."

    def recent(self, prompt_id: str | None = None, *, limit: int = 20) -> list[CycleRow]:
        """Cycles, newest first."""
        sql = f"SELECT {', '.join(_CYCLE_COLUMNS)} FROM cycles"
        params: list[Any] = []
        if prompt_id is not None:
            sql += " WHERE prompt_id = ?"
            params.append(prompt_id)
        sql += " ORDER BY started_at DESC, rowid DESC LIMIT ?"
        params.append(limit)
        return [_cycle(r) for r in self.store.db.execute(sql, params).fetchall()]

    def latest_resumable(self, prompt_id: str) -> CycleRow | None:
        """The newest cycle of ``prompt_id`` that was interrupted (or killed: still 'running'),
        or failed."""
        rows = self.store.db.execute(
            f"SELECT {', '.join(_CYCLE_COLUMNS)} FROM cycles WHERE prompt_id = ? "
            "AND status IN ('running', 'interrupted', 'failed') "
            "ORDER BY started_at DESC, rowid DESC LIMIT 1",
            (prompt_id,),
        ).fetchall()
        return _cycle(rows[0]) if rows else None

    def get_rounds(self, cycle_id: str) -> list[RoundRow]:
        rows = self.store.db.execute(
            f"SELECT {', '.join(_ROUND_COLUMNS)} FROM rounds WHERE cycle_id = ? ORDER BY round",
            (cycle_id,),
        ).fetchall()
        out = []
        for row in rows:
            data = dict(zip(_ROUND_COLUMNS, row))
            if data["accepted"] is not None:
                data["accepted"] = bool(data["accepted"])
            if data["pairwise"] is not None:
                data["pairwise"] = json.loads(data["pairwise"])
            out.append(RoundRow(**data))
        return out

    def get_suggestions(self, cycle_id: str, round_no: int | None = None) -> list[StoredSuggestion]:
        """Suggestions of a cycle (or one round), in the order they were proposed."""
        sql = (
            "SELECT id, cycle_id, round, type, priority, current_value, suggested_value, reasoning, "
            "expected_improvement, target_cases, decision, reason, edited_value, applied, tool, "
            "slot, decided_by, decided_at, source_case, example_input, criterion FROM suggestions "
            "WHERE cycle_id = ?"
        )
        params: list[Any] = [cycle_id]
        if round_no is not None:
            sql += " AND round = ?"
            params.append(round_no)
        sql += " ORDER BY round, rowid"
        out = []
        for row in self.store.db.execute(sql, params).fetchall():
            (sid, cid, rnd, typ, prio, cur, sug, why, exp, targets, decision, reason, edited,
             applied, tool, slot, decided_by, decided_at, source_case, example_input,
             criterion) = row
            out.append(StoredSuggestion(
                id=sid, cycle_id=cid, round=rnd, type=typ, priority=prio, current_value=cur or "",
                suggested_value=sug or "", reasoning=why or "", expected_improvement=exp or "",
                target_cases=json.loads(targets or "[]"), decision=decision or "pending",
                reason=reason or "", edited_value=edited, applied=bool(applied), tool=tool or "",
                slot=slot or 0, decided_by=decided_by, decided_at=decided_at,
                source_case=source_case or "",
                example_input=None if example_input is None else json.loads(example_input),
                criterion=criterion or "",
            ))
        return out

    def get_screens(self, cycle_id: str) -> list[ScreenRow]:
        """A cycle's screened candidates, by round and slot."""
        rows = self.store.db.execute(
            f"SELECT {', '.join(_SCREEN_COLUMNS)} FROM screens WHERE cycle_id = ? "
            "ORDER BY round, slot", (cycle_id,)).fetchall()
        return [ScreenRow(**dict(zip(_SCREEN_COLUMNS, row, strict=True))) for row in rows]

    def head_moves(self, cycle_id: str, prompt_id: str) -> list[tuple[int, str]]:
        """The head moves this cycle made, oldest first: (the round that moved it, the
        version it moved to). A cycle records each with its round in the reason."""
        said = re.compile(rf"cycle {re.escape(cycle_id)} round (\d+):")
        rows = self.store.db.execute(
            "SELECT to_version, reason FROM label_moves WHERE prompt_id = ? AND label = 'head' "
            "ORDER BY id", (prompt_id,)).fetchall()
        return [(int(m.group(1)), to) for to, reason in rows
                if (m := said.match(reason or "")) is not None]

    def offline(self, cycle_id: str) -> bool:
        """Whether any of the cycle's runs came from the offline (or scripted) model."""
        return bool(self.store.db.execute(
            "SELECT max(coalesce(offline, 0)) FROM runs WHERE cycle_id = ?",
            (cycle_id,)).fetchone()[0])

    def cost_estimated(self, cycle_id: str) -> bool:
        """Whether any call of the cycle was priced by an estimate."""
        return bool(self.store.db.execute(
            "SELECT max(coalesce(c.cost_estimated, 0)) FROM calls c LEFT JOIN runs r "
            "ON r.id = c.run_id WHERE r.cycle_id = ? OR (c.run_id IS NULL AND c.cycle_id = ?)",
            (cycle_id, cycle_id)).fetchone()[0])

    def round_costs(self, cycle_id: str) -> dict[int, dict[str, float]]:
        """Round -> role -> dollars, from the calls rows.

        Each call carries the round that paid for it; a call without one (an older
        store) belongs to its run's round. (A round that grows an earlier round's run
        with more iterations pays for them itself.)
        """
        rows = self.store.db.execute(
            """
            SELECT coalesce(c.round, r.round) AS rnd, c.role, sum(coalesce(c.cost, 0))
            FROM calls c LEFT JOIN runs r ON r.id = c.run_id
            WHERE r.cycle_id = ? OR (c.run_id IS NULL AND c.cycle_id = ?)
            GROUP BY rnd, c.role ORDER BY rnd, coalesce(c.role, '')
            """,
            (cycle_id, cycle_id),
        ).fetchall()
        out: dict[int, dict[str, float]] = {}
        for rnd, role, cost in rows:
            if rnd is None:
                continue
            out.setdefault(int(rnd), {})[role or "agent"] = float(cost or 0.0)
        return out

    def round_version(self, cycle_id: str, round_no: int) -> tuple[str, str]:
        """(prompt id, version) a round evaluated: what ``cycle rollback --round N`` returns head to."""
        cycle = self.get(cycle_id)
        rounds = {r.round: r for r in self.get_rounds(cycle_id)}
        r = rounds.get(round_no)
        if r is None or r.version is None:
            known = ", ".join(str(n) for n, x in sorted(rounds.items()) if x.version) or "none"
            raise NotFoundError(
                f"cycle '{cycle_id}' has no round {round_no} with a version",
                hint=f"Rounds with a version: {known}.",
            )
        return cycle.prompt_id, r.version

    def rejected_suggestions(self, cycle_id: str) -> list[RejectedSuggestion]:
        """What the improver must not propose again, with why: suggestions the reviewer
        rejected, those that could not be applied, and those tried in a rejected candidate
        (with the acceptance evidence)."""
        rounds = {r.round: r for r in self.get_rounds(cycle_id)}
        out = []
        for s in self.get_suggestions(cycle_id):
            r = rounds.get(s.round)
            if s.decision == "rejected":
                reason = f"rejected by the reviewer: {s.reason or 'no reason given'}"
            elif s.decision == "skipped":
                reason = f"could not be applied: {s.reason}"
            elif s.applied and r is not None and r.accepted is False:
                reason = f"tried in round {s.round}; the candidate was {r.reason or 'rejected'}"
            else:
                continue
            out.append(RejectedSuggestion(
                type=s.type, tool=s.tool, criterion=s.criterion, current_value=s.current_value,
                suggested_value=s.value, reason=reason,
            ))
        return out


class CycleRecorder:
    """Event subscriber writing cycles, rounds and suggestions to the store as they happen."""

    def __init__(self, log: CycleLog) -> None:
        self.log = log

    def __call__(self, event: ev.Event) -> None:
        log = self.log
        if isinstance(event, ev.CycleStarted):
            log.create(cycle_id=event.cycle_id, prompt_id=event.prompt_id,
                         initial_version=event.version, config=event.config)
            if event.resumed:
                log.set_status(event.cycle_id, "running")
        elif isinstance(event, ev.RoundStarted):
            fields = {"incumbent_version": event.version, "status": "running", "stage": event.stage}
            if event.reason:  # a confirmation: why exploring stopped (kept for a resume)
                fields["reason"] = event.reason
            log.update_round(event.cycle_id, event.round, **fields)
        elif isinstance(event, ev.EvaluationStarted) and event.role != "screen":
            # a screen run is the population's minibatch: not the round's evaluation
            column = "baseline_run_id" if event.role == "baseline" else "candidate_run_id"
            fields: dict[str, Any] = {column: event.run_id}
            if event.role == "candidate":
                fields["candidate_version"] = event.version
            log.update_round(event.cycle_id, event.round, **fields)
        elif isinstance(event, (ev.SuggestionsProposed, ev.ReviewDecided)):
            log.save_suggestions(event.cycle_id, event.round, event.suggestions, slot=event.slot)
        elif isinstance(event, ev.VersionCreated) and event.cycle_id and event.round is not None:
            log.update_round(event.cycle_id, event.round, candidate_version=event.version)
        elif isinstance(event, ev.CandidateScreened):
            log.save_screen(ScreenRow(
                cycle_id=event.cycle_id, round=event.round, slot=event.slot,
                version=event.version, parent=event.parent, second_parent=event.second_parent,
                run_id=event.run_id, cases=event.cases, gain=event.gain, kept=event.kept))
        elif isinstance(event, ev.CandidateDecided):
            # ci_low/ci_high of a round are its score's interval (RoundFinished); the
            # interval of the paired improvement is part of the reason text
            log.update_round(event.cycle_id, event.round, accepted=event.accepted, reason=event.reason,
                             delta=event.delta, seen_delta=event.seen_delta,
                             held_out_delta=event.held_out_delta,
                             pairwise=json.dumps(event.pairwise) if event.pairwise else None)
        elif isinstance(event, ev.RoundFinished):
            fields = {"status": "finished", "score": event.score, "ci_low": event.ci_low,
                      "ci_high": event.ci_high, "pass_rate": event.pass_rate, "cost": event.cost,
                      "incumbent_score": event.incumbent_score, "finished_at": now_iso()}
            if event.round == 0:
                fields["accepted"] = None
            log.update_round(event.cycle_id, event.round, **fields)
        elif isinstance(event, ev.CycleFinished):
            log.finish(event.cycle_id, status=event.status, stop_reason=event.reason,
                         final_version=event.final_version, total_cost=event.total_cost)


