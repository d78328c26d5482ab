"""Criteria: what a case is judged on, with weights, pass marks and required flags.

A criterion is either a deterministic **check** (``check: {type: contains, ...}``)
or an **LLM criterion** scored by the judge model: one of the built-ins
(``accuracy``, ``consistency``, ``relevance``, ``step_by_step``, used by id
alone) or a custom ``rubric``.

Pass marks. Every criterion scores 0-100 and *passes* when its score reaches
its pass mark: ``pass_mark`` when given, else 100 for a check (a binary
check must succeed; a fractional check such as ``contains`` must find every
value) and the suite's ``pass_threshold`` for an LLM criterion.

A case's score is the weighted mean of its criteria's scores. It passes when
the score reaches the pass threshold (default 70) **and** every ``required``
criterion passes.

Pairwise. An LLM criterion with ``pairwise: true`` is still scored like any other, but
a cycle accepts a candidate on it by the judge's direct comparison of the two versions'
outputs, not by the difference of their scores (cycle.loop.preference); a check cannot
compare, nor can a per-turn criterion, and a case cannot make a criterion pairwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Annotated, Literal

from msgspec import Struct
from pydantic import BaseModel, ConfigDict, Field

from cycle.errors import ConfigError
from cycle.judge.checks import (
    CompletedWithin,
    Contains,
    ContainsAny,
    CostWithin,
    ExactMatch,
    JsonSchema,
    MaxLatency,
    MaxTokens,
    NotContains,
    PythonCheck,
    Regex,
)
from cycle.judge.toolforge import ToolforgeCheck
from cycle.judge.trace_checks import (
    EventCount,
    NoToolErrors,
    OnlyTools,
    StateValue,
    ToolCalled,
    ToolNotCalled,
    ToolOrder,
    ToolsCalled,
    TurnCount,
)

#: every check, by its ``type``
CheckSpec = Annotated[
    ExactMatch | Contains | ContainsAny | NotContains | Regex | JsonSchema | MaxLatency
    | MaxTokens | CostWithin | CompletedWithin | PythonCheck
    | ToolCalled | ToolsCalled | OnlyTools | ToolNotCalled | ToolOrder | NoToolErrors
    | EventCount | StateValue | TurnCount | ToolforgeCheck,
    Field(discriminator="type"),
]

#: built-in LLM criteria and their rubrics (what the judge is told to look for)
BUILTIN_CRITERIA: dict[str, str] = {
    "accuracy": (
        "Accuracy: the response is factually correct and answers what was asked. When a "
        "reference answer is given, the response agrees with it in substance (wording may "
        "differ). Invented facts, wrong numbers or names, and claims that contradict the "
        "input lower the score sharply."
    ),
    "consistency": (
        "Consistency: the response does not contradict itself or the input; names, numbers "
        "and commitments stay the same throughout, and the tone and format are uniform."
    ),
    "relevance": (
        "Relevance: the response addresses the user's actual request and stays on topic; "
        "it includes what the request needs and leaves out padding and unrelated material."
    ),
    "step_by_step": (
        "Step by step: the response reasons or instructs in clear, ordered steps that a "
        "reader can follow; each step follows from the previous one and none is missing."
    ),
}


class CriterionConfig(BaseModel):
    """One criterion as written in cycle.yaml or in a case (where it overrides by id)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    id: str = Field(min_length=1, description="Unique name of the criterion, e.g. 'accuracy'.")
    description: str | None = Field(
        None, description="What it checks, in words (shown in reports; the judge reads it)."
    )
    # bounded: weights of 1e308 overflow the weighted mean to nan, stored as the case's score
    weight: float = Field(1.0, gt=0, le=1_000_000, description="Its weight in the case's "
                          "weighted mean (above 0, at most 1,000,000).")
    required: bool = Field(
        False, description="The case fails when this criterion fails, whatever the mean."
    )
    pass_mark: float | None = Field(
        None, ge=0, le=100,
        description="Score at which it passes (default: 100 for checks, pass_threshold for LLM).",
    )
    check: CheckSpec | None = Field(None, description="A deterministic check (see check types).")
    rubric: str | None = Field(None, description="A custom LLM criterion: what the judge scores.")
    per_turn: bool = Field(
        False, description="Judge an LLM criterion on every assistant turn of a conversation "
        "and average the scores (one judge call per turn).")
    scale: Literal[10, 100] = Field(
        100, description="The scale the judge scores an LLM criterion on: 0-100, or 0-10 (seed "
        "004's LLMJudge; passes at 7 unless pass_mark says otherwise). Reported 0-100.",
    )
    pairwise: bool = Field(
        False, description="A cycle accepts a candidate on this LLM criterion by the judge's "
        "direct preference of the candidate's outputs over the incumbent's (each pair judged "
        "in both orders, order flips as ties, a one-sided sign test over the cases), not by "
        "the difference of their scores (cycle.loop.preference).",
    )


class Criterion(Struct, frozen=True):
    """A resolved criterion, ready to judge with."""

    id: str
    description: str
    kind: Literal["check", "llm"]
    weight: float = 1.0
    required: bool = False
    pass_mark: float = 100.0
    check: CheckSpec | None = None
    #: the judge's scale for an LLM criterion (its scores are reported 0-100)
    scale: int = 100
    #: judged on every assistant turn and averaged
    per_turn: bool = False
    #: a cycle's acceptance compares the two versions' outputs on it directly
    pairwise: bool = False


