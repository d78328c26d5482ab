"""The judge prompt played as the agent under test (``cycle judge improve``): an agent in
the loop's sense (``cycle.agents.Agent``), kept with the judge it plays (how a case is
played needs nothing of how it is judged; this is the other way round).

A case is one output people labelled, on one criterion; the agent's answer is the verdict
of the judge prompt under improvement on it, from the same messages a run's judge sends
(cycle.judge.llm_judge.LlmJudge: one structured call), as JSON: ``{"score", "passed",
"reasoning"}``. What it judges (the case's input and reference, the output, the
transcript, the criterion) is held here by case id: the case's own input is what the
improver and the reports are shown of it.

The criterion's rubric is the one the judge prompt under improvement carries
(``Prompt.rubrics``, cycle.yaml's at the start, edited by the cycle), where the case takes
its criterion's rubric from cycle.yaml's list; a case that sets its own keeps it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, Protocol

from msgspec import Struct

from cycle.judge.criteria import Criterion, CriterionConfig, resolve, with_rubric
from cycle.judge.llm_judge import LlmJudge
from cycle.llm.model import Model
from cycle.records import AgentResult, Prompt, TraceEvent
from cycle.records.scope import NO_SCOPE, CallScope


class _Case(Protocol):
    """What the agent reads of a case (a ``cycle.cases.TestCase``): its id."""

    @property
    def id(self) -> str: ...


class JudgedOutput(Struct, frozen=True):
    """A stored output to judge again, and the criterion its label is on."""

    criterion: Criterion
    input: Any
    output: str
    expected: Any = None
    trace: tuple[TraceEvent, ...] = ()
    #: the criterion's entry whose rubric the judge prompt's carried one replaces, and the
    #: suite's pass threshold it resolves with; None: the case sets its own rubric
    config: CriterionConfig | None = None
    threshold: float = 70.0


class JudgeAgent:
    """Answers a labelled output's case with the judge prompt's verdict on it."""

    def __init__(self, prompt: Prompt, model: Model, outputs: Mapping[str, JudgedOutput], *,
                 description: str = "", owns_model: bool = True) -> None:
        """``outputs``: by case id; ``description``: cycle.yaml's ``agent.description``, as
        the run's judge was shown it."""
        self.judge = LlmJudge(model, prompt, description=description)
        self.rubrics = prompt.rubrics
        self.outputs = outputs
        self._resolved: dict[tuple[str, int], Criterion] = {}
        self.model = model
        self.name: str = model.name
        self.offline: bool = model.offline
        self._owns_model = owns_model

    async def run(self, case: _Case, *, iteration: int, scope: CallScope = NO_SCOPE
                  ) -> AgentResult:
        o = self.outputs[case.id]
        criterion = self._criterion(o)
        began = time.monotonic()
        judged = await self.judge.score([criterion], input=o.input, output=o.output,
                                        expected=o.expected, iteration=iteration, scope=scope,
                                        trace=o.trace)
        v = judged.verdicts[criterion.id]
        answer = {"score": v.score, "passed": v.score >= criterion.pass_mark,
                  "reasoning": v.reasoning}
        took = time.monotonic() - began
        return AgentResult(output=json.dumps(answer, ensure_ascii=False), structured=answer,
                           usage=judged.usage, cost=judged.cost, latency=took, duration=took,
                           model=self.name)

    def _criterion(self, o: JudgedOutput) -> Criterion:
        """The criterion as judged with the carried rubric (see the module docstring)."""
        text = self.rubrics.get(o.criterion.id)
        if o.config is None or text is None:
            return o.criterion
        key = (text, id(o.config))
        if key not in self._resolved:
            self._resolved[key] = resolve(with_rubric(o.config, text), threshold=o.threshold)
        return self._resolved[key]

    async def aclose(self) -> None:
        if self._owns_model:
            await self.model.aclose()
