"""Reviewers: the automatic policy and the plain terminal prompt."""

from __future__ import annotations

import asyncio

import click
from click.testing import CliRunner

from cycle.loop.review import AutoReviewer, PromptReviewer
from cycle.records import ReviewRequest, Suggestion

SUGGESTIONS = [
    Suggestion(type="system_prompt", priority="high", current_value="Be brief.", suggested_value="Be brief and kind."),
    Suggestion(type="system_prompt", priority="medium", current_value="", suggested_value="Cite the order id."),
    Suggestion(type="parameters", priority="low", suggested_value='{"temperature": 0}'),
]
REQUEST = ReviewRequest(
    cycle_id="c1", round=1, prompt_id="support", version="1.0.0",
    current={"system": "You help.\nBe brief.", "user_template": "{{ input }}", "params": "{}"},
    suggestions=SUGGESTIONS, score=55.0,
)


def test_auto_reviewer_approves_by_minimum_priority() -> None:
    everything = asyncio.run(AutoReviewer().review(REQUEST))
    assert [s.decision for s in everything] == ["approved"] * 3
    some = asyncio.run(AutoReviewer(min_priority="medium").review(REQUEST))
    assert [s.decision for s in some] == ["approved", "approved", "rejected"]
    assert "below the minimum medium" in some[2].reason


def test_prompt_reviewer_approve_reject_edit() -> None:
    decided: list[Suggestion] = []

    @click.command()
    def review() -> None:
        decided.extend(asyncio.run(PromptReviewer().review(REQUEST)))

    result = CliRunner().invoke(review, input="a\nr\ntoo vague\ne\n{\"temperature\": 0.1}\n")
    assert result.exit_code == 0, result.output
    assert "+Be brief and kind." in result.output  # the diff preview is shown
    assert [s.decision for s in decided] == ["approved", "rejected", "edited"]
    assert decided[1].reason == "too vague"
    assert decided[2].value == '{"temperature": 0.1}'


def test_prompt_reviewer_approve_all_the_rest() -> None:
    decided: list[Suggestion] = []

    @click.command()
    def review() -> None:
        decided.extend(asyncio.run(PromptReviewer().review(REQUEST)))

    result = CliRunner().invoke(review, input="r\n\nA\n")
    assert result.exit_code == 0, result.output
    assert [s.decision for s in decided] == ["rejected", "approved", "approved"]
    assert decided[0].reason == "rejected by the reviewer"


def test_prompt_reviewer_edits_the_text_a_suggestion_replaces() -> None:
    """The improver quoted "Be brief." where the prompt says "You help.": t points the edit
    at the right text, the new diff is shown, and the approval keeps the new target."""
    decided: list[Suggestion] = []

    @click.command()
    def review() -> None:
        decided.extend(asyncio.run(PromptReviewer().review(REQUEST)))

    result = CliRunner().invoke(review, input="t\nYou help.\na\nR\n\n")
    assert result.exit_code == 0, result.output
    assert "-You help." in result.output  # the diff against the new target
    assert decided[0].decision == "edited" and decided[0].current_value == "You help."
    assert decided[0].value == "Be brief and kind."
