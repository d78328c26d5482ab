"""Judging one result: deterministic checks plus one LLM call for the LLM criteria.

    judge = Judge(config.criteria, model=judge_model, threshold=70)
    verdict = await judge.judge(case, agent_result, iteration=0)
    verdict.score, verdict.passed, verdict.verdicts

``model`` may be several models, a panel (``cycle.judge.panel``): each makes that call, and
each LLM criterion's verdict is theirs combined.

A check that raises, or an LLM verdict that is missing or malformed after
the model's repair retry, raises (``EvalError``/``JudgeError``): the runner
records the iteration as an *error*, never as a zero.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from msgspec import Struct, field

from cycle.errors import ConfigError
from cycle.judge.checks import CheckContext
from cycle.judge.criteria import (
    BUILTIN_CRITERIA,
    Criterion,
    CriterionConfig,
    merge,
    resolve,
    weighted_score,
)
from cycle.judge.llm_judge import LlmJudge, judge_prompt_in
from cycle.judge.panel import combine, member_failed, panel_name
from cycle.records import Usage, Verdict
from cycle.records.scope import NO_SCOPE, CallScope

if TYPE_CHECKING:
    from cycle.llm.model import Model
    from cycle.records import AgentResult, TraceEvent
    from cycle.store import Store


class JudgedCase(Protocol):
    """What the judge reads of a case (``cycle.cases.TestCase`` is one)."""

    @property
    def id(self) -> str: ...
    @property
    def input(self) -> Any: ...
    @property
    def expected(self) -> Any: ...
    @property
    def variables(self) -> dict[str, Any]: ...
    @property
    def criteria(self) -> Sequence[CriterionConfig]: ...

__all__ = [
    "BUILTIN_CRITERIA",
    "Criterion",
    "CriterionConfig",
    "Judge",
    "JudgeResult",
    "Verdict",
]


class JudgeResult(Struct, frozen=True):
    """The case's weighted score, whether it passed, and every criterion's verdict."""

    score: float
    passed: bool
    verdicts: tuple[Verdict, ...]
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0

    @property
    def failed_required(self) -> list[str]:
        return [v.criterion_id for v in self.verdicts if v.required and not v.passed]


def _turns(trace: Sequence[TraceEvent]) -> list[tuple[int, str, str, int]]:
    """(the turn's number, what the user said, the assistant's answer to it, where that
    turn ends in the trace) for every turn the assistant answered. Turns are numbered by
    the user's messages, from 1, as the transcripts number them."""
    out: list[tuple[int, str, str, int]] = []
    said: str | None = None
    answer = ""
    n = 0
    for i, e in enumerate(trace):
        if e.kind == "user":
            if said is not None and answer:
                out.append((n, said, answer, i))
            said, answer, n = e.text, "", n + 1
        elif e.kind == "model" and e.text:
            answer = e.text
    if said is not None and answer:
        out.append((n, said, answer, len(trace)))
    return out


