"""Running a suite: every case, N iterations, a concurrency limit, a timeout per case.

    runner = Runner(agent=agent, judge=judge, cases=cases, iterations=3,
                    concurrency=8, timeout=120, store=store, bus=bus)

With a store, the judge's prompt is saved as a version and every result goes
to the store's run log (``store.runs``) through the run's recorder
(``cycle.evals.recording``); without one, nothing is written.
    result = await runner.run()                  # a new run
    result = await runner.run(run_id="run-...")  # resume: judged iterations are kept

Each iteration runs the agent, then the judge, inside the case timeout. A
failure of either (provider down, judge unparseable, agent crash, timeout)
makes the iteration an *error*: recorded with its message, counted apart,
never averaged in as a score. Every result, its verdicts and the model calls
made for it are written to the store as it is judged (in batches, at most
``FLUSH_EVERY`` seconds apart), so a killed run resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from msgspec.structs import replace

from cycle.agents import Agent
from cycle.cases import CaseList, TestCase
from cycle.errors import (
    AuthenticationError,
    BudgetExceededError,
    MissingCredentialsError,
    describe,
)
from cycle.evals.recording import Follower, RunRecorder, StoredRunRecorder
from cycle.evals.results import Tally, summarize
from cycle.events import CaseFinished, EventBus, RunFinished, RunStarted
from cycle.ids import new_run_id, now_iso
from cycle.judge import Judge
from cycle.llm.http import environment_secrets, scrub, whole
from cycle.records import AgentResult, IterationResult, RunResult, TraceEvent, Verdict
from cycle.records.scope import CallScope
from cycle.records.transcript import cut
from cycle.store import Store


def case_info(cases: Sequence[TestCase]) -> dict[str, dict[str, Any]]:
    """What reports need to know about each case, stored with the run: its name,
    description, tags and expected output, each only when set (a case of 100,000 with
    none of them costs its id and an empty dict)."""
    return {
        c.id: {k: v for k, v, kept in (
            ("name", c.name, c.name), ("description", c.description, c.description),
            ("tags", list(c.tags), c.tags), ("expected", c.expected, c.expected is not None))
            if kept}
        for c in cases
    }


class Runner:
    """Runs an agent over cases and judges every iteration."""

    def __init__(
        self,
        *,
        agent: Agent,
        judge: Judge,
        cases: Sequence[TestCase],
        iterations: int = 1,
        concurrency: int = 8,
        timeout: float | None = None,
        store: Store | None = None,
        bus: EventBus | None = None,
        stop_on_first_failure: bool = False,
        iterations_for: Mapping[str, int] | None = None,
    ) -> None:
        """``iterations_for``: case id -> iterations for the cases that run more (or fewer)
        than ``iterations``; re-running a stored run with more adds only the new ones."""
        if iterations < 1:
            raise ValueError("iterations must be >= 1")
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.agent = agent
        self.judge = judge
        self.cases = CaseList.of(cases)
        self.iterations = iterations
        self.iterations_for = dict(iterations_for or {})
        self.concurrency = concurrency
        self.timeout = timeout
        self.store = store
        self.bus = bus or EventBus()
        self.stop_on_first_failure = stop_on_first_failure
        self._stop_reason: str | None = None
        #: where this run's results go, and its finished iterations (a timeout reports
        #: the latencies its recorder saw)
        self._recorder: RunRecorder | None = None
        self._finished = 0
        #: the environment's keys (read when a run starts), masked in the errors of code
        #: cycle did not write: a check, a user function or an end condition may say them
        self._secrets: tuple[str, ...] = ()

    @property
    def offline(self) -> bool:
        return bool(getattr(self.agent, "offline", False)) or self.judge.offline

    async def run(self, *, run_id: str | None = None, meta: dict[str, Any] | None = None,
                  take_over: bool = False, ahead: Follower | None = None) -> RunResult:
        """Run (or resume) the suite. ``meta`` may give prompt_id, version, cycle_id,
        round, role ('eval', 'baseline', 'candidate') and config (stored with the run).
        A run of its own holds its lease (cycle.store.locks) while it runs: a second
        process resuming it refuses (a cycle's runs are under the cycle's lease);
        ``take_over``: take a lease another machine holds. ``ahead``: the reports to
        write as the results are stored (a new stored run; cycle.report.ahead)."""
        meta = dict(meta or {})
        run_id = run_id or new_run_id()
        if self.store is None or meta.get("cycle_id") is not None:
            return await self._run(run_id, meta, ahead)
        from cycle.store.locks import held

        with held(self.store, f"run:{run_id}", what=f"run {run_id}",
                  resume_hint=f"cycle run cycle.yaml --resume {run_id}", take_over=take_over):
            return await self._run(run_id, meta, ahead)

    def _figures(self, meta: dict[str, Any]) -> dict[str, Any]:
        """What a run's result says of its prompt and models."""
        return {"prompt_id": meta.get("prompt_id"), "version": meta.get("version"),
                "agent_model": self.agent.name, "judge_model": self.judge.name,
                "judge_version": self.judge.version, "offline": self.offline}

    def _iterations_of(self, case_id: str) -> int:
        return self.iterations_for.get(case_id, self.iterations)

    async def _run(self, run_id: str, meta: dict[str, Any],
                   ahead: Follower | None = None) -> RunResult:
        began = now_iso()
        info = case_info(self.cases)
        log = self.store.runs if self.store is not None else None
        recorder = (StoredRunRecorder(run_id, self.bus, log) if log is not None
                    else RunRecorder(run_id, self.bus))
        self._recorder = recorder
        self._finished = 0
        self._stop_reason = None
        self._secrets = environment_secrets()
        if self.store is not None:
            # a new run and a resumed one judge with the store's judge prompt
            self.judge.register(self.store)
        try:
            tallies = recorder.begin(lambda: self._new_row(meta, info))
        except BaseException:
            recorder.close()
            raise
        done = {(k, t.iteration) for k, ts in tallies.items() for t in ts}
        if ahead is not None and not tallies and isinstance(recorder, StoredRunRecorder):
            # the run's figures as they are at its start: a case's text needs none of the
            # rest; its cases' data is the run's own (not a copy: 100,000 cases' worth)
            start = replace(summarize(run_id=run_id, status="running", tallies={},
                                      threshold=self.judge.threshold, source=recorder.results(),
                                      **self._figures(meta)), case_info=info)
            recorder.on_stored = ahead.follow(start, recorder.log, self._iterations_of)
        try:
            status = await self._work(run_id, meta, tallies, done, recorder)
        except BaseException:
            recorder.interrupted()
            raise
        finally:
            recorder.close()
        recorder.flush()

        result = summarize(
            run_id=run_id, status=status, threshold=self.judge.threshold, tallies=tallies,
            source=recorder.results(), usage=recorder.role_usage(), case_info=info,
            **self._figures(meta), stop_reason=self._stop_reason,
            # the reports carry their times (a resumed run started when it first started)
            started_at=recorder.started_at(began), finished_at=now_iso(),
        )
        recorder.finish(status, result.summary())
        self.bus.emit(RunFinished(run_id=run_id, score=result.score,
                                  pass_rate=result.suite.pass_rate, errors=result.suite.errors,
                                  cost=result.suite.cost, status=status))
        return result

    def _new_row(self, meta: dict[str, Any], info: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """What a new run's row holds."""
        config = dict(meta.get("config") or {})
        config.setdefault("pass_threshold", self.judge.threshold)
        config.setdefault("iterations", self.iterations)
        config["case_info"] = info
        return {"prompt_id": meta.get("prompt_id"), "version": meta.get("version"),
                "config": config, "agent_model": self.agent.name, "judge_model": self.judge.name,
                "judge_version": self.judge.version, "offline": self.offline,
                "cycle_id": meta.get("cycle_id"), "round": meta.get("round"),
                "role": meta.get("role", "eval")}

    async def _work(self, run_id: str, meta: dict[str, Any], tallies: dict[str, list[Tally]],
                    done: set[tuple[str, int]], recorder: RunRecorder) -> str:
        """Run every iteration not ``done`` with ``concurrency`` workers; each result goes
        to ``recorder`` and its tally to ``tallies``. The run's status."""
        # an evaluation that must be independent of every other (a cycle's, "fresh") is
        # its own sample: its calls are cached under its run, so a resume replays them and
        # nothing else does
        run_scope = CallScope(run_id=run_id, cycle_id=meta.get("cycle_id"),
                              round=meta.get("round"),
                              sample=run_id if meta.get("fresh") else None)

        # the cases are unpacked as the workers reach them, never all at once
        jobs = ((case, i) for case in self.cases for i in range(self._iterations_of(case.id))
                if (case.id, i) not in done)
        total = sum(self._iterations_of(k) for k in self.cases.ids)
        todo = sum(1 for k in self.cases.ids for i in range(self._iterations_of(k)) if (k, i) not in done)
        # a resumed run's progress starts at what it had judged, not at zero of the whole
        self.bus.emit(RunStarted(run_id=run_id, prompt_id=meta.get("prompt_id"),
                                 version=meta.get("version"), cases=len(self.cases),
                                 iterations=self.iterations, total=total, done=total - todo))

        async def worker() -> None:
            for case, iteration in jobs:
                if self._stop_reason is not None:
                    return
                result = await self._run_one(case, iteration, run_scope)
                self._finished += 1
                tallies.setdefault(case.id, []).append(Tally.of(result))
                recorder.add(result)
                self.bus.emit(CaseFinished(
                    run_id=run_id, case_id=case.id, iteration=iteration, score=result.score,
                    passed=result.passed, error=result.error,
                    cost=result.agent_cost + result.judge_cost, latency=result.latency,
                    status=result.status,
                    turns=sum(1 for e in result.trace if e.kind == "user") or 1,
                ))
                if self.stop_on_first_failure and result.status == "failed" \
                        and self._stop_reason is None:
                    self._stop_reason = f"case '{case.id}' failed (--stop-on-first-failure)"

        workers = [asyncio.ensure_future(worker()) for _ in range(min(self.concurrency, todo))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        return "interrupted" if self._stop_reason is not None else "finished"

    def _timed_out(self, stage: str) -> str:
        """Why a case ran out of time: with the latency this run's calls measured, a slow
        server (a local model on a small machine) is told apart from a slow case."""
        said = f"timeout: the case took longer than {self.timeout:g} s ({stage})"
        if stage == "agent":
            waited = getattr(self.agent, "waited_on", "the agent")
            said = f"timeout: the case took longer than {self.timeout:g} s (agent: {waited})"
            if not getattr(self.agent, "calls_models", True):
                # an endpoint or a function of the user's: cycle saw none of its calls
                return (f"{said}: it had not answered; if it is that slow, raise run.timeout "
                        "(or lower run.concurrency: cases in flight slow it down)")
        usage = self._recorder.usage if self._recorder is not None else None
        seen = usage.latencies() if usage is not None else {}
        if not seen:
            return (f"{said}; no model call of this run had been answered yet: if the server "
                    "is slow (a local model), raise run.timeout or lower run.concurrency")
        assert usage is not None
        calls = {role: usage.totals[role][0] for role in seen}
        done = max(1, self._finished)
        # what one case needs: each role's mean latency times its calls a case (one at least)
        need = sum(mean * max(1.0, calls[role] / done) for role, (mean, _) in seen.items())
        shown = ", ".join(f"{role} {mean:.1f} s" for role, (mean, _) in
                          sorted(seen.items(), key=lambda kv: -kv[1][0]))
        said += f"; a model call of this run takes {shown} on average"
        fit = math.ceil(2 * need / 10) * 10
        if fit > self.timeout:
            said += (f": the server is slower than the timeout allows; set run.timeout: {fit} "
                     "(or lower run.concurrency: calls in flight slow a local server)")
        return said

    async def _run_one(
        self, case: TestCase, iteration: int, run_scope: CallScope
    ) -> IterationResult:
        scope = run_scope.at(case_id=case.id, iteration=iteration)
        started_at = now_iso()
        agent_result: AgentResult | None = None
        stage = "agent"
        try:
            async with asyncio.timeout(self.timeout):
                agent_result = await self.agent.run(case, iteration=iteration, scope=scope)
                if agent_result.ending == "terminated":
                    return self._ended(case, iteration, agent_result, started_at, "terminated",
                                       f"terminated: {agent_result.note}")
                stage = "judge"
                verdict = await self.judge.judge(case, agent_result, iteration=iteration,
                                                 scope=scope)
        except TimeoutError:
            return self._errored(case, iteration, self._timed_out(stage), agent_result, started_at)
        except BudgetExceededError as e:
            # no further call can be made: stop scheduling, keep what was judged
            self._stop_reason = e.message
            return self._errored(case, iteration, f"{stage}: {describe(e)}", agent_result, started_at)
        except (AuthenticationError, MissingCredentialsError) as e:
            # every further call would fail the same way: stop rather than burn the suite
            self._stop_reason = f"the {stage} model cannot authenticate: {e.message}"
            return self._errored(case, iteration, f"{stage}: {describe(e)}", agent_result, started_at)
        except Exception as e:  # noqa: BLE001 - CycleErrors and crashes of user code alike
            return self._errored(case, iteration, f"{stage}: {describe(e)}", agent_result, started_at)
        a = agent_result
        passed, verdicts = verdict.passed, verdict.verdicts
        if a.verdict != "judged":
            # the way a conversation ended says pass or fail (seed 003): the case passes
            # when that outcome and the judge both pass it; a pass lifts nothing over a
            # failed criterion (the judge's scores stay)
            outcome = a.verdict == "pass"
            passed = passed and outcome
            verdicts = (*verdicts, Verdict(
                criterion_id="conversation", kind="check", score=100.0 if outcome else 0.0,
                passed=outcome, weight=0.0, required=True,
                reasoning=f"{a.note}; the case says that means {a.verdict}"))
        return _record(case, iteration, a, started_at, status="passed" if passed else "failed",
                       score=verdict.score, passed=passed, judge_cost=verdict.cost,
                       verdicts=verdicts)

    def _errored(
        self, case: TestCase, iteration: int, error: str, a: AgentResult | None, started_at: str
    ) -> IterationResult:
        # an agent's exception may carry a lone surrogate: kept, the store could not write it
        return self._ended(case, iteration, a, started_at, "error",
                           whole(scrub(error, self._secrets)))

    @staticmethod
    def _ended(case: TestCase, iteration: int, a: AgentResult | None, started_at: str,
               status: Literal["error", "terminated"], why: str) -> IterationResult:
        """An iteration that was not judged: an error, or a limit that ended it."""
        return _record(case, iteration, a, started_at, status=status, score=None, passed=None,
                       error=why)


def _record(case: TestCase, iteration: int, a: AgentResult | None, started_at: str,
            **outcome: Any) -> IterationResult:
    """The stored record of an iteration: the case's, the agent's answer as kept (the one
    place its fields are read into a row), and ``outcome`` (status, score, verdicts...)."""
    answer: dict[str, Any] = {} if a is None else {
        "output": kept(a.output), "tool_calls": a.tool_calls, "latency": a.latency,
        "agent_cost": a.cost, "input_tokens": a.usage.input_tokens,
        "output_tokens": a.usage.output_tokens, "trace": kept_trace(a.trace), "state": a.state}
    return IterationResult(case_id=case.id, iteration=iteration, input=case.input,
                           started_at=started_at, finished_at=now_iso(), **answer, **outcome)


#: characters of one answer (or trace text) kept in the store and the reports; the
#: checks and the judge saw all of it. A 50 MB answer would make a store of gigabytes
#: and a report no one opens.
KEPT_CHARS = 200_000


def kept(text: str) -> str:
    """``text`` as stored: cut past ``KEPT_CHARS`` with a marker saying how much."""
    return text if len(text) <= KEPT_CHARS else cut(text, KEPT_CHARS)


def kept_trace(trace: Sequence[TraceEvent]) -> tuple[TraceEvent, ...]:
    """The trace as stored: each long text (a turn, a tool's text result or error) cut."""
    if all(len(e.text) <= KEPT_CHARS and (not isinstance(e.result, str)
                                          or len(e.result) <= KEPT_CHARS)
           and len(e.error or "") <= KEPT_CHARS for e in trace):
        return tuple(trace)
    return tuple(e.model_copy(update={
        "text": kept(e.text), "error": kept(e.error) if e.error else e.error,
        "result": kept(e.result) if isinstance(e.result, str) else e.result}) for e in trace)
