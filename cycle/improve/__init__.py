"""cycle.improve: the improver model, suggestions, applying them and diff previews."""

from cycle.improve.apply import (
    ApplyResult,
    apply_one,
    apply_suggestions,
    prompt_diff,
    suggestion_diff,
)
from cycle.improve.improver import (
    IMPROVER_PROMPT_ID,
    Improver,
    ImproverInput,
    LowCase,
    ensure_improver_prompt,
)
from cycle.loop.review import Reviewer
from cycle.records import RejectedSuggestion, ReviewRequest, Suggestion

__all__ = [
    "IMPROVER_PROMPT_ID",
    "ApplyResult",
    "Improver",
    "ImproverInput",
    "LowCase",
    "RejectedSuggestion",
    "ReviewRequest",
    "Reviewer",
    "Suggestion",
    "apply_one",
    "apply_suggestions",
    "ensure_improver_prompt",
    "prompt_diff",
    "suggestion_diff",
]