class Judge:
    """Scores results against criteria (the suite's, with each case's overrides)."""

    def __init__(
        self,
        criteria: Sequence[CriterionConfig | Criterion],
        model: Model | Sequence[Model] | None = None,
        threshold: float = 70.0,
        *,
        description: str = "",
    ) -> None:
        """``model``: the judge's model, or a panel's (two or more, each a different model);
        ``description``: what the agent under test is for, shown to the LLM judge."""
        self.threshold = threshold
        self._configs = [c for c in criteria if isinstance(c, CriterionConfig)]
        resolved = [c if isinstance(c, Criterion) else resolve(c, threshold=threshold)
                    for c in criteria]
        self.criteria: tuple[Criterion, ...] = tuple(resolved)
        self.models: tuple[Model, ...] = (
            () if model is None else tuple(model) if isinstance(model, Sequence) else (model,))
        names = [m.name for m in self.models]
        if len(set(names)) < len(names):
            raise ConfigError(f"a judge panel names {names} with a model twice", field="judge",
                              hint="Name each model of the panel once.")
        pairwise = [c.id for c in self.criteria if c.pairwise]
        if pairwise and len(self.models) > 1:
            # a preference has no mean over members: which one compares is the user's choice
            raise ConfigError(
                f"the judge is a panel ({', '.join(names)}) and a pairwise comparison is one "
                f"judge's (pairwise criteria: {', '.join(pairwise)})",
                field="judge",
                hint=f"Judge with one model (judge: {names[0]}), or remove 'pairwise'.")
        self._llms = tuple(LlmJudge(m, description=description) for m in self.models)
        self._per_case: dict[str, tuple[Criterion, ...]] = {}
        self.version: str | None = None
        if not self.models and any(c.kind == "llm" for c in self.criteria):
            raise ConfigError(
                "LLM criteria need a judge model",
                field="judge",
                hint="Set 'judge:' in cycle.yaml (e.g. openai:gpt-4o-mini or offline:default).",
            )

    @property
    def model(self) -> Model | None:
        """The judge's model (a panel's first member), or None without one."""
        return self.models[0] if self.models else None

    @property
    def name(self) -> str | None:
        """The model's name, or a panel's members' joined (``a + b``): the run's judge."""
        return panel_name([m.name for m in self.models]) if self.models else None

    @property
    def members(self) -> tuple[str, ...]:
        """A panel's members' names; () for a single judge."""
        return tuple(m.name for m in self.models) if len(self.models) > 1 else ()

    @property
    def offline(self) -> bool:
        return any(m.offline for m in self.models)

    def register(self, store: Store) -> str:
        """Judge with the store's judge prompt (its ``cycle-judge`` head when a person
        made one, else the built-in, saved once) and remember its version."""
        prompt, self.version = judge_prompt_in(store)
        self._llms = tuple(j if prompt is j.prompt else
                           LlmJudge(j.model, prompt, description=j.description)
                           for j in self._llms)
        return self.version

    def criteria_for(self, case: JudgedCase) -> tuple[Criterion, ...]:
        """The criteria ``case`` is judged on (the suite's with its overrides applied)."""
        if not case.criteria:
            return self.criteria
        cached = self._per_case.get(case.id)
        if cached is None:
            if len(self._configs) != len(self.criteria):
                raise ConfigError("case criteria overrides need the suite's criteria as configs")
            merged = merge(self._configs, case.criteria)
            cached = tuple(resolve(c, threshold=self.threshold) for c in merged)
            if not self._llms and any(c.kind == "llm" for c in cached):
                raise ConfigError(f"case '{case.id}' adds LLM criteria but no judge model is set",
                                  field="judge")
            self._per_case[case.id] = cached
        return cached

    async def judge(
        self,
        case: JudgedCase,
        result: AgentResult,
        *,
        iteration: int = 0,
        scope: CallScope = NO_SCOPE,
    ) -> JudgeResult:
        """Score one result. Raises EvalError/JudgeError/ModelError when it cannot."""
        criteria = self.criteria_for(case)
        verdicts: dict[str, Verdict] = {}
        checks = [c for c in criteria if c.kind == "check"]
        if checks:
            ctx = CheckContext(case, result)
            for c in checks:
                assert c.check is not None
                outcome = await c.check.aevaluate(ctx)
                verdicts[c.id] = Verdict(
                    criterion_id=c.id, kind="check", score=outcome.score,
                    passed=outcome.score >= c.pass_mark, weight=c.weight, required=c.required,
                    reasoning=outcome.reason)
        usage = Usage()
        cost = 0.0
        llm = [c for c in criteria if c.kind == "llm"]
        if llm:
            if len(self._llms) == 1:
                judged, usage, cost = await _llm_verdicts(
                    self._llms[0], llm, case, result, iteration=iteration, scope=scope)
            else:
                judged, usage, cost = await self._panel(llm, case, result, iteration=iteration,
                                                        scope=scope)
            verdicts.update(judged)
        ordered = tuple(verdicts[c.id] for c in criteria)
        score = weighted_score([(v.score, v.weight) for v in ordered])
        passed = score >= self.threshold and all(v.passed for v in ordered if v.required)
        return JudgeResult(score=score, passed=passed, verdicts=ordered, usage=usage, cost=cost)

    async def _panel(
        self, criteria: Sequence[Criterion], case: JudgedCase, result: AgentResult, *,
        iteration: int, scope: CallScope,
    ) -> tuple[dict[str, Verdict], Usage, float]:
        """Every member judges ``criteria`` at once; their verdicts combined (panel.combine).
        Every member's call runs to its end even when another fails: what was paid is kept
        in the journal, and the iteration's re-run on a resume replays it."""
        outcomes = await asyncio.gather(
            *(_llm_verdicts(j, criteria, case, result, iteration=iteration, scope=scope)
              for j in self._llms), return_exceptions=True)
        failed = [(j.model.name, o) for j, o in zip(self._llms, outcomes, strict=True)
                  if isinstance(o, BaseException)]
        if failed:
            raise member_failed(failed)
        judged = [(j.model.name, o) for j, o in zip(self._llms, outcomes, strict=True)
                  if not isinstance(o, BaseException)]
        usage, cost = Usage(), 0.0
        for _, (_, u, c) in judged:
            usage, cost = usage + u, cost + c
        return ({c.id: combine(c, [(name, verdicts[c.id]) for name, (verdicts, _, _) in judged])
                 for c in criteria}, usage, cost)


