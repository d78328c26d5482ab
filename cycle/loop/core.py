"""The improvement cycle: evaluate, propose, review, build a candidate, evaluate, decide.

Round 0 evaluates the version ``head`` points at (the baseline). Each later
round explores: the improver proposes suggestions from the incumbent's
low-scoring cases (never the held-out ones), the reviewer decides, the approved
suggestions make a candidate version (saved with ``move_head=False``), the
candidate is evaluated on the same cases and iterations, and the acceptance
rule, at a loose one-sided 10%, decides whether the next round builds on it.
Stop conditions are checked after round 0 and after each round.

``head`` moves once, at the end, after a confirmation round: fresh evaluations
(new samples, never the cache's answers of another evaluation) of the starting
version and of the best candidate, compared paired at one-sided 2.5%. Why: each
exploring round is a chance for noise to look like a gain, so testing every
round at 2.5% and moving head on each win lets a 5-round cycle of truly equal
candidates promote one about 10% of the time, and the winning sample, kept as
the incumbent's score, overstates it. The confirmation's samples are independent
of the selection, so a cycle promotes an equal or worse version with
probability at most P(exploring kept one) x 2.5%, and the score it reports for
the promoted version is unbiased. When a comparison is inconclusive (a gain,
but the bound reaches zero) it runs more iterations of the cases whose
iterations varied, in both versions, up to ``max_iterations``, and looks again:
in an exploring round at the exploring level (it only chooses what the
confirmation tests), in the confirmation at 1.25% a look (Bonferroni), so the
2.5% holds. ``acceptance: always`` moves
head every round, with no confirmation (no error control: the user asked).
benchmarks/bench_acceptance.py measures all of it on a world with known truth.

Everything is told through events; the store recorder writes cycles, rounds
and suggestions as they happen, and the runner writes results and calls, so a
killed cycle resumes (``run(resume=...)``) without paying again for what is
stored: run ids are deterministic (``<cycle>-r<round>``) and the runner skips
stored iterations.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

import msgspec
from msgspec import Struct, field

from cycle import events as ev
from cycle.agents import Agent
from cycle.cases import CaseList, TestCase
from cycle.errors import (
    BudgetExceededError,
    ConfigError,
    CycleError,
    EvalError,
    ProtectedLabelError,
    describe,
)
from cycle.evals.results import load_run
from cycle.evals.runner import Runner
from cycle.improve.apply import apply_suggestions, prompt_diff
from cycle.improve.guard import copies, example_faults, leaks, repeats
from cycle.improve.improver import (
    CostBrief,
    ExamplesBrief,
    Improver,
    ImproverInput,
    LowCase,
    aggregates,
    exemplar_cases,
    fit_cases,
    low_cases,
)
from cycle.judge import Judge
from cycle.llm.budget import Budget
from cycle.loop.acceptance import (
    CONFIRM_ALPHA,
    CONFIRM_LOOKS,
    EXPLORE_ALPHA,
    AcceptanceDecision,
    AcceptanceRule,
    Evaluation,
    decide,
    detectable_gain,
    paired_scores,
)
from cycle.loop.cost import (
    Objective,
    decide_cheaper,
    mean_cost,
    model_switch,
    money,
    switched_model,
)
from cycle.loop.ledger import Ledger
from cycle.loop.merging import (
    Conflict,
    MergePair,
    conflict_note,
    merge_pair,
    merge_prompts,
    merge_suggestions,
)
from cycle.loop.review import ReviewEnded, Reviewer, decider
from cycle.loop.stop import CycleState, RoundRecord, StopCondition, cost_cap, has_limit, target_of
from cycle.records import (
    JudgeKappa,
    Prompt,
    RejectedSuggestion,
    ReviewRequest,
    RunResult,
    Suggestion,
    Version,
)
from cycle.records.scope import CallScope
from cycle.store import Store, locks
from cycle.words import plural

Bump = Literal["patch", "minor", "major"]

#: cases carrying this tag must not go from pass to fail (like improve.required_cases)
REQUIRED_TAG = "required"


def run_id_for(cycle_id: str, round_no: int) -> str:
    """The run of the version a round evaluates: deterministic, so that resume reuses it."""
    return f"{cycle_id}-r{round_no}"


class CycleResult(Struct, frozen=True):
    """How a cycle ended. The full record is in the store (cycle report)."""

    cycle_id: str
    prompt_id: str
    status: str
    stop_reason: str
    initial_version: str
    final_version: str
    initial_score: float | None
    final_score: float | None
    rounds: tuple[RoundRecord, ...] = ()
    total_cost: float = 0.0
    cost_by_role: dict[str, float] = field(default_factory=dict)
    offline: bool = False
    #: the version head was at when the cycle started: the initial version, or the one it
    #: stands for (Loop's ``head_of_start``); what undoing the cycle rolls back to
    head_before: str = ""

    @property
    def improvement_rounds(self) -> int:
        return sum(1 for r in self.rounds if r.stage == "improve")


class _Incumbent(Struct):
    version: Version
    result: RunResult
    evaluation: Evaluation


class _Merge(Struct, frozen=True):
    """A round's merge: the pair, the merged prompt and its conflicts, and the first
    version's results on the cases the second wins."""

    pair: MergePair
    prompt: Prompt
    conflicts: list[Conflict]
    low: list[LowCase]


