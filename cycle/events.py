"""Typed events: the spine the loop, the runner and the models talk through.

Producers call ``bus.emit(event)``; subscribers (the store recorder, console
progress, the TUI, the JSONL log) are plain callables. The core never imports
a subscriber. Events are small frozen structs so that they serialise to
JSON as they are (``event.to_dict()``).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TextIO

from msgspec import Struct, field, to_builtins

from cycle.records.cycles import JudgeKappa
from cycle.records.scope import NO_SCOPE, CallScope

Subscriber = Callable[["Event"], None]


class Event(Struct, frozen=True, kw_only=True):
    """Base of every event. ``kind`` is the stable name used in JSONL logs."""

    kind: ClassVar[str] = "event"
    at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON values (nested structs, a call's scope, as objects)."""
        return {"kind": self.kind, **to_builtins(self, enc_hook=str)}


# -- model calls -----------------------------------------------------------


class ModelCalled(Event, frozen=True, kw_only=True):
    """One model call finished (or failed after its retries)."""

    kind: ClassVar[str] = "model_called"
    model: str
    #: who made the call: "agent", "judge", "improver", "user_sim", ...
    role: str = "agent"
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cost_estimated: bool = False
    latency: float = 0.0
    cache_hit: bool = False
    attempts: int = 1
    error: str | None = None
    #: where the call belongs (its run, round, case, iteration): its cost's attribution
    scope: CallScope = NO_SCOPE
    #: the call journal already holds this call's row (cycle.llm.journal): a paid call
    #: recorded when it arrived, or a replay of one paid before a kill
    journaled: bool = False


class CostUpdated(Event, frozen=True, kw_only=True):
    kind: ClassVar[str] = "cost_updated"
    total: float
    by_role: dict[str, float] = field(default_factory=dict)
    limit: float | None = None
    estimated: bool = False


class ConcurrencyChanged(Event, frozen=True, kw_only=True):
    """A provider's limit of calls in flight changed: cut by rate-limited answers (429),
    or grown back by answers, up to the configured ``ceiling`` (cycle.llm.limit); also
    sent for every 429, cut or not, so that ``rate_limited`` is always the whole count."""

    kind: ClassVar[str] = "concurrency_changed"
    provider: str
    limit: int
    ceiling: int
    #: rate-limited answers from this provider so far
    rate_limited: int = 0

    @property
    def shown(self) -> str:
        """As the progress line and the TUI's status say it."""
        return f"{self.provider} {self.limit}/{self.ceiling} in flight ({self.rate_limited} x 429)"


class BatchProgress(Event, frozen=True, kw_only=True):
    """A provider batch job was submitted, polled or ended (cycle.llm.batch); or a
    provider's calls went live because it has no batch API (``state`` 'live')."""

    kind: ClassVar[str] = "batch_progress"
    model: str
    job_id: str = ""
    #: the provider's word for the job's state, or 'submitted', 'resumed', 'live'
    state: str
    #: the job has ended (its answers handed out)
    done: bool = False
    #: calls in the job, and how many the provider says it answered and failed so far
    total: int = 0
    completed: int = 0
    failed: int = 0
    note: str = ""

    @property
    def shown(self) -> str:
        if self.state == "live":
            return f"{self.model}: live calls ({self.note})"
        if self.state in ("submitted", "resumed"):
            calls = f" ({self.total} calls)" if self.total else ""
            return f"{self.model} batch {self.job_id} {self.state}{calls}"
        counted = f" {self.completed}/{self.total} answered" if self.total else ""
        return f"{self.model} batch {self.job_id} {self.state}{counted}"

    @property
    def logged(self) -> str:
        """As a log says a job's start or end (with why it ended as it did)."""
        return self.shown + (f": {self.note}" if self.note and self.done else "")

    @property
    def milestone(self) -> bool:
        """A job's start or end, or calls going live: what a log says (not every poll)."""
        return self.done or self.state in ("submitted", "resumed", "live")


# -- a suite run -----------------------------------------------------------


class RunStarted(Event, frozen=True, kw_only=True):
    kind: ClassVar[str] = "run_started"
    run_id: str
    prompt_id: str | None = None
    version: str | None = None
    cases: int = 0
    iterations: int = 1
    #: the run's iterations in all, cases with iterations of their own counted as they run
    #: (0, from an older events file: ``cases * iterations``)
    total: int = 0
    #: of them, judged before this start (a resumed run's): counted done from the start
    done: int = 0

    @property
    def iterations_in_all(self) -> int:
        return self.total or self.cases * max(1, self.iterations)


