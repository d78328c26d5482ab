"""The ``improve:`` section of cycle.yaml, validated by the loop (file:line errors).

    improve:
      acceptance: significant        # significant | improved | always
      stop: {any: [{target_score: 90}, {max_rounds: 5}, {max_cost: 0.5}]}
      review: auto                   # auto | prompt | tui (the CLI's flags override)
      min_priority: low              # auto review approves this priority and above
      low_score: 70                  # cases below it go to the improver (default: pass_threshold)
      batch: false                   # evaluations as provider batch jobs (half price, slow)
      validation: 0.25               # held-out cases the improver never sees (a fraction, ids or
                                     # tags, or false; default: 0.25 from 40 cases, else none)
      examples: {max: 3}             # the improver may add few-shot examples drawn from
                                     # improvement cases (default: off)
      objective: cost                # score (default) | cost: the cheapest version not worse
      margin: 2                      # than the incumbent by more than this many points,
      models: [openai:gpt-4o-mini]   # trying these agent models, then cheaper edits
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cycle.assemble.config import LoadedConfig
from cycle.improve.improver import IMPROVER_PROMPT_ID
from cycle.loop.acceptance import AcceptanceRule
from cycle.loop.stop import StopCondition, parse_stop
from cycle.records import Priority
from cycle.yamlload import LoadedYaml, validate


class JudgeGateConfig(BaseModel):
    """``improve.judge``: what the judge must have shown before a cycle trusts it."""

    model_config = ConfigDict(extra="forbid")

    min_agreement: float | None = Field(
        None, ge=-1, le=1, description="head moves only while every LLM criterion's kappa "
        "with people's labels has its 95% lower bound at or over this (cycle judge agreement).")
    confirm_labels: int | None = Field(
        None, ge=2, description="head moves only if the confirmation's gain holds with the "
        "judge's scores corrected by people's labels of this many outputs of each version "
        "(per LLM criterion); the cycle waits for them, resumable.")


#: the most examples ``examples: true`` lets a prompt hold
DEFAULT_EXAMPLES = 3


class ExamplesConfig(BaseModel):
    """``improve.examples``: few-shot examples as something the improver may propose."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max: int = Field(
        DEFAULT_EXAMPLES, ge=1, le=8, description="The most examples the prompt may hold "
        "(its own included); each is sent with every call, so each costs its tokens on "
        "every case.")


