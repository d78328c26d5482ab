"""Runs, cycles and rounds as the store keeps them."""

from __future__ import annotations

from typing import Any

from msgspec import Struct
from pydantic import BaseModel, ConfigDict, Field

#: what a round's judge figure says when no person has labelled an output it judged
UNCALIBRATED = "uncalibrated (no labels)"


class RunRow(BaseModel):
    """A row of ``runs``: one evaluation of a prompt version on a suite."""

    model_config = ConfigDict(frozen=True)

    id: str
    prompt_id: str | None
    version: str | None
    status: str
    started_at: str | None
    finished_at: str | None
    config: dict[str, Any]
    agent_model: str | None
    judge_model: str | None
    judge_version: str | None
    offline: bool
    cycle_id: str | None
    round: int | None
    role: str | None
    summary: dict[str, Any] | None


class CycleRow(BaseModel):
    """One improvement cycle as stored."""

    model_config = ConfigDict(frozen=True)

    id: str
    prompt_id: str
    status: str
    config: dict[str, Any] = Field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None
    stop_reason: str | None = None
    initial_version: str | None = None
    final_version: str | None = None
    total_cost: float | None = None
    #: the process running it, "host:pid" (a running cycle whose process is gone was killed)
    owner: str | None = None


class RoundRow(BaseModel):
    """One round as stored. Round 0 evaluates the starting version (the baseline)."""

    model_config = ConfigDict(frozen=True)

    cycle_id: str
    round: int
    incumbent_version: str | None = None
    candidate_version: str | None = None
    baseline_run_id: str | None = None
    candidate_run_id: str | None = None
    status: str | None = None
    accepted: bool | None = None
    score: float | None = None
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    cost: float | None = None
    started_at: str | None = None
    finished_at: str | None = None
    reason: str | None = None
    incumbent_score: float | None = None
    pass_rate: float | None = None
    #: "baseline" (round 0), "improve", or "confirm"
    stage: str | None = None
    #: the mean gain on the cases the improver saw and on the held-out ones (None: no split)
    seen_delta: float | None = None
    held_out_delta: float | None = None
    #: each pairwise criterion's comparison of the candidate with the incumbent: wins,
    #: losses, ties (cases), pairs, order_flips, p_value (None: scores alone decided)
    pairwise: list[dict[str, Any]] | None = None

    @property
    def improves(self) -> bool:
        """An improvement round (not the baseline, not the confirmation)."""
        return self.stage == "improve"

    @property
    def version(self) -> str | None:
        """The version this round evaluated: the candidate, or the incumbent in round 0."""
        return self.candidate_version if self.round >= 1 else self.incumbent_version


class ScreenRow(BaseModel):
    """One candidate of a round's population as screened (``improve.population``): the
    version it built from its parent (a merge: from two), scored once on a minibatch of
    cases against its parent's scores there."""

    model_config = ConfigDict(frozen=True)

    cycle_id: str
    round: int
    #: the candidate's place in the round's population (0 first)
    slot: int
    version: str
    parent: str
    #: a merge's other parent: the version whose edits it brought to ``parent``
    second_parent: str | None = None
    #: the screen's run (``<cycle>-r<round>-s<slot>``)
    run_id: str
    cases: int
    #: mean gain over the parent on the minibatch (None: no case was judged)
    gain: float | None = None
    #: it went on to the round's full evaluation
    kept: bool = False


class JudgeKappa(Struct, frozen=True):
    """A judge's agreement with people in one figure, as a cycle shows it beside each
    round's score: Cohen's kappa on pass/fail over every label of every LLM criterion of
    the runs it judged (the criteria pooled, an output's labels resampled together), its
    95% interval, and how many labels it rests on (``cycle.judge.calibration.judge_kappa``)."""

    #: the judge model and its prompt version (cycle-judge@VERSION)
    model: str | None
    version: str | None
    kappa: float | None
    kappa_ci: tuple[float, float] | None
    labels: int

    def text(self) -> str:
        """"kappa 0.50 [0.10, 0.80], n 8", or that the judge is uncalibrated."""
        if not self.labels:
            return UNCALIBRATED
        return f"kappa {self._figure()}, n {self.labels}"

    def compact(self) -> str:
        """The figure in a table cell: "0.50 [0.10, 0.80] n 8", or "uncalibrated"."""
        return f"{self._figure()} n {self.labels}" if self.labels else "uncalibrated"

    def _figure(self) -> str:
        if self.kappa is None:  # everyone gave one answer: kappa is undefined
            return "—"
        ci = self.kappa_ci
        return _two(self.kappa) + (f" [{_two(ci[0])}, {_two(ci[1])}]" if ci else "")

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "version": self.version, "kappa": self.kappa,
                "kappa_ci": list(self.kappa_ci) if self.kappa_ci else None,
                "labels": self.labels, "text": self.text()}


def _two(x: float) -> str:
    """``x`` to two decimals, a tiny negative shown as 0.00 (not -0.00)."""
    shown = f"{x:.2f}"
    return "0.00" if shown == "-0.00" else shown
