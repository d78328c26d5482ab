"""Suggestion: one edit the improver proposes, and the review seam.

The loop asks a ``Reviewer`` for a decision on each round's suggestions. The
reviewer may be an automatic policy (headless), a plain terminal prompt or
the TUI; the loop does not know which.
"""

from __future__ import annotations

import uuid
from typing import Literal, Protocol

from pydantic import BaseModel, Field

SuggestionType = Literal["system_prompt", "user_prompt", "parameters"]
Priority = Literal["high", "medium", "low"]
Decision = Literal["pending", "approved", "rejected", "edited", "skipped"]

PRIORITY_ORDER: dict[str, int] = {"high": 0, "medium": 1, "low": 2}


class Suggestion(BaseModel):
    """One proposed edit, as the improver returns it plus its review state."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    type: SuggestionType = Field(description="Which part of the prompt it edits.")
    priority: Priority = "medium"
    current_value: str = Field(
        "", description="Text to replace (empty: append to the system prompt / template)."
    )
    suggested_value: str = Field(description="The replacement text.")
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
    #: the incumbent's rendered fields, for previews: system, user_template, params (JSON)
    current: dict[str, str] = Field(default_factory=dict)
    suggestions: list[Suggestion]
    score: float | None = None


class Reviewer(Protocol):
    """Decides on suggestions. Returns them with ``decision`` (and ``reason``/``edited_value``) set."""

    name: str

    async def review(self, request: ReviewRequest) -> list[Suggestion]: ...