class _Stop(Exception):
    """Ends the cycle early with a reason (the cost cap): nothing more is paid for."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Explored(_Stop):
    """Ends exploring (nothing left to improve); the confirmation still runs."""


class _Waiting(_Stop):
    """The confirmation waits for people's labels: the cycle ends interrupted, and its
    resume decides again (its fresh runs are stored: nothing is paid twice)."""


def evaluation_of(result: RunResult, version: str) -> Evaluation:
    """What the acceptance rules need of a run."""
    return Evaluation(
        run_id=result.run_id,
        version=version,
        score=result.score,
        ci_low=result.suite.score.ci_low,
        ci_high=result.suite.score.ci_high,
        pass_rate=result.suite.pass_rate,
        case_scores=result.case_means,
        case_passed={k: c.status == "passed" for k, c in result.cases.items() if c.status != "error"},
        errored_cases=frozenset(k for k, c in result.cases.items() if c.stats.mean is None),
        errors=result.suite.errors,
        cost=result.suite.cost,
    )


AgentFactory = Callable[[Prompt], Agent]
"""Builds the agent that plays a prompt version (the loop evaluates several versions)."""


class LoopSettings(Struct, frozen=True):
    """How a cycle evaluates and improves, whatever configuration it came from."""

    #: when a candidate replaces the incumbent (see cycle.loop.acceptance)
    acceptance: AcceptanceRule = "significant"
    #: cases scoring below this go to the improver
    low_score: float = 70.0
    #: token budget for the low cases shown to the improver
    context_tokens: int = 6000
    #: how candidate versions are numbered
    bump: Bump = "patch"
    #: case ids that must not go from pass to fail (cases tagged 'required' count too)
    required_cases: frozenset[str] = frozenset()
    #: each evaluation: iterations per case, cases in flight, seconds per case
    iterations: int = 3
    concurrency: int = 8
    timeout: float | None = 120.0
    stop_on_first_failure: bool = False
    #: cases the improver never sees: decisions report them apart and reject a candidate
    #: they did not gain with (overfitting to the cases shown)
    held_out: frozenset[str] = frozenset()
    #: iterations per case the confirmation may grow to when inconclusive (None: twice
    #: ``iterations``)
    max_iterations: int | None = None
    #: variables an edit may make the prompt read besides the case inputs' (production
    #: gives them); ``expected`` only if named here (cycle.improve.guard.leaks)
    allowed_variables: frozenset[str] = frozenset()
    #: head moves only while the judge's kappa with people (its 95% lower bound, each LLM
    #: criterion) is at least this (cycle.judge.calibration.gate); None: no gate
    min_agreement: float | None = None
    #: head moves only if the confirmation's gain holds corrected by people's labels of
    #: this many outputs of each version's fresh run (each LLM criterion); the cycle
    #: waits for them (interrupted, resumable). None: the judged gain decides
    confirm_labels: int | None = None
    #: candidates a round proposes, each from a parent on the Pareto frontier, screened on
    #: a minibatch of ``screen_cases`` cases before the best gets the full evaluation
    #: (cycle.loop.population); 1: one candidate, from the incumbent, no screen
    population: int = 1
    screen_cases: int = 8
    #: one of a population's candidates a round may merge two frontier versions whose
    #: gains fall on different cases (cycle.loop.merging)
    merge: bool = True
    #: the most few-shot examples the improver may make the prompt hold, drawn from
    #: improvement cases (improve.examples.max); 0: it proposes none
    examples: int = 0
    #: what a candidate must do to replace the incumbent: score higher (the acceptance
    #: rule), or (``cost``) cost less per case and score no worse than ``margin`` points
    #: below it (cycle.loop.cost)
    objective: Objective = "score"
    margin: float = 0.0
    #: with the cost objective: agent models a round may move the prompt to (its
    #: params.model), tried in this order before the improver is asked for cheaper edits
    models: tuple[str, ...] = ()


class Loop:
    """Runs (or resumes) one improvement cycle of a prompt, from objects.

    ``cycle.assemble.build_loop`` makes one from a cycle.yaml; in Python::

        loop = Loop(start=store.resolve("support@head"), cases=cases,
                    agent=lambda prompt: PromptAgent(prompt, model), judge=judge,
                    improver=Improver(model), reviewer=AutoReviewer(), store=store,
                    stop=parse_stop({"max_rounds": 3}))
        result = await loop.run()
    """

    def __init__(
        self,
        *,
        start: Version | Callable[[], Version],
        cases: Sequence[TestCase],
        agent: AgentFactory,
        judge: Judge,
        improver: Improver,
        reviewer: Reviewer,
        store: Store,
        stop: StopCondition,
        settings: LoopSettings | None = None,
        prompt_id: str | None = None,
        budget: Budget | None = None,
        bus: ev.EventBus | None = None,
        record: Mapping[str, Any] | None = None,
        run_config: Mapping[str, Any] | None = None,
        closers: Sequence[Callable[[], Awaitable[None]]] = (),
        head_of_start: Callable[[Version], str] | None = None,
    ) -> None:
        """``start``: the version round 0 evaluates, or a function giving it (called only
        when a new cycle starts: a resumed one continues from its stored versions).
        ``prompt_id`` is needed when ``start`` is a function. ``record``: settings stored
        with the cycle (the cycle.yaml they came from; ``resume_command``, when not
        ``cycle improve CONFIG``, the command that resumes it; ``low_score_setting``, when
        not improve.low_score, what sets the low score); ``run_config``: stored with each
        run.
        ``closers`` run when the cycle ends (the models the assembler opened).
        ``head_of_start``: for a start saved off head that stands for the version head is
        at, that version (``cycle judge improve`` starts from the judge prompt carrying
        cycle.yaml's rubrics, which runs read from cycle.yaml, not from the prompt): head
        moves from it, and the cycle says head is there."""
        if isinstance(start, Version):
            prompt_id = prompt_id or start.prompt_id
        if not prompt_id:
            raise ValueError("Loop needs prompt_id when start is a function")
        if not has_limit(stop):
            raise ConfigError(
                f"the stop conditions ({stop.describe()}) may never hold: the cycle could run forever",
                field="improve.stop",
                hint="Add a limit, e.g. stop: {any: [{target_score: 90}, {max_rounds: 5}]}",
            )
        self._start = start
        self._head_of_start = head_of_start
        self._head_before = ""
        self.prompt_id = prompt_id
        self.cases = CaseList.of(cases)
        self.agent_for = agent
        self.judge = judge
        #: the judge's labels when its kappa was last measured, and that kappa: a round
        #: measures it again only when the labels changed (a bootstrap of thousands of
        #: labels takes a second or more)
        self._kappa: tuple[list[Any], JudgeKappa] | None = None
        self.improver = improver
        self.reviewer = reviewer
        self.store = store
        self.stop = stop
        self.settings = settings or LoopSettings()
        self.budget = budget if budget is not None else Budget(cost_cap(stop))
        self.bus = bus or ev.EventBus()
        self.record = dict(record or {})
        self.run_config = dict(run_config or {})
        self._closers = list(closers)
        self.low_score = self.settings.low_score
        #: head moves only after a confirmation on fresh samples (not with 'always')
        self._confirms = self.settings.acceptance != "always"
        #: the version head points at, with its evaluation (set by round 0)
        self._head: _Incumbent | None = None
        #: the cycle's rows and the state derived from them: the loop writes and reads
        #: nothing of the store but through it (and the runner's runs)
        self.ledger = Ledger(store, self.bus, prompt_id=prompt_id, budget=self.budget)
        #: every version evaluated in full, with its evaluation: the population's parents
        self._pool: dict[str, _Incumbent] = {}
        #: the pairs of versions merged (or tried) this cycle
        self._merged: set[frozenset[str]] = set()
        self._offline = False
        self._started = time.monotonic()

    @property
    def cycle_id(self) -> str:
        return self.ledger.cycle_id

    @property
    def required_cases(self) -> frozenset[str]:
        tagged = {c.id for c in self.cases if REQUIRED_TAG in c.tags}
        return frozenset(tagged | self.settings.required_cases)

    def _head_at(self) -> str:
        """The version head is at while this cycle holds it."""
        assert self._head is not None
        v = self._head.version.version
        return self._head_before if v == self._initial.version else v

    def _starting_version(self) -> Version:
        return self._start if isinstance(self._start, Version) else self._start()

    @property
    def _by_cost(self) -> bool:
        return self.settings.objective == "cost"

    def _judged(self, result: RunResult, version: str) -> Evaluation:
        """What the acceptance rules need of a run; with the cost objective, each case's
        agent cost too (read from the run's stored calls)."""
        evaluation = evaluation_of(result, version)
        if not self._by_cost:
            return evaluation
        return msgspec.structs.replace(
            evaluation, case_costs=self.store.runs.agent_case_costs(result.run_id))

    # -- the cycle ------------------------------------------------------------

    async def run(self, *, resume: str | bool | None = None,
                  take_over: bool = False) -> CycleResult:
        """Run a new cycle, or resume one (``resume``: a cycle id, or True for the latest
        interrupted cycle of this prompt). The cycle's lease (cycle.store.locks) is held
        while it runs: a second process resuming it refuses before it writes anything;
        ``take_over``: take a lease another machine holds."""
        prompt_id = self.prompt_id
        stop_at: int | None = None
        incumbent: _Incumbent | None = None
        try:
            confirming: str | None = None
            if resume:
                start, incumbent, next_round, confirming = await self._restore(resume)
            else:
                start = self._starting_version()
                self.ledger.new_cycle()
                next_round = 0
            locks.acquire(self.store, f"cycle:{self.cycle_id}", what=f"cycle {self.cycle_id}",
                          resume_hint=self._resume_command(), take_over=take_over)
            self._leased = True
            self._unsubscribe = [self.ledger.subscribe()]
            restored = self.ledger.restored() if resume else ()
            self.bus.emit(ev.CycleStarted(
                cycle_id=self.cycle_id, prompt_id=prompt_id, version=start.version,
                resumed=bool(resume), config=self._config_record(), restored=restored,
                judge_note=self._judge_note(),
            ))
            self._initial = start
            self._head_before = (start.version if self._head_of_start is None
                                 else self._head_of_start(start))
            try:
                if incumbent is None:
                    incumbent = await self._baseline(start)
                round_no = max(next_round, 1)
                if confirming is None:
                    try:
                        confirming = self._check_stop(incumbent)
                        while confirming is None:
                            stop_at = round_no
                            incumbent = await self._round(round_no, incumbent)
                            confirming = self._check_stop(incumbent)
                            round_no += 1
                    except _Explored as s:
                        confirming = s.reason
                reason = confirming
                if self._confirms and incumbent.version.version != self._head.version.version:
                    stop_at = round_no
                    reason = await self._confirm(round_no, incumbent, confirming)
            except _Waiting as w:
                return self._finish(w.reason, status="interrupted")
            except _Stop as s:
                reason = s.reason + self._unconfirmed(incumbent)
                self.ledger.mark_stopped()
            except BudgetExceededError as e:
                reason = self._budget_reason(stop_at, e) + self._unconfirmed(incumbent)
                self.ledger.mark_stopped()
            return self._finish(reason, status="finished")
        except (asyncio.CancelledError, KeyboardInterrupt):
            if self.cycle_id:
                where = f" during round {stop_at}" if stop_at is not None else ""
                self._emit_end(
                    status="interrupted",
                    reason=f"interrupted{where}; resume with: {self._resume_command()}",
                )
            raise
        except ReviewEnded as e:  # a pipe of answers ran dry: resumable, as a Ctrl-C is
            if not self.cycle_id:
                raise
            self._emit_end(status="interrupted",
                           reason=f"{e.message}; resume with: {self._resume_command()}")
            raise ReviewEnded(e.message, hint="The cycle is saved. Review in a terminal, or "
                              "give one answer a line on standard input, and resume with: "
                              f"{self._resume_command()}") from None
        except CycleError as e:
            if self.cycle_id and getattr(self, "_initial", None) is not None:
                self._emit_end(status="failed", reason=describe(e))
            raise
        finally:
            for unsubscribe in getattr(self, "_unsubscribe", []):
                unsubscribe()
            for close in self._closers:
                await close()
            if getattr(self, "_leased", False):
                locks.release(self.store, f"cycle:{self.cycle_id}")

    def _config_record(self) -> dict[str, Any]:
        return {
            **self.record,
            "improver_version": self.improver.version,
            "iterations": self.settings.iterations,
            "cases": len(self.cases),
            "pass_threshold": self.judge.threshold,
            "budget": self.budget.limit,
            "held_out": sorted(self.settings.held_out),
        }

    def _emit_end(self, *, status: str, reason: str, final: str | None = None,
                  score: float | None = None) -> None:
        self.bus.emit(ev.CycleFinished(
            cycle_id=self.cycle_id, reason=reason, final_version=final, score=score,
            status=status, total_cost=self.budget.spent,
        ))

    def _finish(self, reason: str, *, status: str) -> CycleResult:
        head = self._head
        final = head.version if head else self._initial
        final_score = head.evaluation.score if head else None
        self._emit_end(status=status, reason=reason, final=final.version, score=final_score)
        rounds = self.ledger.rounds
        initial = next((r for r in rounds if r.round == 0), None)
        return CycleResult(
            cycle_id=self.cycle_id, prompt_id=self.prompt_id, status=status, stop_reason=reason,
            initial_version=self._initial.version, final_version=final.version,
            head_before=self._head_before,
            initial_score=initial.score if initial else None, final_score=final_score,
            rounds=tuple(rounds), total_cost=self.budget.spent,
            cost_by_role=self.ledger.cost_by_role(),
            offline=self._offline or self.improver.offline,
        )

    def _budget_reason(self, round_no: int | None, e: BudgetExceededError | None = None) -> str:
        limit = self.budget.limit or (e.limit if e else 0.0)
        where = f"; round {round_no} was stopped mid-way and its state saved" if round_no else ""
        if self.budget.refused is not None:
            where += (f"; the next call's worst case (${self.budget.refused:.4f}) did not fit "
                      "what was left (set max_tokens in the prompt's params to reserve less per call)")
        return f"max_cost: ${self.budget.spent:.4f} spent of the ${limit:g} cap{where}"

    # -- stop conditions ---------------------------------------------------------

    def _state(self, incumbent: _Incumbent) -> CycleState:
        return CycleState(
            rounds=tuple(self.ledger.rounds),
            incumbent_score=incumbent.evaluation.score,
            total_cost=self.budget.spent,
            elapsed=self.ledger.elapsed_before + time.monotonic() - self._started,
            budget_exhausted=self.budget.exceeded,
        )

    def _check_stop(self, incumbent: _Incumbent) -> str | None:
        return self.stop.check(self._state(incumbent))

    # -- evaluating ------------------------------------------------------------------

    async def _evaluate(self, version: Version, round_no: int, role: str, *, run_id: str | None = None,
                        iterations_for: Mapping[str, int] | None = None,
                        only: Sequence[str] | None = None, iterations: int | None = None,
                        ) -> RunResult:
        """``only``: these cases (a screen's minibatch), ``iterations`` each."""
        run_id = run_id or run_id_for(self.cycle_id, round_no)
        agent = self.agent_for(version.prompt)  # a clear error for agents the prompt cannot reach
        self.bus.emit(ev.EvaluationStarted(cycle_id=self.cycle_id, round=round_no, role=role,
                                           version=version.version, run_id=run_id))
        s = self.settings
        wanted = None if only is None else set(only)
        cases = self.cases if wanted is None else [c for c in self.cases if c.id in wanted]
        runner = Runner(agent=agent, judge=self.judge, cases=cases,
                        iterations=iterations or s.iterations,
                        concurrency=s.concurrency, timeout=s.timeout, store=self.store, bus=self.bus,
                        stop_on_first_failure=s.stop_on_first_failure, iterations_for=iterations_for)
        try:
            result = await runner.run(run_id=run_id, meta={
                "prompt_id": version.prompt_id, "version": version.version,
                "config": self.run_config, "cycle_id": self.cycle_id, "round": round_no,
                "role": role, "fresh": True,  # never the answers of another evaluation
            })
        finally:
            await agent.aclose()
        self._offline = self._offline or result.offline
        if self.budget.exceeded or result.status != "finished":
            # the runner stopped scheduling: the cap was reached mid-run; what was judged is stored
            raise _Stop(self._budget_reason(round_no))
        return result

    async def _baseline(self, start: Version) -> _Incumbent:
        self.bus.emit(ev.RoundStarted(cycle_id=self.cycle_id, round=0, version=start.version,
                                      stage="baseline"))
        result = await self._evaluate(start, 0, "baseline")
        inc = self._head = _Incumbent(start, result, self._judged(result, start.version))
        self._pool[start.version] = inc
        cost = self.ledger.round_cost(0)
        judged = [c for c in result.cases.values() if c.stats.mean is not None]
        iterations = self.settings.iterations
        self.bus.emit(ev.RoundFinished(
            cycle_id=self.cycle_id, round=0, version=start.version, score=result.score,
            ci_low=result.suite.score.ci_low, ci_high=result.suite.score.ci_high,
            pass_rate=result.suite.pass_rate, cost=sum(cost.values()), cost_by_role=cost,
            incumbent_score=result.score,
            detectable=detectable_gain([c.stats.sd or 0.0 for c in judged], len(judged), iterations),
            cases=len(judged), iterations=iterations, stage="baseline",
            judge_agreement=self._judge_kappa(),
        ))
        return inc

    # -- one round -------------------------------------------------------------------

    async def _suggestions(self, round_no: int, inc: _Incumbent, low: list[LowCase],
                           refused: list[RejectedSuggestion], slot: int = 0,
                           merge: _Merge | None = None, switch: str | None = None
                           ) -> list[Suggestion]:
        stored = [s for s in self.ledger.suggestions(round_no) if s.slot == slot]
        if stored:  # resumed: the improver was already paid for this round
            return [Suggestion(**s.model_dump(include=set(Suggestion.model_fields))) for s in stored]
        merged = merge_suggestions(inc.version.prompt, merge.prompt, merge.pair) if merge else []
        if switch is not None:
            # the same prompt on another model asks no model; the reviewer decides it
            suggestions = [model_switch(inc.version.prompt, switch, self.settings.margin)]
        elif merge is not None and not merge.conflicts:
            suggestions = merged  # a clean merge asks no model
        else:
            inp = ImproverInput(
                prompt=merge.prompt if merge else inc.version.prompt,
                aggregates=aggregates(inc.result),
                low_cases=fit_cases(low, max_tokens=self.settings.context_tokens),
                rejected=refused, low_score=self.low_score,
                merge=conflict_note(merge.pair, merge.conflicts) if merge else None,
                examples=self._examples_brief(inc), cost=self._cost_brief(inc),
            )
            # each candidate of a population is its own sample of the improver (slot 0
            # keeps the scope a round of one always had: older journals replay)
            suggestions = merged + await self.improver.propose(inp, scope=CallScope(
                cycle_id=self.cycle_id, round=round_no, sample=f"slot {slot}" if slot else None))
            suggestions = self._with_example_inputs(suggestions)
        self.bus.emit(ev.SuggestionsProposed(
            cycle_id=self.cycle_id, round=round_no, suggestions=[s.model_dump() for s in suggestions],
            slot=slot, parent=inc.version.version if self.settings.population > 1 else None))
        return suggestions

    def _examples_brief(self, inc: _Incumbent) -> ExamplesBrief | None:
        """What the improver is told of few-shot examples (None: they are off): the most
        the prompt may hold, and the improvement cases that passed, as sources."""
        if self.settings.examples <= 0:
            return None
        return ExamplesBrief(max=self.settings.examples, candidates=exemplar_cases(
            inc.result, at_least=max(self.low_score, self.judge.threshold),
            held_out=self.settings.held_out))

    def _cost_brief(self, inc: _Incumbent) -> CostBrief | None:
        """What the improver is told of the cost objective (None: the objective is score):
        the margin, and what the incumbent's agent spends per case."""
        if not self._by_cost:
            return None
        usage = inc.result.suite.role("agent")
        runs = max(inc.result.suite.iterations, 1)
        return CostBrief(margin=self.settings.margin, cost_per_case=mean_cost(inc.evaluation),
                         input_tokens=round(usage.input_tokens / runs),
                         output_tokens=round(usage.output_tokens / runs),
                         calls=round(usage.calls / runs, 2), words=inc.version.prompt.words)

    def _with_example_inputs(self, suggestions: list[Suggestion]) -> list[Suggestion]:
        """Each example suggestion with its source case's input, taken from the case (never
        from the improver's words); a held-out or unknown source gets none (the guard
        refuses it, naming the case)."""
        out = []
        for s in suggestions:
            if (s.type == "example" and s.source_case in self.cases.ids
                    and s.source_case not in self.settings.held_out):
                case = self.cases[self.cases.ids.index(s.source_case)]
                s = s.model_copy(update={"example_input": case.input})
            out.append(s)
        return out

    def _guard(self, suggestions: list[Suggestion], refused: list[RejectedSuggestion],
               prompt: Prompt) -> list[Suggestion]:
        """Refuse, before review, the repeats of refused edits, the edits that copy a
        case's text into the prompt and those that make it read case data, and the
        examples drawn from, or copying, a held-out case (cycle.improve.guard)."""
        pending = [s for s in suggestions if s.decision == "pending"]
        s = self.settings
        why = {**copies(pending, self.cases), **repeats(pending, refused),
               **leaks(pending, prompt, self.cases, allowed=s.allowed_variables),
               **example_faults(pending, prompt, self.cases, held_out=s.held_out,
                                most=s.examples)}
        return [s.model_copy(update={"decision": "rejected", "reason": why[s.id]})
                if s.id in why else s for s in suggestions]

    async def _review(self, round_no: int, inc: _Incumbent, suggestions: list[Suggestion],
                      candidate: str = "") -> list[Suggestion]:
        pending = [s for s in suggestions if s.decision == "pending"]
        if not pending:
            return suggestions
        p = inc.version.prompt
        request = ReviewRequest(
            cycle_id=self.cycle_id, round=round_no, prompt_id=p.id, version=inc.version.version,
            current={"system": p.system, "user_template": p.user_template,
                     "params": json.dumps(p.params, sort_keys=True),
                     **({"tools": json.dumps([t.model_dump(exclude_none=True) for t in p.tools])}
                        if p.tools else {}),
                     **({"examples": json.dumps([e.canonical() for e in p.examples])}
                        if p.examples else {}),
                     **({"rubrics": json.dumps(p.rubrics)} if p.rubrics else {})},
            suggestions=pending, score=inc.evaluation.score, candidate=candidate,
        )
        decided = {s.id: s for s in await self.reviewer.review(request)}
        out = []
        for s in suggestions:
            d = decided.get(s.id, s)
            if d.decision == "pending":  # a reviewer that said nothing about it
                d = d.model_copy(update={"decision": "rejected", "reason": "not decided by the reviewer"})
            out.append(d)
        # edits the reviewer wrote (a rewrite of the whole candidate) come after the
        # improver's, which they are written over
        known = {s.id for s in suggestions}
        out.extend(d for d in decided.values() if d.id not in known and d.accepted)
        return out

    def _deciders(self, proposed: list[Suggestion], guarded: list[Suggestion],
                  decided: list[Suggestion]) -> dict[str, str]:
        """Who decided on each suggestion the round decided now: the guard's refusals are
        the cycle's (``cycle (alice)``), the rest the reviewer's (cycle.loop.review.decider).
        One decided before (a resumed round) is left out: its stored record stands."""
        open_ids = {s.id for s in proposed if s.decision == "pending"}
        refused = {s.id for s in guarded if s.id in open_ids and s.decision != "pending"}
        known = {s.id for s in proposed}
        reviewer = decider(self.reviewer)
        out = {}
        for s in decided:
            if s.id in refused:
                out[s.id] = self.ledger.author
            elif s.id in open_ids or s.id not in known:  # pending, or the reviewer's own edit
                out[s.id] = reviewer
        return out

    def _resume_command(self) -> str:
        # a cycle started by another command (cycle judge improve) is resumed by it
        again = (self.record.get("resume_command")
                 or f"cycle improve {self.record.get('config_file') or 'cycle.yaml'}")
        return f"{again} --resume {self.cycle_id}"

    def _nothing_to_improve(self, inc: _Incumbent) -> str:
        """Why no case goes to the improver, naming the setting that decides it; a version
        judged on no case at all is an error, not a score too high to improve."""
        result = inc.result
        if result.score is None:
            first = next((r.error for r in result.iter_results() if r.error), "no case was run")
            raise EvalError(
                f"{inc.version.version} was judged on no case: every iteration errored "
                f"(first: {first})",
                hint=f"Fix the cause, then continue the cycle: {self._resume_command()}")
        setting = self.record.get("low_score_setting") or "improve.low_score"
        reason = f"nothing to improve: no case scored below {setting} ({self.low_score:g})"
        target = target_of(self.stop)
        if target is not None and target > self.low_score and result.score < target:
            reason += (f"; the score {result.score:.1f} is short of the target {target:g}: "
                       f"set improve.low_score: {target:g} so the improver sees the cases below it")
        return reason

    def _low_cases(self, inc: _Incumbent) -> list[LowCase]:
        """The cases shown to the improver: low scorers, never a held-out case; with the
        cost objective every case (lowest first), the evidence of what a cut must keep."""
        held_out = self.settings.held_out
        below = math.inf if self._by_cost else self.low_score
        return [c for c in low_cases(inc.result, below=below) if c.id not in held_out]

    def _next_model(self, round_no: int, inc: _Incumbent) -> str | None:
        """With the cost objective, the first model of improve.models this cycle has not
        tried yet and the incumbent is not on (None: all tried: the improver's turn)."""
        tried = {m for s in self.ledger.proposed_before(round_no)
                 if s.type == "parameters" and (m := switched_model(s.suggested_value))}
        current = inc.version.prompt.params.get("model")
        return next((m for m in self.settings.models if m != current and m not in tried), None)

    def _nothing_cheaper(self, inc: _Incumbent) -> str | None:
        """Why a cost cycle cannot lower the cost (None: it may try): no agent call of the
        incumbent was billed, as with the offline model, which costs nothing."""
        cost = mean_cost(inc.evaluation)
        if cost is None or cost <= 0:
            return (f"nothing to make cheaper: {inc.version.version}'s agent calls cost "
                    f"{money(cost or 0.0)} per case (improve.objective: cost compares what the "
                    "agent's model calls are billed; a model the price table does not price, "
                    "such as the offline one, costs nothing)")
        return None

    async def _round(self, round_no: int, inc: _Incumbent) -> _Incumbent:
        if self._by_cost and (why := self._nothing_cheaper(inc)):
            raise _Explored(why)
        low = self._low_cases(inc)
        if not low:
            raise _Explored(self._nothing_to_improve(inc))
        cid = self.cycle_id
        self.bus.emit(ev.RoundStarted(cycle_id=cid, round=round_no, version=inc.version.version))
        self.bus.emit(ev.EvaluationStarted(cycle_id=cid, round=round_no, role="baseline",
                                           version=inc.version.version, run_id=inc.result.run_id))
        refused = self.ledger.refused()
        if self.settings.population > 1:
            made = await self._population(round_no, inc, refused)
        else:
            switch = self._next_model(round_no, inc) if self._by_cost else None
            made = await self._candidate(round_no, inc, low, refused, switch=switch)
        if isinstance(made, str):  # why the round has no candidate
            self.bus.emit(ev.CandidateDecided(cycle_id=cid, round=round_no,
                                              version=inc.version.version, accepted=False,
                                              reason=made))
            return self._end_round(round_no, inc, inc, accepted=False, delta=None, reason=made,
                                   evaluated=None)
        candidate = made
        result = await self._evaluate(candidate, round_no, "candidate")
        cand = self._pool[candidate.version] = _Incumbent(
            candidate, result, self._judged(result, candidate.version))
        alpha = EXPLORE_ALPHA if self._confirms else CONFIRM_ALPHA
        decision = await self._decide(round_no, self.settings.acceptance, inc.result, inc.evaluation,
                                      result, cand.evaluation, alpha)
        extra = self._deciding_cases(inc.result, result) if decision.inconclusive else {}
        if extra and self._confirms:
            # inconclusive: more iterations of the cases that decide it, in both versions'
            # runs. Each look is at the exploring level: a round only chooses what the
            # confirmation tests, and the confirmation's level bounds the cycle's error
            before, result = await self._paired(round_no, inc.version, inc.result.run_id,
                                                candidate, extra)
            inc = _Incumbent(inc.version, before, self._judged(before, inc.version.version))
            cand = _Incumbent(candidate, result, self._judged(result, candidate.version))
            self._pool[inc.version.version], self._pool[candidate.version] = inc, cand
            decision = await self._decide(round_no, self.settings.acceptance, before,
                                          inc.evaluation, result, cand.evaluation, alpha)
        if self.settings.population > 1:  # the candidate's full evaluation joined the pool
            self._frontier_changed(round_no)
        reason = decision.reason
        if decision.accepted and self._confirms:
            reason += f"; head stays at {self._head_at()} until a confirmation on fresh samples"
        self._decided(round_no, candidate.version, decision, reason)
        kept = None
        if decision.accepted and not self._confirms:
            kept = self._move_head(cand, f"cycle {cid} round {round_no}: {decision.reason}")
        nxt = self._end_round(round_no, inc, cand, accepted=decision.accepted, delta=decision.delta,
                              reason=f"{reason}; {kept}" if kept else reason, evaluated=cand)
        if kept:
            raise _Stop(kept)
        return nxt

    async def _candidate(self, round_no: int, parent: _Incumbent, low: list[LowCase],
                         refused: list[RejectedSuggestion], slot: int = 0,
                         taken: Mapping[str, int] | None = None,
                         merge: _Merge | None = None, switch: str | None = None
                         ) -> Version | str:
        """The improver's edits of ``parent`` for ``low`` (or ``merge``'s, or the move to
        the model ``switch``), reviewed and applied: the new version, or why there is none.
        ``taken``: versions already tried this cycle."""
        cid = self.cycle_id
        proposed = await self._suggestions(round_no, parent, low, refused, slot, merge, switch)
        guarded = self._guard(proposed, refused, parent.version.prompt)
        which = ""
        if self.settings.population > 1:
            which = f"candidate {slot + 1} of {self.settings.population}"
            if merge is not None:
                which += f", a merge of {merge.pair.first} and {merge.pair.second}"
        suggestions = await self._review(round_no, parent, guarded, which)
        by = self._deciders(proposed, guarded, suggestions)
        applied = apply_suggestions(parent.version.prompt, suggestions)
        skipped = {s.id: s for s in applied.skipped}
        applied_ids = {s.id for s in applied.applied}
        final = [skipped.get(s.id, s) for s in suggestions]
        self.bus.emit(ev.ReviewDecided(
            cycle_id=cid, round=round_no,
            approved=sum(1 for s in final if s.decision == "approved"),
            rejected=sum(1 for s in final if s.decision == "rejected"),
            edited=sum(1 for s in final if s.decision == "edited"),
            skipped=len(skipped), reviewer=getattr(self.reviewer, "name", "reviewer"),
            suggestions=[{**s.model_dump(), "applied": s.id in applied_ids,
                          "decided_by": by.get(s.id)} for s in final],
            slot=slot,
        ))
        if not applied.changed:
            return ("no candidate: no suggestion was proposed" if not final else
                    "no candidate: every suggestion was rejected or could not be applied")
        earlier = dict(taken) if taken is not None else self.ledger.evaluated_versions(
            self._initial.version, before=round_no)
        of = f" of {parent.version.version}" if slot else ""
        if merge is not None:
            pair = merge.pair
            of = f" (a merge of {pair.first} and {pair.second}, from {pair.base})"
        candidate = self.ledger.save_candidate(
            applied.prompt, parent=parent.version.version, bump=self.settings.bump,
            second_parent=merge.pair.second if merge is not None else None,
            message=f"cycle {cid} round {round_no}: {plural(len(applied.applied), 'suggestion')} "
                    f"applied{of}",
        )
        if candidate.version in earlier:  # the same prompt as one already evaluated
            return (f"no candidate: the approved suggestions rebuild {candidate.version}, "
                    f"evaluated in round {earlier[candidate.version]}: not paid for again")
        self.bus.emit(ev.VersionCreated(
            prompt_id=candidate.prompt_id, version=candidate.version, parent=parent.version.version,
            source="improver", cycle_id=cid, round=round_no,
            diff=prompt_diff(parent.version.prompt, candidate.prompt, a_label=parent.version.version,
                             b_label=candidate.version),
            slot=slot if self.settings.population > 1 else None,
        ))
        return candidate

    async def _population(self, round_no: int, inc: _Incumbent,
                          refused: list[RejectedSuggestion]) -> Version | str:
        """``population`` candidates from parents on the frontier, each screened on a
        minibatch; the one that gained most (and gained) goes on to the full evaluation
        (cycle.loop.population). Why none did, else."""
        from cycle.loop.population import minibatch, parents, screen_gain, shares

        cid, s = self.cycle_id, self.settings
        self._frontier_changed(round_no)
        chosen = [e.version for e in parents([x.evaluation for x in self._pool.values()],
                                             inc.version.version, s.population, s.held_out)]
        merge = self._merge_plan() if s.merge else None
        if merge is not None:  # the last slot merges: a parent's child fewer
            chosen[-1] = merge.pair.first
        children = Counter(chosen[:-1] if merge else chosen)
        weak_of = {v: self._low_cases(self._pool[v]) for v in children}
        # each child is shown its own share of its parent's weak cases, at most half of
        # them: other evidence, other edits (even from a model that answers the same
        # question the same way), and cases its improver never saw to screen it on
        share_of = {v: shares(weak_of[v], n) for v, n in children.items()}
        born: Counter[str] = Counter()
        taken = self.ledger.evaluated_versions(self._initial.version, before=round_no)
        made: list[tuple[int, _Incumbent, Version, list[str], list[str]]] = []
        why: list[str] = []
        for slot, version in enumerate(chosen):
            parent = self._pool[version]
            merging = merge if merge is not None and slot == len(chosen) - 1 else None
            if merging is not None:  # screened on the cases the second version wins
                low, weak_ids, shown = merging.low, list(merging.pair.second_wins), []
            else:
                k, born[version] = born[version], born[version] + 1
                low = share_of[version][k]
                if not low:
                    why.append(f"{version} has no case below improve.low_score")
                    continue
                weak_ids = [c.id for c in weak_of[version]]
                shown = [c.id for c in low]
            made_one = await self._candidate(round_no, parent, low, refused, slot, taken,
                                             merging)
            if isinstance(made_one, str):
                why.append(made_one.removeprefix("no candidate: "))
                continue
            taken[made_one.version] = round_no
            made.append((slot, parent, made_one, weak_ids, shown))
        if not made:
            return "no candidate: " + "; ".join(dict.fromkeys(why))
        visible = [c.id for c in self.cases if c.id not in s.held_out]
        screened: list[ev.CandidateScreened] = []
        for slot, parent, candidate, weak_ids, shown in made:
            batch = minibatch(visible, weak_ids, s.screen_cases, salt=f"{cid}|{round_no}",
                              shown=shown)
            result = await self._evaluate(candidate, round_no, "screen", only=batch, iterations=1,
                                          run_id=f"{run_id_for(cid, round_no)}-s{slot}")
            screened.append(ev.CandidateScreened(
                cycle_id=cid, round=round_no, slot=slot, version=candidate.version,
                parent=parent.version.version, run_id=result.run_id, cases=len(batch),
                gain=screen_gain(evaluation_of(result, candidate.version), parent.evaluation,
                                 batch),
                second_parent=(merge.pair.second if merge is not None and slot == len(chosen) - 1
                               else None)))
        gained = [x for x in screened if x.gain is not None and x.gain > 0]
        best = max(gained, key=lambda x: x.gain or 0.0) if gained else None
        for x in screened:
            self.bus.emit(msgspec.structs.replace(x, kept=x is best))
        if best is None:
            shown = ", ".join(f"{x.version} {x.gain:+.1f}" if x.gain is not None else
                              f"{x.version} not judged" for x in screened)
            return f"no candidate gained on its screen ({shown})"
        return next(c for slot, _, c, _, _ in made if slot == best.slot)

    def _frontier_changed(self, round_no: int) -> None:
        """Tell the frontier of every version evaluated in full (a view draws it; the
        reports derive it again from the stored runs: cycle.loop.lineage)."""
        from cycle.loop.population import frontier

        front = frontier([x.evaluation for x in self._pool.values()], self.settings.held_out)
        self.bus.emit(ev.FrontierChanged(cycle_id=self.cycle_id, round=round_no,
                                         versions={e.version: wins for e, wins in front}))

    def _merge_plan(self) -> _Merge | None:
        """The frontier pair this round merges, the merged prompt, and the first version's
        results on the cases the second wins (what the improver sees of a conflict); None
        when no pair is left whose merge is a prompt not yet evaluated."""
        def parent_of(v: str) -> str | None:
            known = self._pool.get(v)
            return (known.version if known else self.ledger.version(v)).parent

        pool = [x.evaluation for x in self._pool.values()]
        hashes = {x.version.hash for x in self._pool.values()}
        held_out = self.settings.held_out
        while (pair := merge_pair(pool, parent_of, self._merged, held_out)) is not None:
            self._merged.add(frozenset((pair.first, pair.second)))
            first = self._pool[pair.first].version.prompt
            base = (self._pool[pair.base].version if pair.base in self._pool else
                    self.ledger.version(pair.base))
            prompt, conflicts = merge_prompts(base.prompt, first,
                                              self._pool[pair.second].version.prompt)
            if prompt.content_hash in hashes and not conflicts:
                continue  # this merge was evaluated already
            wins = set(pair.second_wins)
            low = [c for c in low_cases(self._pool[pair.first].result, below=math.inf)
                   if c.id in wins]
            return _Merge(pair, prompt, conflicts, low)
        return None

    async def _decide(self, round_no: int, rule: AcceptanceRule, before: RunResult,
                      before_e: Evaluation, after: RunResult, after_e: Evaluation,
                      alpha: float) -> AcceptanceDecision:
        """``decide`` on the two runs; with pairwise criteria, their comparisons of the
        runs' outputs (paid in this round, cycle.loop.preference) decide for them; with
        the cost objective, a lower cost within the margin (cycle.loop.cost)."""
        if self._by_cost:  # pairwise criteria are refused with it (cycle.assemble)
            return decide_cheaper(rule, before_e, after_e, margin=self.settings.margin,
                                  required=self.required_cases, held_out=self.settings.held_out,
                                  alpha=alpha)
        pairwise = [c for c in self.judge.criteria if c.pairwise]
        absolute = [c for c in self.judge.criteria if not c.pairwise]
        if not pairwise or rule == "always" or self.judge.model is None:
            return decide(rule, before_e, after_e, required=self.required_cases,
                          held_out=self.settings.held_out, alpha=alpha)
        from cycle.loop.preference import judged, preferences, scored_only

        old, new = judged(before), judged(after)  # each run read once for both uses
        tests = await preferences(
            self.judge.model, pairwise, before, after, old, new,
            expected={c.id: c.expected for c in self.cases},
            scope=CallScope(cycle_id=self.cycle_id, round=round_no),
            concurrency=self.settings.concurrency)
        if absolute:
            leave_out = {c.id for c in pairwise}
            before_e = scored_only(before_e, old, leave_out)
            after_e = scored_only(after_e, new, leave_out)
        return decide(rule, before_e, after_e, required=self.required_cases,
                      held_out=self.settings.held_out, alpha=alpha, pairwise=tests,
                      absolute=bool(absolute))

    def _decided(self, round_no: int, version: str, d: AcceptanceDecision, reason: str) -> None:
        self.bus.emit(ev.CandidateDecided(
            cycle_id=self.cycle_id, round=round_no, version=version, accepted=d.accepted,
            reason=reason, delta=d.delta, ci_low=d.ci_low, ci_high=d.ci_high,
            seen_delta=d.seen_delta, held_out_delta=d.held_out_delta,
            pairwise=[t.to_dict() for t in d.pairwise], cost=d.cost,
            cost_delta=d.cost_delta,
        ))

    def _move_head(self, to: _Incumbent, reason: str) -> str | None:
        """Move head to ``to``; or, when head was moved outside this cycle since the cycle
        set it (a person's ``cycle rollback``, another cycle), leave it and say why (None:
        moved). A person's choice is never silently overridden."""
        target = to.version.version
        at = self._head_at()
        unproven = self._judge_unproven()
        if unproven is not None:
            return (f"head stays at {at}: the judge's agreement with people is not "
                    f"established (improve.judge.min_agreement "
                    f"{self.settings.min_agreement:g}): {unproven}")
        try:
            now = self.ledger.move_head(expected=at, target=target, reason=reason)
        except ProtectedLabelError as e:
            # the cycle stops as when a person moved head: it says why and how to go on,
            # and the candidate stays stored
            who = e.protection.who_may() if e.protection and e.protection.allowed else None
            return (f"head stays at {at}: {e.message}; to use {target}: "
                    f"cycle rollback {self.prompt_id} --to {target}"
                    + (f" (by {who}, or with --force)" if who else " --force"))
        if now is not None:
            return (f"head was moved to {now} outside this cycle (the cycle had it at {at}): "
                    f"left there; to use {target} instead: cycle rollback {self.prompt_id} "
                    f"--to {target}")
        self._head = to
        return None

    def _judge_note(self) -> str | None:
        """The judge's agreement with people, as the run consoles and reports say it."""
        if not any(c.kind == "llm" for c in self.judge.criteria):
            return None
        from cycle.judge.calibration import agreement_line

        version = self.judge.register(self.store)  # as each of the cycle's runs will
        return agreement_line(self.store, run_id=run_id_for(self.cycle_id, 0),
                              model=self.judge.name, version=version)

    def _judge_kappa(self) -> JudgeKappa | None:
        """The judge's pooled kappa with people as a round shows it beside its score, or
        that it is uncalibrated (None: no LLM criterion, so no model judges)."""
        if not any(c.kind == "llm" for c in self.judge.criteria):
            return None
        from cycle.judge.calibration import kappa_of

        labelled = self.store.human_labels.of_judge(self.judge.name, self.judge.version)
        if self._kappa is None or self._kappa[0] != labelled:
            self._kappa = (labelled, kappa_of(self.judge.name, self.judge.version, labelled))
        return self._kappa[1]

    def _judge_unproven(self) -> str | None:
        """Why the judge's labels do not yet let it move head (None: they do, or no gate)."""
        floor = self.settings.min_agreement
        llm = [c.id for c in self.judge.criteria if c.kind == "llm"]
        if floor is None or not llm:
            return None
        from cycle.judge.calibration import gate

        return gate(self.ledger.judge_labels(self.judge.name, self.judge.version), llm, floor)

    # -- confirming ---------------------------------------------------------------------

    async def _confirm(self, round_no: int, best: _Incumbent, why: str) -> str:
        """Fresh evaluations of head's version and the best candidate; head moves to the
        candidate only if the paired gain is significant at CONFIRM_ALPHA over both looks."""
        cid, base = self.cycle_id, self._head
        self.bus.emit(ev.RoundStarted(cycle_id=cid, round=round_no, version=base.version.version,
                                      stage="confirm", reason=why))
        base_run = f"{run_id_for(cid, round_no)}-baseline"
        extra: dict[str, int] = {}
        for look in range(CONFIRM_LOOKS):
            before, after = await self._paired(round_no, base.version, base_run, best.version, extra)
            decision = await self._decide(
                round_no, "significant", before, self._judged(before, base.version.version),
                after, self._judged(after, best.version.version), CONFIRM_ALPHA / CONFIRM_LOOKS)
            extra = self._deciding_cases(before, after) if decision.inconclusive else {}
            if not extra or look == CONFIRM_LOOKS - 1:
                break
        if decision.accepted and self.settings.confirm_labels:
            decision = self._corrected(decision, before, after, base.version, best.version)
        fresh = _Incumbent(best.version, after, self._judged(after, best.version.version))
        old = self._head_at()
        verdict = "confirmed" if decision.accepted else "not confirmed"
        self._decided(round_no, best.version.version, decision,
                      f"{verdict} on fresh samples of both versions: {decision.because}")
        gain = f"{decision.delta:+.1f}" if decision.delta is not None else "no paired cases"
        if decision.cost is not None and decision.cost_delta is not None:
            gain += (f" points, agent cost per case {money(decision.cost - decision.cost_delta)}"
                     f" -> {money(decision.cost)}")
        kept = None
        if decision.accepted:
            kept = self._move_head(fresh, f"cycle {cid} round {round_no}: confirmed on fresh "
                                          f"samples: {decision.because}")
            outcome = f"confirmed on fresh samples ({gain}): " + (
                kept or f"head moved {old} -> {best.version.version}")
        else:
            outcome = (f"{best.version.version} was not confirmed on fresh samples ({gain}): head "
                       f"stays at {old}")
        fresh_base = _Incumbent(base.version, before, self._judged(before, base.version.version))
        self._end_round(round_no, fresh_base, fresh, accepted=decision.accepted, delta=decision.delta,
                        reason=outcome, evaluated=fresh, stage="confirm")
        return "; ".join(x for x in (why, outcome) if x)

    def _corrected(self, decision: AcceptanceDecision, before: RunResult, after: RunResult,
                   base: Version, candidate: Version) -> AcceptanceDecision:
        """The confirmation's decision made again on the judge's scores corrected with
        people's labels of both fresh runs' outputs (cycle.judge.calibration.corrected_gain);
        with too few labels, the cycle waits for them (``_Waiting``)."""
        from cycle.judge.calibration import corrected_gain, label_errors

        need = self.settings.confirm_labels or 0
        # a pairwise criterion's comparison decided for it: the labels correct scores only
        pairwise = {c.id for c in self.judge.criteria if c.pairwise}
        llm = {c.id: c.weight for c in self.judge.criteria if c.kind == "llm"
               and c.id not in pairwise}
        if not llm:
            return decision
        labels = self.ledger.run_labels([before.run_id, after.run_id])
        errors = {run: label_errors(labels, run) for run in (before.run_id, after.run_id)}
        short = [f"{v.version} {len(errors[r.run_id].get(c, []))}/{need} on {c}"
                 for v, r in ((base, before), (candidate, after)) for c in llm
                 if len(errors[r.run_id].get(c, [])) < need]
        if short:
            raise _Waiting(
                f"waiting for people's labels: {candidate.version} gained "
                f"{decision.delta:+.1f} as judged, and head moves only if the gain holds with the "
                f"judge's scores corrected by labels of {need} outputs of each version "
                f"(improve.judge.confirm_labels); labelled so far: {', '.join(short)}. Label "
                f"them: cycle judge label {before.run_id}, cycle judge label {after.run_id} (or "
                f"cycle judge sample RUN --n {need}, then cycle judge labels import FILE); then "
                f"continue: {self._resume_command()}")
        before_e, after_e = evaluation_of(before, base.version), evaluation_of(after, candidate.version)
        if pairwise:
            from cycle.loop.preference import judged, scored_only

            before_e = scored_only(before_e, judged(before), pairwise)
            after_e = scored_only(after_e, judged(after), pairwise)
        a, b = paired_scores(before_e, after_e)
        gain = corrected_gain([b[k] - a[k] for k in a], errors[before.run_id], errors[after.run_id],
                              llm, sum(c.weight for c in self.judge.criteria if c.id not in pairwise),
                              alpha=CONFIRM_ALPHA / CONFIRM_LOOKS)
        shifts = ", ".join(f"{c} {v:+.1f}" for c, v in gain.shift.items())
        because = (f"corrected with people's labels, the gain is {gain.corrected:+.2f} (as judged "
                   f"{gain.judged:+.2f}; the judge's error moved by {shifts} on the candidate's "
                   f"outputs), one-sided bound {gain.bound:+.2f}")
        ok = gain.bound > 0
        return msgspec.structs.replace(
            decision, accepted=ok, delta=gain.corrected,
            reason=("accepted: " if ok else "rejected: ") + because,
            because=(because if ok else f"{because}: not above zero"))

    async def _paired(self, round_no: int, base: Version, base_run: str, candidate: Version,
                      extra: Mapping[str, int]) -> tuple[RunResult, RunResult]:
        """Both sides of a comparison: ``base`` under ``base_run``, the candidate under the
        round's run; ``extra`` grows the cases it names (stored iterations are not run again)."""
        before = await self._evaluate(base, round_no, "baseline", run_id=base_run,
                                      iterations_for=extra)
        after = await self._evaluate(candidate, round_no, "candidate", iterations_for=extra)
        return before, after

    def _deciding_cases(self, before: RunResult, after: RunResult) -> dict[str, int]:
        """The cases more iterations can decide (those whose iterations varied in either
        version), with the iterations to grow them to; empty at the cap."""
        cap = self.settings.max_iterations or 2 * self.settings.iterations
        varied = {k for r in (before, after) for k, c in r.cases.items() if (c.stats.sd or 0.0) > 0}
        have = {k: max(r.cases[k].stats.n for r in (before, after) if k in r.cases) for k in varied}
        return {k: cap for k, n in have.items() if n < cap}

    def _unconfirmed(self, best: _Incumbent | None) -> str:
        """What a cycle stopped before its confirmation leaves behind."""
        head = self._head
        if not self._confirms or best is None or head is None or best.version == head.version:
            return ""
        return (f"; {best.version.version}, the best candidate, was not confirmed: head stays at "
                f"{self._head_at()} (to use it anyway: cycle rollback {self.prompt_id} "
                f"--to {best.version.version})")

    def _end_round(self, round_no: int, inc: _Incumbent, cand: _Incumbent, *, accepted: bool,
                   delta: float | None, reason: str, evaluated: _Incumbent | None,
                   stage: str = "improve") -> _Incumbent:
        shown = evaluated or inc
        cost = self.ledger.round_cost(round_no)
        self.bus.emit(ev.RoundFinished(
            cycle_id=self.cycle_id, round=round_no, version=shown.version.version,
            score=shown.evaluation.score, ci_low=shown.evaluation.ci_low, ci_high=shown.evaluation.ci_high,
            pass_rate=shown.evaluation.pass_rate, accepted=accepted, cost=sum(cost.values()),
            cost_by_role=cost, incumbent_score=inc.evaluation.score, delta=delta, reason=reason,
            stage=stage, judge_agreement=self._judge_kappa(),
        ))
        return cand if accepted else inc

    # -- resuming -----------------------------------------------------------------------

    async def _restore(self, resume: str | bool
                       ) -> tuple[Version, _Incumbent | None, int, str | None]:
        """The starting version, the incumbent, the round to continue from, and, when the
        confirmation was under way, why exploring had stopped (else None): the ledger
        loads the cycle; its finished rounds' runs give back the incumbents."""
        row, rounds = self.ledger.resume(resume)
        assert row.initial_version is not None
        start = self.ledger.version(row.initial_version)
        incumbent: _Incumbent | None = None
        next_round = 0
        confirming: str | None = None
        for r in rounds:
            if r.status != "finished":
                next_round = r.round
                if r.stage == "confirm":  # its decision, if stored, is made again from its runs
                    confirming = r.reason if r.accepted is None else ""
                break
            if r.round == 0:
                result = load_run(self.store.runs, r.baseline_run_id or run_id_for(row.id, 0))
                incumbent = self._head = _Incumbent(start, result, self._judged(result, start.version))
                self._pool[start.version] = incumbent
            elif r.candidate_version and r.candidate_run_id and (
                    r.accepted or (self.settings.population > 1 and r.improves)):
                # a population's parents are every version evaluated in full
                v = self.ledger.version(r.candidate_version)
                result = load_run(self.store.runs, r.candidate_run_id)
                evaluated = self._pool[v.version] = _Incumbent(v, result,
                                                               self._judged(result, v.version))
                if r.accepted:
                    incumbent = evaluated
                    if not self._confirms:  # 'always' moved head every round
                        self._head = incumbent
            next_round = r.round + 1
        if incumbent is None and next_round > 0:
            next_round, confirming = 0, None
        return start, incumbent, next_round, confirming