def resolve(config: CriterionConfig, *, threshold: float) -> Criterion:
    """Turn a config entry into a Criterion; raises ConfigError when it is incomplete."""
    if config.check is not None and config.rubric is not None:
        raise ConfigError(
            f"criterion '{config.id}' has both 'check' and 'rubric'",
            field=config.id,
            hint="A criterion is either a deterministic check or an LLM rubric; split it in two.",
        )
    if config.check is not None and config.per_turn:
        raise ConfigError(
            f"criterion '{config.id}' is a check: 'per_turn' is for LLM criteria",
            field=config.id, hint="A check reads the whole trace; remove 'per_turn'.",
        )
    if config.check is not None and config.scale != 100:
        raise ConfigError(
            f"criterion '{config.id}' is a check: 'scale' is for LLM criteria",
            field=config.id, hint="A check scores 0-100 (or 100/0); remove 'scale'.",
        )
    if config.check is not None and config.pairwise:
        # a check's score is the same whichever answer is shown first: there is no judge
        # to ask which answer is better, and its score difference is already exact
        raise ConfigError(
            f"criterion '{config.id}' is a check: 'pairwise' is for LLM criteria",
            field=config.id,
            hint="A check cannot compare two answers; remove 'pairwise', or make the "
            "criterion an LLM rubric.",
        )
    if config.per_turn and config.pairwise:
        raise ConfigError(
            f"criterion '{config.id}' has both 'per_turn' and 'pairwise'",
            field=config.id,
            hint="A pairwise comparison reads each version's whole answer; remove one of them.",
        )
    if config.check is not None:
        description = config.description or f"{config.check.type} check"
        return Criterion(
            id=config.id, description=description, kind="check", weight=config.weight,
            required=config.required,
            pass_mark=100.0 if config.pass_mark is None else config.pass_mark,
            check=config.check,
        )
    rubric = config.rubric or BUILTIN_CRITERIA.get(config.id)
    if rubric is None:
        raise ConfigError(
            f"criterion '{config.id}' is neither a check nor an LLM criterion",
            field=config.id,
            hint="Add 'check: {type: ...}' or 'rubric: \"...\"', or use a built-in LLM criterion: "
            + ", ".join(BUILTIN_CRITERIA) + ".",
        )
    # what the judge reads: the user's description first when both are given
    description = rubric if not config.description else (
        f"{config.description.rstrip('.')}. {rubric}" if config.rubric else config.description
    )
    default_mark = 70.0 if config.scale == 10 else threshold  # 7 of 10, as seed 004's LLMJudge
    return Criterion(
        id=config.id, description=description, kind="llm", weight=config.weight,
        required=config.required,
        pass_mark=default_mark if config.pass_mark is None else config.pass_mark,
        scale=config.scale, per_turn=config.per_turn, pairwise=config.pairwise,
    )


def rubric_of(config: CriterionConfig) -> tuple[str, str]:
    """Which field of an LLM criterion's entry holds the text the judge reads as its rubric,
    and that text: ``rubric`` when set; else, for a built-in, ``description`` when set (it
    is read instead of the built-in's text), or the built-in's text (written back as a new
    ``rubric``). What ``cycle judge improve`` carries and edits."""
    if config.rubric is not None:
        return "rubric", config.rubric
    if config.description:
        return "description", config.description
    return "rubric", BUILTIN_CRITERIA.get(config.id, "")


def with_rubric(config: CriterionConfig, text: str) -> CriterionConfig:
    """The entry with its rubric (``rubric_of``) replaced by ``text``."""
    return config.model_copy(update={rubric_of(config)[0]: text})


def merge(
    suite: Sequence[CriterionConfig], overrides: Iterable[CriterionConfig]
) -> list[CriterionConfig]:
    """The suite's criteria with a case's entries applied: same id -> the fields the case
    sets replace the suite's; a new id is added."""
    merged = {c.id: c for c in suite}
    for o in overrides:
        base = merged.get(o.id)
        if base is None:
            merged[o.id] = o
        else:
            merged[o.id] = base.model_copy(
                update={name: getattr(o, name) for name in o.model_fields_set if name != "id"}
            )
    return list(merged.values())


#: decimals a weighted score keeps: three criteria at 100 weighted 0.1 each summed to
#: 99.99999999999999, which failed a pass_threshold of 100 with every criterion passing
SCORE_DECIMALS = 9


def weighted_score(scores: Sequence[tuple[float, float]]) -> float:
    """Weighted mean of (score, weight) pairs (exact sums, kept to ``SCORE_DECIMALS``: a
    score equal to the threshold reaches it); all weights zero -> plain mean."""
    total = math.fsum(w for _, w in scores)
    if not scores:
        return 0.0
    if total <= 0:
        return round(math.fsum(s for s, _ in scores) / len(scores), SCORE_DECIMALS)
    return round(math.fsum(s * w for s, w in scores) / total, SCORE_DECIMALS)
