"""What the dashboard shows, folded from the event stream.

``DashboardState.apply(event)`` is cheap and widget-free: the app feeds it
every event drained from the bridge (in the UI thread, a batch per frame), and
asks ``take_changes()`` for what to redraw (the cases and rounds that changed,
the new log lines) when it redraws the heavy widgets: at most once a second
while a run is fast. Changes accumulate in between, so a run of 10,000 cases
costs one dict update per event, and the screen redraws only what changed.
"""

from __future__ import annotations

import msgspec
from msgspec import Struct, field

from cycle import events as ev
from cycle.authors import LOOP
from cycle.records.cycles import JudgeKappa
from cycle.words import pct, plural

#: log lines kept for the live log (older lines scroll away)
LOG_LIMIT = 500
#: case errors written to the log per run; the rest are only counted
ERROR_LOG_LIMIT = 20


def format_duration(seconds: float) -> str:
    """``m:ss`` (or ``h:mm:ss``) for elapsed times."""
    total = int(max(0.0, seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class CaseRow(Struct):
    """One case of the running suite: its iterations so far."""

    case_id: str
    done: int = 0
    errors: int = 0
    passed: int = 0
    scores: list[float] = field(default_factory=list)
    last_error: str | None = None
    #: iterations a limit ended (not errors), and the user turns of each iteration that
    #: did not end in an error
    terminated: int = 0
    turns: list[int] = field(default_factory=list)

    @property
    def mean(self) -> float | None:
        return sum(self.scores) / len(self.scores) if self.scores else None


class RoundRow(Struct):
    """One round of the cycle as far as the events told."""

    round: int
    version: str = ""
    score: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    pass_rate: float | None = None
    delta: float | None = None
    accepted: bool | None = None
    cost: float = 0.0
    status: str = "running"
    #: "baseline", "improve" or "confirm"
    stage: str = "improve"
    #: the judge's agreement with people when the round finished (None: no model judged)
    judge: JudgeKappa | None = None


class CandidateRow(Struct):
    """One candidate of the round's population (``improve.population``), as far as the
    events told: proposed from its parent, built, screened, then ended or evaluated."""

    slot: int
    parent: str
    #: a merge's other parent
    second_parent: str | None = None
    version: str = ""
    #: mean gain over its parent on the screen's cases (None: not screened, or none judged)
    gain: float | None = None
    screened: bool = False
    #: it went on to the round's full evaluation
    kept: bool = False
    #: the full evaluation's verdict (None: not decided, or not evaluated)
    accepted: bool | None = None
    #: no version came of it (nothing approved, or it rebuilt a version already tried):
    #: known once the round's screens (or its verdict) are told
    none: bool = False


class Changes(Struct):
    """What changed since the last ``take_changes``."""

    run_reset: bool = False
    cases: list[CaseRow] = field(default_factory=list)
    rounds: list[RoundRow] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    #: the population's candidates or its frontier changed (drawn whole: a few rows)
    population: bool = False

    @property
    def empty(self) -> bool:
        return not (self.run_reset or self.cases or self.rounds or self.log or self.population)


class DashboardState(Struct):
    """Progress of the cycle and of its running suite, from events only."""

    cycle_id: str | None = None
    prompt_id: str | None = None
    version: str | None = None
    status: str = "waiting"
    stop_reason: str = ""
    # the running suite
    run_id: str | None = None
    run_version: str | None = None
    run_started_at: float | None = None
    run_finished_at: float | None = None
    #: the cycle's start and end (event times): the elapsed time shown is the cycle's
    cycle_started_at: float | None = None
    cycle_finished_at: float | None = None
    total: int = 0
    done: int = 0
    errors: int = 0
    cases: dict[str, CaseRow] = field(default_factory=dict)
    # the rounds and the money
    rounds: dict[int, RoundRow] = field(default_factory=dict)
    current_round: int | None = None
    cost: float = 0.0
    cost_limit: float | None = None
    cost_estimated: bool = False
    #: provider -> its latest limit of calls in flight, once it rate-limited a call
    throttled: dict[str, ev.ConcurrencyChanged] = field(default_factory=dict)
    # a population's round: its candidates by slot, and the frontier they come from
    population_round: int | None = None
    candidates: dict[int, CandidateRow] = field(default_factory=dict)
    #: version -> the cases it is best on, most first
    frontier: dict[str, int] = field(default_factory=dict)
    events_seen: int = 0
    _called_cost: float = 0.0
    _cost_reported: bool = False
    _run_errors_logged: int = 0
    _first_at: float | None = None
    _run_reset: bool = False
    _dirty_cases: dict[str, CaseRow] = field(default_factory=dict)
    _dirty_rounds: dict[int, RoundRow] = field(default_factory=dict)
    _log: list[str] = field(default_factory=list)
    _population_changed: bool = False

    # -- folding -----------------------------------------------------------

    def apply(self, event: ev.Event) -> None:
        """Fold one event in. Unknown events are ignored."""
        self.events_seen += 1
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def take_changes(self) -> Changes:
        """Hand over what changed since the last call and start afresh."""
        changes = Changes(
            run_reset=self._run_reset,
            cases=list(self._dirty_cases.values()),
            rounds=list(self._dirty_rounds.values()),
            log=self._log,
            population=self._population_changed,
        )
        self._run_reset = False
        self._dirty_cases = {}
        self._dirty_rounds = {}
        self._log = []
        self._population_changed = False
        return changes

    @property
    def has_changes(self) -> bool:
        """Whether something folded in waits for ``take_changes`` (a full redraw)."""
        return bool(self._run_reset or self._dirty_cases or self._dirty_rounds or self._log
                    or self._population_changed)

    @property
    def has_population(self) -> bool:
        """The cycle searches with a population: the dashboard shows its candidates."""
        return self.population_round is not None or bool(self.frontier)

    def elapsed(self, now: float) -> float:
        """Seconds the cycle has taken so far (frozen once it finished); without a cycle,
        the running suite's. It ticks while nothing happens, as a clock should."""
        if self.cycle_started_at is not None:
            start, end = self.cycle_started_at, self.cycle_finished_at
        elif self.run_started_at is not None:
            start, end = self.run_started_at, self.run_finished_at
        else:
            return 0.0
        return max(0.0, (end if end is not None else now) - start)

    @property
    def scores(self) -> list[float]:
        """The score of every finished round, in order (for the chart)."""
        return [r.score for _, r in sorted(self.rounds.items()) if r.score is not None]

    # -- helpers -----------------------------------------------------------

    def log(self, event: ev.Event, text: str) -> None:
        # time since the first event rather than the wall clock: it reads as
        # progress and does not depend on the time zone
        if self._first_at is None:
            self._first_at = event.at
        self._log.append(f"{format_duration(event.at - self._first_at)} {text}")
        if len(self._log) > LOG_LIMIT:
            del self._log[: len(self._log) - LOG_LIMIT]

    def note(self, text: str) -> None:
        """A log line that no event carries (the app's own news)."""
        self._log.append(text)

    def _unmade(self) -> None:
        """The round's candidates are all told: those without a version came to nothing."""
        for row in self.candidates.values():
            row.none = not row.version

    def _slot(self, round_no: int, slot: int, parent: str) -> CandidateRow:
        """The round's candidate in ``slot``; a new round's first starts the table afresh."""
        if round_no != self.population_round:
            self.population_round, self.candidates = round_no, {}
        row = self.candidates.get(slot)
        if row is None:
            row = self.candidates[slot] = CandidateRow(slot=slot, parent=parent)
        self._population_changed = True
        return row

    def _round(self, number: int) -> RoundRow:
        row = self.rounds.get(number)
        if row is None:
            row = self.rounds[number] = RoundRow(round=number)
        self._dirty_rounds[number] = row
        return row


def _cycle_started(s: DashboardState, e: ev.CycleStarted) -> None:
    s.cycle_id, s.prompt_id, s.version, s.status = e.cycle_id, e.prompt_id, e.version, "running"
    s.cycle_started_at, s.cycle_finished_at = e.at, None
    s.log(e, f"cycle {'resumed' if e.resumed else 'started'} on {e.prompt_id} v{e.version}")
    if e.judge_note:
        s.log(e, e.judge_note)
    for done in e.restored:  # a resumed cycle's rounds so far, the baseline first
        row = s._round(int(done["round"]))
        row.version, row.stage, row.status = done.get("version") or "", done.get("stage") or \
            ("baseline" if done["round"] == 0 else "improve"), "finished"
        row.score, row.ci_low, row.ci_high = done.get("score"), done.get("ci_low"), \
            done.get("ci_high")
        row.pass_rate, row.delta, row.accepted = done.get("pass_rate"), done.get("delta"), \
            done.get("accepted")
        row.cost = done.get("cost") or 0.0
        judge = done.get("judge_agreement")  # a dict when read back from an --events file
        row.judge = msgspec.convert(judge, JudgeKappa) if isinstance(judge, dict) else judge


def _round_started(s: DashboardState, e: ev.RoundStarted) -> None:
    s.current_round = e.round
    row = s._round(e.round)
    row.version, row.status, row.stage = e.version, "running", e.stage
    if e.stage == "confirm":
        s.log(e, f"round {e.round}: confirming the best candidate against v{e.version} on fresh samples")
    else:
        s.log(e, f"round {e.round} started on v{e.version}")


def _evaluation_started(s: DashboardState, e: ev.EvaluationStarted) -> None:
    if e.role == "candidate":
        s._round(e.round).version = e.version
        s.log(e, f"round {e.round}: evaluating candidate v{e.version}")


def _run_started(s: DashboardState, e: ev.RunStarted) -> None:
    s.run_id, s.run_version = e.run_id, e.version
    s.run_started_at, s.run_finished_at = e.at, None
    s.total, s.done, s.errors = e.iterations_in_all, e.done, 0
    s.cases = {}
    s._dirty_cases = {}
    s._run_reset = True
    s._run_errors_logged = 0
    s.status = "running"
    what = f"v{e.version}" if e.version else "the agent"
    s.log(e, f"evaluating {what}: {e.cases} cases x {e.iterations}")


def _case_finished(s: DashboardState, e: ev.CaseFinished) -> None:
    if s.run_id is not None and e.run_id != s.run_id:
        return  # a straggler from an earlier run
    s.done += 1
    row = s.cases.get(e.case_id)
    if row is None:
        row = s.cases[e.case_id] = CaseRow(e.case_id)
    row.done += 1
    if e.error is None or e.status == "terminated":
        row.turns.append(e.turns)  # an error cut the conversation short: its turns say nothing
    if e.status == "terminated":
        row.terminated += 1
        s.log(e, f"[limit] {e.case_id} #{e.iteration}: {e.error}")
    elif e.error is not None:
        s.errors += 1
        row.errors += 1
        row.last_error = e.error
        if s._run_errors_logged < ERROR_LOG_LIMIT:
            s._run_errors_logged += 1
            s.log(e, f"[error] {e.case_id} #{e.iteration}: {e.error}")
    else:
        if e.score is not None:
            row.scores.append(e.score)
        if e.passed:
            row.passed += 1
    s._dirty_cases[e.case_id] = row


def _run_finished(s: DashboardState, e: ev.RunFinished) -> None:
    if s.run_id is not None and e.run_id != s.run_id:
        return
    s.run_finished_at = e.at
    score = "-" if e.score is None else f"{e.score:.1f}"
    rate = "-" if e.pass_rate is None else pct(e.pass_rate)
    s.log(e, f"run {e.status}: score {score}, pass {rate}, errors {e.errors}, ${e.cost:.4f}")


def _suggestions(s: DashboardState, e: ev.SuggestionsProposed) -> None:
    of = f" for candidate {e.slot + 1} (from v{e.parent})" if e.parent else ""
    if e.parent:  # a population's candidate (a round of one names no parent)
        s._slot(e.round, e.slot, e.parent)
    s.log(e, f"round {e.round}: {plural(len(e.suggestions), 'suggestion')} proposed{of}")


def _screened(s: DashboardState, e: ev.CandidateScreened) -> None:
    row = s._slot(e.round, e.slot, e.parent)
    row.version, row.second_parent, row.gain = e.version, e.second_parent, e.gain
    row.screened, row.kept = True, e.kept
    s._unmade()  # a round's screens come once all its candidates were built
    gain = "no case judged" if e.gain is None else f"{e.gain:+.1f}"
    then = "goes on to the full evaluation" if e.kept else "ends here"
    s.log(e, f"round {e.round}: screen of v{e.version} (from v{e.parent}) on "
             f"{plural(e.cases, 'case')}: {gain}; {then}")


def _review(s: DashboardState, e: ev.ReviewDecided) -> None:
    edited = f", {e.edited} edited" if e.edited else ""
    s.log(e, f"review ({e.reviewer}): {e.approved} approved, {e.rejected} rejected{edited}")
    for x in e.suggestions:  # what the cycle's guard refused before review, and why
        if x.get("decision") == "rejected" and str(x.get("decided_by") or "").startswith(
                f"{LOOP} ("):
            source = (f" (from case {x['source_case']})"
                      if x.get("type") == "example" and x.get("source_case") else "")
            s.log(e, f"  refused {x.get('type')}{source}: {x.get('reason')}")


def _version(s: DashboardState, e: ev.VersionCreated) -> None:
    if e.slot is not None and e.round is not None:
        s._slot(e.round, e.slot, e.parent or "").version = e.version
    s.log(e, f"version {e.prompt_id} v{e.version} created ({e.source})")


def _frontier(s: DashboardState, e: ev.FrontierChanged) -> None:
    if e.versions != s.frontier:
        s.frontier = dict(e.versions)
        s._population_changed = True


def _candidate(s: DashboardState, e: ev.CandidateDecided) -> None:
    if e.round == s.population_round:  # the full evaluation's verdict on the kept candidate
        s._unmade()
        s._population_changed = True
        for c in s.candidates.values():
            if c.kept and c.version == e.version:
                c.accepted = e.accepted
                s._population_changed = True
    row = s._round(e.round)
    row.version = row.version or e.version
    row.accepted, row.delta = e.accepted, e.delta
    verdict = "accepted" if e.accepted else "rejected"
    delta = "" if e.delta is None else f" (delta {e.delta:+.1f})"
    if e.seen_delta is not None and e.held_out_delta is not None:
        # the gain on the cases the improver saw and on the held-out ones: a gap is overfitting
        delta += (f" (seen {e.seen_delta:+.1f} / held-out {e.held_out_delta:+.1f}, gap "
                  f"{e.seen_delta - e.held_out_delta:.1f})")
    reason = f": {e.reason}" if e.reason else ""
    s.log(e, f"candidate v{e.version} {verdict}{delta}{reason}")
    if e.accepted and row.stage == "confirm":  # exploring rounds leave head where it is
        s.version = e.version


def _round_finished(s: DashboardState, e: ev.RoundFinished) -> None:
    row = s._round(e.round)
    row.version = e.version or row.version
    row.score, row.ci_low, row.ci_high = e.score, e.ci_low, e.ci_high
    row.pass_rate, row.cost, row.status = e.pass_rate, e.cost, "finished"
    if e.accepted is not None:
        row.accepted = e.accepted
    if e.delta is not None:
        row.delta = e.delta
    row.judge = e.judge_agreement
    score = "-" if e.score is None else f"{e.score:.1f}"
    judge = f"; judge {e.judge_agreement.text()}" if e.judge_agreement else ""
    s.log(e, f"round {e.round} finished: v{e.version} score {score}{judge}")


def _cycle_finished(s: DashboardState, e: ev.CycleFinished) -> None:
    s.status, s.stop_reason = "finished", e.reason
    s.cycle_finished_at = e.at
    if e.final_version:
        s.version = e.final_version
    s.log(e, f"cycle finished: {e.reason}" + (f" (final v{e.final_version})" if e.final_version else ""))


def _model_called(s: DashboardState, e: ev.ModelCalled) -> None:
    s._called_cost += e.cost
    s.cost_estimated = s.cost_estimated or e.cost_estimated
    if not s._cost_reported:
        s.cost = s._called_cost


def _cost_updated(s: DashboardState, e: ev.CostUpdated) -> None:
    s._cost_reported = True
    s.cost, s.cost_limit = e.total, e.limit if e.limit is not None else s.cost_limit
    s.cost_estimated = s.cost_estimated or e.estimated


def _concurrency(s: DashboardState, e: ev.ConcurrencyChanged) -> None:
    before = s.throttled.get(e.provider)
    s.throttled[e.provider] = e
    if before is None or e.limit < before.limit:
        s.log(e, f"{e.provider} is rate limiting: {e.limit} of {e.ceiling} calls in flight "
                 f"({plural(e.rate_limited, 'rate-limited answer')} so far)")


def _batch(s: DashboardState, e: ev.BatchProgress) -> None:
    if e.milestone:  # its polls would flood the log
        s.log(e, e.logged)


_HANDLERS = {
    ev.CycleStarted: _cycle_started,
    ev.RoundStarted: _round_started,
    ev.EvaluationStarted: _evaluation_started,
    ev.RunStarted: _run_started,
    ev.CaseFinished: _case_finished,
    ev.RunFinished: _run_finished,
    ev.SuggestionsProposed: _suggestions,
    ev.ReviewDecided: _review,
    ev.VersionCreated: _version,
    ev.CandidateDecided: _candidate,
    ev.CandidateScreened: _screened,
    ev.FrontierChanged: _frontier,
    ev.RoundFinished: _round_finished,
    ev.CycleFinished: _cycle_finished,
    ev.ModelCalled: _model_called,
    ev.CostUpdated: _cost_updated,
    ev.ConcurrencyChanged: _concurrency,
    ev.BatchProgress: _batch,
}
