"""Judging one result: deterministic checks plus one LLM call for the LLM criteria.

    judge = Judge(config.criteria, model=judge_model, threshold=70)
    verdict = await judge.judge(case, agent_result, iteration=0)
    verdict.score, verdict.passed, verdict.verdicts

A check that raises, or an LLM verdict that is missing or malformed after
the model's repair retry, raises (``EvalError``/``JudgeError``): the runner
records the iteration as an *error*, never as a zero.
"""

from __future__ import annotations

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
        model: Model | None = None,
        threshold: float = 70.0,
        *,
        description: str = "",
    ) -> None:
        """``description``: what the agent under test is for, shown to the LLM judge."""
        self.threshold = threshold
        self._configs = [c for c in criteria if isinstance(c, CriterionConfig)]
        resolved = [c if isinstance(c, Criterion) else resolve(c, threshold=threshold)
                    for c in criteria]
        self.criteria: tuple[Criterion, ...] = tuple(resolved)
        self.model = model
        self._llm = LlmJudge(model, description=description) if model is not None else None
        self._per_case: dict[str, tuple[Criterion, ...]] = {}
        self.version: str | None = None
        if model is None and any(c.kind == "llm" for c in self.criteria):
            raise ConfigError(
                "LLM criteria need a judge model",
                field="judge",
                hint="Set 'judge:' in cycle.yaml (e.g. openai:gpt-4o-mini or offline:default).",
            )

    @property
    def name(self) -> str | None:
        return self.model.name if self.model is not None else None

    @property
    def offline(self) -> bool:
        return self.model is not None and self.model.offline

    def register(self, store: Store) -> str:
        """Judge with the store's judge prompt (its ``cycle-judge`` head when a person
        made one, else the built-in, saved once) and remember its version."""
        prompt, self.version = judge_prompt_in(store)
        if self._llm is not None and prompt is not self._llm.prompt:
            self._llm = LlmJudge(self._llm.model, prompt, description=self._llm.description)
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
            if self._llm is None and any(c.kind == "llm" for c in cached):
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
        llm = [c for c in criteria if c.kind == "llm" and not c.per_turn]
        if llm:
            assert self._llm is not None
            judgement = await self._llm.score(
                llm, input=case.input, output=result.output, expected=case.expected,
                iteration=iteration, scope=scope, trace=result.trace,
            )
            usage, cost = judgement.usage, judgement.cost
            for c in llm:
                v = judgement.verdicts[c.id]
                verdicts[c.id] = Verdict(
                    criterion_id=c.id, kind="llm", score=v.score, passed=v.score >= c.pass_mark,
                    weight=c.weight, required=c.required, reasoning=v.reasoning)
        each = [c for c in criteria if c.kind == "llm" and c.per_turn]
        if each:
            assert self._llm is not None
            turns = _turns(result.trace) or [(1, str(case.input), result.output, len(result.trace))]
            scores: dict[str, list[float]] = {c.id: [] for c in each}
            reasons: dict[str, list[str]] = {c.id: [] for c in each}
            for n, said, answer, end in turns:
                j = await self._llm.score(
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
        ordered = tuple(verdicts[c.id] for c in criteria)
        score = weighted_score([(v.score, v.weight) for v in ordered])
        passed = score >= self.threshold and all(v.passed for v in ordered if v.required)
        return JudgeResult(score=score, passed=passed, verdicts=ordered, usage=usage, cost=cost)