class CaseFinished(Event, frozen=True, kw_only=True):
    """One iteration of one case was run and judged (or errored)."""

    kind: ClassVar[str] = "case_finished"
    run_id: str
    case_id: str
    iteration: int
    score: float | None
    passed: bool | None
    error: str | None = None
    cost: float = 0.0
    latency: float = 0.0
    #: passed, failed, error, or terminated (a limit ended it: not an error)
    status: str = ""
    #: user turns (more than 1 in a conversation)
    turns: int = 1


class RunFinished(Event, frozen=True, kw_only=True):
    kind: ClassVar[str] = "run_finished"
    run_id: str
    score: float | None
    pass_rate: float | None
    errors: int = 0
    cost: float = 0.0
    status: str = "finished"


# -- the improvement cycle -------------------------------------------------


class CycleStarted(Event, frozen=True, kw_only=True):
    kind: ClassVar[str] = "cycle_started"
    cycle_id: str
    prompt_id: str
    version: str
    resumed: bool = False
    #: the cycle's configuration (the improve section and models), stored with it
    config: dict[str, Any] = field(default_factory=dict)
    #: a resumed cycle's finished rounds, as stored (round, version, stage, score,
    #: ci_low, ci_high, pass_rate, delta, accepted, cost, judge_agreement: its judge's
    #: JudgeKappa): what a view shows before the rounds still to come
    restored: tuple[dict[str, Any], ...] = ()
    #: the judge's agreement with people, or that it is uncalibrated (None: the cycle
    #: has no LLM criterion)
    judge_note: str | None = None


class RoundStarted(Event, frozen=True, kw_only=True):
    """A round starts: ``stage`` "baseline" (round 0), "improve", or "confirm" (the last:
    fresh evaluations of the starting version and the best candidate, before head moves)."""

    kind: ClassVar[str] = "round_started"
    cycle_id: str
    round: int
    #: the version the round improves (a confirmation: the one head points at)
    version: str
    stage: str = "improve"
    #: a confirmation: why exploring stopped (the stop condition that held; stored in the
    #: round's reason until its decision replaces it)
    reason: str = ""


class EvaluationStarted(Event, frozen=True, kw_only=True):
    """A round starts (or resumes) evaluating a version: the baseline or a candidate."""

    kind: ClassVar[str] = "evaluation_started"
    cycle_id: str
    round: int
    #: "baseline" (the incumbent) or "candidate"
    role: str
    version: str
    run_id: str


class SuggestionsProposed(Event, frozen=True, kw_only=True):
    kind: ClassVar[str] = "suggestions_proposed"
    cycle_id: str
    round: int
    suggestions: list[dict[str, Any]] = field(default_factory=list)
    #: the candidate of the round's population they are for (0: a round of one), and the
    #: version they edit (None: the incumbent)
    slot: int = 0
    parent: str | None = None


class ReviewDecided(Event, frozen=True, kw_only=True):
    kind: ClassVar[str] = "review_decided"
    cycle_id: str
    round: int
    approved: int
    rejected: int
    edited: int = 0
    reviewer: str = "auto"
    #: approved suggestions that could not be applied (decision "skipped", with the reason)
    skipped: int = 0
    #: every suggestion with its decision, reason, edited value and ``applied`` flag
    suggestions: list[dict[str, Any]] = field(default_factory=list)
    slot: int = 0


class VersionCreated(Event, frozen=True, kw_only=True):
    kind: ClassVar[str] = "version_created"
    prompt_id: str
    version: str
    parent: str | None = None
    source: str = "manual"
    #: set when the improvement cycle made it as a round's candidate
    cycle_id: str | None = None
    round: int | None = None
    #: unified diff from the parent
    diff: str = ""
    #: the candidate of the round's population it is (None: not one of a population)
    slot: int | None = None


class CandidateDecided(Event, frozen=True, kw_only=True):
    """A candidate version was accepted or rejected: while exploring (head waits for the
    confirmation), or by the confirmation that moves head."""

    kind: ClassVar[str] = "candidate_decided"
    cycle_id: str
    round: int
    version: str
    accepted: bool
    reason: str = ""
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    #: with held-out cases: the mean gain on the cases the improver saw and on the others
    seen_delta: float | None = None
    held_out_delta: float | None = None
    #: with improve.objective: cost: the candidate's mean agent cost per case, and its
    #: paired difference with the incumbent's (negative: cheaper)
    cost: float | None = None
    cost_delta: float | None = None
    #: each pairwise criterion's comparison of the candidate with the incumbent (wins,
    #: losses, ties, pairs, order_flips, p_value: cycle.loop.acceptance.PairwiseTest)
    pairwise: list[dict[str, Any]] = field(default_factory=list)


