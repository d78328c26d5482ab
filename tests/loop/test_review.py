"""Reviewers: the automatic policy and the plain terminal prompt."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from cycle.assemble import build_loop
from cycle.improve.apply import apply_suggestions, whole_prompt_edit
from cycle.loop.review import AutoReviewer, PromptReviewer
from cycle.records import Prompt, ReviewRequest, Suggestion

from .conftest import suggestion

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

    result = CliRunner().invoke(review, input="a\nr\ntoo vague\ne\n{\"temperature\": 0.1}\n\n")
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

    result = CliRunner().invoke(review, input="r\n\nA\n\n")
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

    result = CliRunner().invoke(review, input="t\nYou help.\na\nR\n\n\n")
    assert result.exit_code == 0, result.output
    assert "-You help." in result.output  # the diff against the new target
    assert decided[0].decision == "edited" and decided[0].current_value == "You help."
    assert decided[0].value == "Be brief and kind."


def test_prompt_reviewer_rewrites_the_whole_candidate_in_the_editor(tmp_path: Path) -> None:
    """After the decisions, w opens the candidate (the approved edits applied) in $EDITOR;
    the reviewer's text comes back as one more edit, applied last, and is what is evaluated."""
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib\n"
        "f = pathlib.Path(sys.argv[2])\n"
        "pathlib.Path(sys.argv[1]).write_text(f.read_text())\n"  # what the editor was given
        "f.write_text(f.read_text().replace('You help.', 'You help customers of Acme.'))\n")
    seen = tmp_path / "seen.txt"
    decided: list[Suggestion] = []

    @click.command()
    def review() -> None:
        decided.extend(asyncio.run(PromptReviewer().review(REQUEST)))

    result = CliRunner(env={"EDITOR": f'"{sys.executable}" "{editor}" "{seen}"'}).invoke(
        review, input="a\nr\n\nr\n\nw\n")
    assert result.exit_code == 0, result.output
    # the editor was given the candidate as the decisions leave it
    assert seen.read_text().rstrip("\n") == "You help.\nBe brief and kind."
    assert "+You help customers of Acme." in result.output  # the rewrite's diff is shown
    rewrite = decided[-1]
    assert len(decided) == 4 and rewrite.decision == "edited" and rewrite.id.startswith("rewrite-")
    final = apply_suggestions(Prompt(id="support", system=REQUEST.current["system"]), decided).prompt
    assert final.system == "You help customers of Acme.\nBe brief and kind."


def test_prompt_reviewer_rewrite_left_unchanged_adds_nothing(tmp_path: Path) -> None:
    decided: list[Suggestion] = []

    @click.command()
    def review() -> None:
        decided.extend(asyncio.run(PromptReviewer().review(REQUEST)))

    result = CliRunner(env={"EDITOR": "true"}).invoke(review, input="R\n\nw\n")
    assert result.exit_code == 0, result.output
    assert "the candidate is unchanged" in result.output
    assert [s.decision for s in decided] == ["rejected"] * 3


class Rewrites(AutoReviewer):
    """Approves the improver's edits, then rewrites the whole candidate as a person would."""

    async def review(self, request: ReviewRequest) -> list[Suggestion]:
        decided = await super().review(request)
        prompt = Prompt(id=request.prompt_id, system=request.current["system"])
        candidate = apply_suggestions(prompt, decided).prompt.system
        whole = whole_prompt_edit(prompt, decided, candidate + " Always say thanks.")
        assert whole is not None
        return [*decided, whole]


def test_a_rewrite_of_the_whole_candidate_is_what_the_cycle_evaluates(world, store) -> None:
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}],
                   improve={"acceptance": "always", "stop": {"max_rounds": 1}})
    result = asyncio.run(build_loop(loaded, store=store, reviewer=Rewrites()).run())
    candidate = store.resolve(f"support@{result.rounds[1].version}").prompt
    assert candidate.system == "You help customers.\n\nAlways say sorry. Always say thanks."
    assert result.rounds[1].delta == 40.0  # two keywords, not one: the rewrite was evaluated
    kept = {s.id: s for s in store.cycles.get_suggestions(result.cycle_id)}
    rewrite = next(s for i, s in kept.items() if i.startswith("rewrite-"))
    assert rewrite.decision == "edited" and rewrite.applied
