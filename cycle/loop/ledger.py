"""A cycle's ledger: the one place a cycle's data is written to the store and read back.

The loop decides and emits events; the ledger, subscribed to the bus, persists each of
them in the transaction that makes it durable (cycles, rounds, suggestions and
decisions through ``CycleRecorder``; the calls made outside a run, the improver's) and
keeps the state derived from them: the finished rounds, the cost of each round by role.
The few writes whose result the loop needs (a candidate's version number, a head move
that may find head moved by someone else) are the ledger's methods, as are the reads a
round makes (the suggestions a resumed round already paid for, what was refused).

A resume loads the ledger from the store and continues: the rounds, their costs, the
time spent and the budget used come back from the same rows a live cycle writes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from cycle import events as ev
from cycle.authors import LOOP, on_behalf
from cycle.errors import ConfigError, CycleError, NotFoundError
from cycle.ids import new_cycle_id
from cycle.llm.budget import Budget
from cycle.loop.stop import RoundRecord
from cycle.records import Prompt, RejectedSuggestion, StoredSuggestion, Version
from cycle.records.cycles import CycleRow, RoundRow
from cycle.store import CallRecorder, Store
from cycle.store.cycles import CycleRecorder
from cycle.store.human_labels import Labelled


class Ledger:
    """One cycle's rows in ``store``, and the state derived from them."""

    def __init__(self, store: Store, bus: ev.EventBus, *, prompt_id: str, budget: Budget) -> None:
        self.store = store
        self.bus = bus
        self.prompt_id = prompt_id
        self.budget = budget
        self.cycle_id = ""
        #: the finished rounds, in order (round 0 is the baseline)
        self.rounds: list[RoundRecord] = []
        #: seconds the cycle ran before this process resumed it
        self.elapsed_before = 0.0
        self._cost_by_round: dict[int, dict[str, float]] = {}
        self._recorder = CycleRecorder(store.cycles)
        #: what the cycle's own writes are recorded as: the loop, on behalf of the person
        #: who ran it (``cycle (alice)``; a resume: of the person who resumed it)
        self.author = on_behalf(LOOP)

    # -- a new cycle, or a stored one -----------------------------------------------

    def new_cycle(self) -> str:
        """A new id no stored cycle has: two cycles started in the same second (parallel
        jobs on one store) must not share rounds and runs, whose ids derive from it."""
        while True:
            cycle_id = new_cycle_id()
            try:
                self.store.cycles.get(cycle_id)
            except NotFoundError:
                self.cycle_id = cycle_id
                return cycle_id

    def resume(self, resume: str | bool) -> tuple[CycleRow, list[RoundRow]]:
        """Load a stored cycle (``resume``: its id, or True for the newest interrupted cycle
        of the prompt): its finished rounds, their costs, the time spent and the budget
        used. Returns the cycle and its round rows (the loop rebuilds its incumbents)."""
        if resume is True or resume == "":
            row = self.store.cycles.latest_resumable(self.prompt_id)
            if row is None:
                raise NotFoundError(
                    f"no interrupted cycle of '{self.prompt_id}' to resume",
                    hint="Start a new one: cycle improve cycle.yaml",
                )
        else:
            row = self.store.cycles.get(self.store.cycles.resolve(str(resume)))
            if row.prompt_id != self.prompt_id:
                raise ConfigError(
                    f"cycle {row.id} improved '{row.prompt_id}', but this config's prompt is "
                    f"'{self.prompt_id}'", field="prompt",
                    hint="Resume it with the cycle.yaml it was started with.",
                )
            if row.status == "finished":
                raise CycleError(
                    f"cycle {row.id} already finished ({row.stop_reason}); nothing to resume",
                    hint="Start a new cycle: cycle improve cycle.yaml",
                )
        self.cycle_id = row.id
        rounds = self.store.cycles.get_rounds(row.id)
        costs = self.store.cycles.round_costs(row.id)
        for r in rounds:
            if r.status != "finished":
                break
            self.elapsed_before += _seconds_between(r.started_at, r.finished_at)
            self.rounds.append(RoundRecord(
                round=r.round, version=r.version or "", score=r.score, accepted=r.accepted,
                delta=r.delta, reason=(r.reason or "") if r.round else "", cost=r.cost or 0.0,
                stage=r.stage or ("baseline" if r.round == 0 else "improve")))
        # what was spent before counts against the cap
        self._cost_by_round = {k: dict(v) for k, v in costs.items()}
        for role, cost in self.cost_by_role().items():
            self.budget.add(cost, role)
        return row, rounds

    def restored(self) -> tuple[dict[str, object], ...]:
        """The finished rounds as a resumed cycle's first event carries them (the TUI
        draws them before the first new one)."""
        from cycle.judge.calibration import run_judge_kappa

        judges: dict[tuple[str | None, str | None], Any] = {}  # each judge measured once
        return tuple(
            {k: getattr(r, k) for k in ("round", "stage", "score", "ci_low", "ci_high",
                                        "pass_rate", "delta", "accepted", "cost")}
            | {"version": r.version,
               "judge_agreement": run_judge_kappa(
                   self.store, r.candidate_run_id or r.baseline_run_id, judges)}
            for r in self.store.cycles.get_rounds(self.cycle_id) if r.status == "finished")

    # -- recording ------------------------------------------------------------------

    def subscribe(self) -> Callable[[], None]:
        """Start recording the bus's events; returns the function that stops it."""
        return self.bus.subscribe(self)

    def __call__(self, event: ev.Event) -> None:
        self._recorder(event)
        if isinstance(event, ev.ModelCalled):
            self._called(event)
        elif isinstance(event, ev.RoundFinished) and event.cycle_id == self.cycle_id:
            self.rounds.append(RoundRecord(
                round=event.round, version=event.version, score=event.score,
                accepted=event.accepted, delta=event.delta, reason=event.reason,
                cost=event.cost, stage=event.stage))

    def _called(self, event: ev.ModelCalled) -> None:
        round_no = event.scope.round
        if event.scope.cycle_id != self.cycle_id or round_no is None:
            return
        costs = self._cost_by_round.setdefault(int(round_no), {})
        costs[event.role] = costs.get(event.role, 0.0) + event.cost
        if event.scope.run_id is None:
            # calls outside a run (the improver's) are recorded here; the runner records its own
            recorder = CallRecorder(self.store.runs)
            recorder(event)
            recorder.flush()
        self.bus.emit(ev.CostUpdated(total=self.budget.spent, by_role=dict(self.budget.by_role),
                                     limit=self.budget.limit, estimated=self.budget.estimated))

    # -- what the loop reads ----------------------------------------------------------

    def round_cost(self, round_no: int) -> dict[str, float]:
        """Dollars by role a round paid: the store's calls rows (a resumed round's calls
        paid before the kill are there once; their replays are not paid again)."""
        stored = self.store.cycles.round_costs(self.cycle_id).get(round_no)
        return stored if stored is not None else dict(self._cost_by_round.get(round_no, {}))

    def cost_by_role(self) -> dict[str, float]:
        by_role: dict[str, float] = {}
        for costs in self._cost_by_round.values():
            for role, cost in costs.items():
                by_role[role] = by_role.get(role, 0.0) + cost
        return by_role

    def suggestions(self, round_no: int) -> list[StoredSuggestion]:
        """The round's stored suggestions (a resumed round already paid the improver)."""
        return self.store.cycles.get_suggestions(self.cycle_id, round_no)

    def proposed_before(self, round_no: int) -> list[StoredSuggestion]:
        """Every suggestion of the rounds before ``round_no`` (the models a cost cycle
        has tried are among them)."""
        return [s for s in self.store.cycles.get_suggestions(self.cycle_id) if s.round < round_no]

    def refused(self) -> list[RejectedSuggestion]:
        """What the improver must not propose again (cycle.store.cycles)."""
        return self.store.cycles.rejected_suggestions(self.cycle_id)

    def evaluated_versions(self, initial: str, *, before: int) -> dict[str, int]:
        """Versions this cycle evaluated before round ``before`` (the start and every
        candidate) -> the round (a resumed round's own candidate is not one)."""
        out = {initial: 0}
        for r in self.store.cycles.get_rounds(self.cycle_id):
            if r.improves and r.round < before and r.candidate_version and r.candidate_run_id:
                out.setdefault(r.candidate_version, r.round)
        return out

    def version(self, version: str) -> Version:
        return self.store.get_version(self.prompt_id, version)

    # -- the writes whose result the loop needs -------------------------------------------

    def save_candidate(self, prompt: Prompt, *, parent: str, bump: str, message: str,
                       second_parent: str | None = None) -> Version:
        """The candidate as a new version (head does not move); an identical prompt is the
        version it already is."""
        return self.store.save_version(prompt, bump=bump, source="improver", parent=parent,
                                       second_parent=second_parent, move_head=False,
                                       author=self.author, message=message)

    def move_head(self, *, expected: str, target: str, reason: str) -> str | None:
        """Move head from ``expected`` to ``target``; or, when head was moved outside this
        cycle since (a person's ``cycle rollback``, another cycle), leave it: the version
        head is at (None: moved). A person's choice is never silently overridden. A
        protected head that the cycle's author may not move raises ProtectedLabelError
        (nothing moved)."""
        now = self.store.resolve(f"{self.prompt_id}@head").version
        if now not in (expected, target):
            return now
        self.store.set_label(self.prompt_id, "head", target, who=self.author, reason=reason)
        return None

    def judge_labels(self, model: str | None, version: str | None) -> list[Labelled]:
        """People's labels of the outputs this judge (model and prompt version) judged."""
        return self.store.human_labels.of_judge(model, version)

    def run_labels(self, run_ids: list[str]) -> list[Labelled]:
        """People's labels of these runs' outputs."""
        return self.store.human_labels.of_runs(run_ids)

    def mark_stopped(self) -> None:
        """A round cut short (cost cap) is kept as 'stopped', with what it had stored."""
        for r in self.store.cycles.get_rounds(self.cycle_id):
            if r.status == "running":
                self.store.cycles.update_round(self.cycle_id, r.round, status="stopped")


def _seconds_between(start: str | None, end: str | None) -> float:
    if not start or not end:
        return 0.0
    try:
        return max(0.0, (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())
    except ValueError:
        return 0.0