class CandidateScreened(Event, frozen=True, kw_only=True):
    """One candidate of a round's population, scored on the round's minibatch of cases
    against its parent's scores on the same cases: the best that gained goes on to the
    full evaluation (``kept``), the others end here."""

    kind: ClassVar[str] = "candidate_screened"
    cycle_id: str
    round: int
    slot: int
    version: str
    parent: str
    run_id: str
    #: mean gain over the minibatch's cases (None: no case was judged)
    gain: float | None
    cases: int
    kept: bool = False
    #: a merge's other parent: the version whose edits it brought to ``parent``
    second_parent: str | None = None


class FrontierChanged(Event, frozen=True, kw_only=True):
    """The Pareto frontier of a population's cycle (cycle.loop.population.frontier): the
    versions evaluated in full that are best on at least one case, each with the number of
    cases it is best on, most first. Told as a round picks its parents from it and again
    once its candidate's full evaluation joined the pool."""

    kind: ClassVar[str] = "frontier_changed"
    cycle_id: str
    round: int
    #: version -> the cases it is best on (ties included), in the frontier's order
    versions: dict[str, int] = field(default_factory=dict)


class RoundFinished(Event, frozen=True, kw_only=True):
    kind: ClassVar[str] = "round_finished"
    cycle_id: str
    round: int
    version: str
    score: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    pass_rate: float | None = None
    accepted: bool | None = None
    cost: float = 0.0
    #: the incumbent's score, beside the evaluated version's
    incumbent_score: float | None = None
    delta: float | None = None
    #: cost of the round split by role: agent, judge, improver
    cost_by_role: dict[str, float] = field(default_factory=dict)
    #: why the round ended as it did (kept or not, head moved or not)
    reason: str = ""
    #: "baseline", "improve" or "confirm"
    stage: str = "improve"
    #: round 0: the smallest true gain this suite detects 80% of the time (points), with
    #: the cases and iterations it is for
    detectable: float | None = None
    cases: int | None = None
    iterations: int | None = None
    #: the judge's agreement with people, shown beside the score (its labels 0: the judge
    #: is uncalibrated); None: no LLM criterion, so no model judged the round
    judge_agreement: JudgeKappa | None = None


class CycleFinished(Event, frozen=True, kw_only=True):
    kind: ClassVar[str] = "cycle_finished"
    cycle_id: str
    reason: str
    final_version: str | None = None
    score: float | None = None
    #: "finished", "interrupted" (Ctrl-C; resumable) or "failed"
    status: str = "finished"
    total_cost: float = 0.0


class EventBus:
    """Delivers each event to every subscriber, in the order they subscribed.

    A subscriber that raises stops the emit and the error reaches the emitter:
    the store's recorders are subscribers, and a recorder that cannot write (a
    full disk, a locked file) must stop the run rather than let it go on paying
    for work that ``--resume`` would not find. A subscriber that may fail without
    consequence (a display) catches its own errors.
    """

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Add a subscriber; returns a function that removes it."""
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

    def emit(self, event: Event) -> None:
        for subscriber in list(self._subscribers):
            subscriber(event)


class JsonlSink:
    """Writes every event as one JSON line (``--events FILE``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO = self.path.open("a", encoding="utf-8")
        self._written = 0
        #: why the file stopped (a full disk): the events after it were not written, and
        #: the cycle went on (its store has them); the command says so at its end
        self.failed: str | None = None

    def __call__(self, event: Event) -> None:
        if self.failed is not None:
            return
        try:
            self._file.write(json.dumps(event.to_dict(), default=str) + "\n")
            self._file.flush()
            self._written += 1
        except OSError as e:
            self.failed = (f"the events file {self.path} stopped after {self._written} "
                           f"events: {e.strerror or e} (the store has everything)")
            with contextlib.suppress(OSError):  # its buffer cannot be written either
                self._file.close()

    def close(self) -> None:
        if not self._file.closed:
            try:
                self._file.close()
            except OSError as e:  # the last buffered line did not fit
                self.failed = self.failed or (f"the events file {self.path}: {e.strerror or e} "
                                              "(the store has everything)")
