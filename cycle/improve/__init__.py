"""cycle.improve: the improver model, suggestions, applying them and diff previews.

Who decides on suggestions (the ``Reviewer``) is the loop's business: cycle.loop.review."""

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
from cycle.records import RejectedSuggestion, ReviewRequest, Suggestion

__all__ = [
    "IMPROVER_PROMPT_ID",
    "ApplyResult",
    "Improver",
    "ImproverInput",
    "LowCase",
    "RejectedSuggestion",
    "ReviewRequest",
    "Suggestion",
    "apply_one",
    "apply_suggestions",
    "ensure_improver_prompt",
    "prompt_diff",
    "suggestion_diff",
]