class ImproveConfig(BaseModel):
    """Options of the improvement cycle."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    acceptance: AcceptanceRule = Field(
        "significant",
        description="When a candidate replaces the incumbent: significant (the 95% interval of the "
        "paired per-case gain is above zero), improved (the mean is higher) or always.",
    )
    stop: Any = Field(
        None,
        description="Stop conditions (target_score, max_rounds, max_cost, max_duration, "
        "no_improvement, custom) composed with any/all/not. Default: {max_rounds: 5}.",
    )
    review: Literal["auto", "prompt", "tui"] | None = Field(
        None, description="Who reviews suggestions (default: the TUI; auto with --yes)."
    )
    min_priority: Priority = Field("low", description="Auto review approves this priority and above.")
    low_score: float | None = Field(
        None, ge=0, le=100, description="Cases below this score go to the improver (default: pass_threshold)."
    )
    context_tokens: int = Field(
        6000, ge=200, description="Token budget for the low cases shown to the improver (~4 chars/token)."
    )
    max_suggestions: int = Field(5, ge=1, description="Most suggestions per round.")
    improver_prompt: str = Field(
        IMPROVER_PROMPT_ID, description="The improver's prompt in the store (id or id@version)."
    )
    bump: Literal["patch", "minor", "major"] = Field("patch", description="How candidate versions are numbered.")
    required_cases: list[str] = Field(
        default_factory=list,
        description="Case ids that must not go from pass to fail (cases tagged 'required' count too).",
    )
    validation: float | bool | list[str] | str | None = Field(
        None,
        description="Held-out cases the improver never sees, reported apart; a candidate they did "
        "not gain with is rejected: a fraction (0.25), case ids or tags, or false. Default: 0.25 "
        "of a suite of 40 cases or more, else none.",
    )
    batch: bool = Field(
        False, description="Send the evaluations' model calls (agent, judge, simulated users) "
        "as provider batch jobs at half the price (see run.batch); the improver's own call "
        "stays live.")
    allowed_variables: list[str] = Field(
        default_factory=list,
        description="Variables an improver edit may make the prompt read besides the case "
        "inputs' own (ones production gives the prompt); an edit reading any other, such as "
        "{{ expected }}, is refused before review.",
    )
    judge: JudgeGateConfig | None = Field(
        None, description="What the judge's measured agreement with people must be before "
        "head moves: {min_agreement: 0.6} (default: no gate; reports say when the judge is "
        "uncalibrated).")
    max_iterations: int | None = Field(
        None, ge=1, description="Iterations per case an inconclusive comparison (a round's or the "
        "confirmation's) may grow the cases that decide it to (default: twice run.iterations).",
    )
    population: int = Field(
        1, ge=1, le=16, description="Candidates a round proposes, each from a parent on the "
        "Pareto frontier of the versions evaluated so far (best on some case), each screened "
        "on screen_cases cases once before the one that gained most is evaluated in full; 1: "
        "one candidate from the incumbent, no screen.")
    screen_cases: int = Field(
        8, ge=1, description="Cases in a population's screen (half of them the parent's weak "
        "ones; never a held-out case), one iteration each.")
    merge: bool = Field(
        True, description="With a population: one candidate a round may merge two versions of "
        "the Pareto frontier whose gains fall on different cases (their edits since a common "
        "ancestor applied together; conflicting edits resolved by the improver), screened and "
        "judged like the others. false: every candidate is the improver's.")

    examples: ExamplesConfig | None = Field(
        None, description="Let the improver add, replace or remove few-shot examples in the "
        "prompt, drawn from the improvement cases it is shown (never a held-out one): "
        "{max: 3}, or true for that. Default: off.")

    objective: Literal["score", "cost"] = Field(
        "score", description="What a candidate must do to replace the incumbent: score "
        "(a credible gain, as acceptance says) or cost (a lower mean agent cost per case, "
        "and a score not worse by more than margin points: a one-sided non-inferiority "
        "test at the same error levels).")
    margin: float | None = Field(
        None, ge=0, le=100, description="With objective: cost, the points of score (0-100) "
        "a cheaper version may lose at most; required there.")
    models: list[str] = Field(
        default_factory=list, description="With objective: cost, agent models (provider:model) "
        "a round may move the prompt to (its params.model), tried in order, each once, before "
        "the improver is asked for cheaper edits.")

    @model_validator(mode="after")
    def _cost(self) -> ImproveConfig:
        if self.objective == "cost":
            if self.margin is None:
                raise ValueError("objective: cost needs margin: the points of score a cheaper "
                                 "version may lose at most (e.g. margin: 2)")
            if self.population > 1:
                raise ValueError("objective: cost works with population: 1 (a population's "
                                 "screens look for gains in score)")
            if self.judge is not None and self.judge.confirm_labels:
                raise ValueError("objective: cost does not yet correct the confirmation with "
                                 "people's labels (judge.confirm_labels tests a gain in "
                                 "score): remove judge.confirm_labels")
        elif self.models:
            raise ValueError("models are tried only with objective: cost (a cheaper model "
                             "is not expected to score higher)")
        return self

    @field_validator("examples", mode="before")
    @classmethod
    def _examples(cls, value: Any) -> Any:
        if value is True:
            return {"max": DEFAULT_EXAMPLES}
        if value is False or value is None:
            return None
        if not isinstance(value, dict):  # pydantic reports a ValueError, not a TypeError
            raise ValueError(f"examples is a mapping such as {{max: 3}} (or true, or "  # noqa: TRY004
                             f"false), not {value!r}")
        return value

    @field_validator("stop")
    @classmethod
    def _check_stop(cls, value: Any) -> Any:
        parse_stop(value)  # a ValueError names the bad node; pydantic adds file:line
        return value

    def stop_condition(self, base_dir: str | None = None) -> StopCondition:
        return parse_stop(self.stop, base_dir=base_dir)


def load_improve_config(loaded: LoadedConfig) -> ImproveConfig:
    """The validated ``improve:`` section of a loaded cycle.yaml (defaults when absent)."""
    doc: LoadedYaml = loaded.doc
    if not isinstance(doc.data, dict) or doc.data.get("improve") is None:
        return ImproveConfig()
    return validate(ImproveConfig, doc, prefix=("improve",), what="the improve section")