async def _llm_verdicts(
    llm: LlmJudge, criteria: Sequence[Criterion], case: JudgedCase, result: AgentResult, *,
    iteration: int, scope: CallScope,
) -> tuple[dict[str, Verdict], Usage, float]:
    """One judge model's verdicts of the LLM criteria: one call for those judged on the
    whole answer, one a turn for those judged on every turn; with its usage and cost."""
    verdicts: dict[str, Verdict] = {}
    usage = Usage()
    cost = 0.0
    whole = [c for c in criteria if not c.per_turn]
    if whole:
        judgement = await llm.score(
            whole, input=case.input, output=result.output, expected=case.expected,
            iteration=iteration, scope=scope, trace=result.trace,
        )
        usage, cost = judgement.usage, judgement.cost
        for c in whole:
            v = judgement.verdicts[c.id]
            verdicts[c.id] = Verdict(
                criterion_id=c.id, kind="llm", score=v.score, passed=v.score >= c.pass_mark,
                weight=c.weight, required=c.required, reasoning=v.reasoning)
    each = [c for c in criteria if c.per_turn]
    if each:
        turns = _turns(result.trace) or [(1, str(case.input), result.output, len(result.trace))]
        scores: dict[str, list[float]] = {c.id: [] for c in each}
        reasons: dict[str, list[str]] = {c.id: [] for c in each}
        for n, said, answer, end in turns:
            j = await llm.score(
                each, input=said, output=answer, expected=None, iteration=iteration,
                scope=scope.at(turn=n), trace=result.trace[:end])
            usage, cost = usage + j.usage, cost + j.cost
            for c in each:
                scores[c.id].append(j.verdicts[c.id].score)
                reasons[c.id].append(f"turn {n}: {j.verdicts[c.id].score:.0f}, "
                                     f"{j.verdicts[c.id].reasoning}")
        for c in each:
            mean = sum(scores[c.id]) / len(scores[c.id])
            verdicts[c.id] = Verdict(
                criterion_id=c.id, kind="llm", score=mean, passed=mean >= c.pass_mark,
                weight=c.weight, required=c.required,
                reasoning=f"mean of {len(scores[c.id])} turn(s); " + "; ".join(reasons[c.id]),
                failed_turns=tuple(t[0] for t, s in zip(turns, scores[c.id])
                                   if s < c.pass_mark))
    return verdicts, usage, cost
