"""Suggestions: the edits the improver proposes, their review state, and what a reviewer is asked."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, Field

#: the edits of the prompt's text and parameters
EditType = Literal["system_prompt", "user_prompt", "parameters", "tool_description"]
#: ``example``: add, replace or remove a few-shot example (improve.examples); ``rubric``:
#: edit a criterion's rubric carried by the judge prompt (cycle judge improve)
SuggestionType = Literal["system_prompt", "user_prompt", "parameters", "tool_description",
                         "example", "rubric"]
Priority = Literal["high", "medium", "low"]
Decision = Literal["pending", "approved", "rejected", "edited", "skipped"]

PRIORITY_ORDER: dict[str, int] = {"high": 0, "medium": 1, "low": 2}


class Suggestion(BaseModel):
    """One proposed edit, as the improver returns it plus its review state."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    type: SuggestionType = Field(description="Which part of the prompt it edits.")
    priority: Priority = "medium"
    tool: str = Field("", description="For tool_description: the tool whose description it edits.")
    criterion: str = Field("", description="For rubric: the criterion whose rubric it edits.")
    current_value: str = Field(
        "", description="Text to replace (empty: append to the system prompt / template); "
        "for an example: the output of the example it replaces or removes (empty: add one)."
    )
    suggested_value: str = Field(
        description="The replacement text; for an example: its output (empty: remove it).")
    source_case: str = Field(
        "", description="For an example: the id of the case it is drawn from.")
    example_input: dict[str, Any] | str | None = Field(
        None, description="For an example: its input, the source case's (cycle fills it in "
        "from the case, never the improver).")
    reasoning: str = ""
    expected_improvement: str = ""
    target_cases: list[str] = Field(default_factory=list, description="Ids of the cases it targets.")
    # -- review state ------------------------------------------------------
    decision: Decision = "pending"
    #: why it was rejected (goes back to the improver) or skipped (could not be applied)
    reason: str = ""
    #: the reviewer's replacement for suggested_value, when edited
    edited_value: str | None = None

    @property
    def value(self) -> str:
        """What to apply: the edit when edited, else the suggestion."""
        return self.edited_value if self.edited_value is not None else self.suggested_value

    @property
    def accepted(self) -> bool:
        return self.decision in ("approved", "edited")


class ReviewRequest(BaseModel):
    """What a reviewer is asked to decide on."""

    cycle_id: str
    round: int
    prompt_id: str
    version: str
    #: the incumbent's fields, for previews: system, user_template, params, and tools,
    #: examples and rubrics when it has some (JSON)
    current: dict[str, str] = Field(default_factory=dict)
    suggestions: list[Suggestion]
    score: float | None = None
    #: which of a population's candidates this is, and from what ("candidate 2 of 3, a
    #: merge of 1.0.1 and 1.0.3"); empty in a round of one
    candidate: str = ""


class StoredSuggestion(Suggestion):
    """A suggestion with where it was made and whether it made it into a candidate."""

    cycle_id: str
    round: int
    applied: bool = False
    #: which candidate of the round's population it was made for (0: a round of one)
    slot: int = 0
    #: who decided on it (cycle.authors): the reviewing person, the policy on a person's
    #: behalf ("policy:auto (alice)"), or the cycle's guard ("cycle (alice)"); None while
    #: pending, and for decisions stored before authors were recorded
    decided_by: str | None = None
    #: when it was decided (UTC, ISO 8601)
    decided_at: str | None = None


class RejectedSuggestion(BaseModel):
    """A suggestion already tried (or refused) and why, so the improver does not repeat it."""

    type: SuggestionType
    tool: str = ""
    criterion: str = ""
    current_value: str = ""
    suggested_value: str
    reason: str
