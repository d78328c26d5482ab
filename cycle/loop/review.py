"""Reviewers: who decides on a round's suggestions.

``AutoReviewer`` approves everything (or what reaches a minimum priority);
``PromptReviewer`` asks in a plain terminal, per suggestion: approve, reject
with a reason, or edit. The TUI brings its own Reviewer (cycle/tui). The loop
only knows the ``Reviewer`` protocol.

Each decision is recorded with who made it (``decided_by``): a reviewer's ``author``
when it has one (the person at the terminal; for the policy, ``policy:auto (alice)``,
the policy on behalf of who ran the cycle), else ``reviewer:NAME (alice)``.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import click

from cycle.authors import current_author, on_behalf
from cycle.errors import CycleError
from cycle.improve.apply import apply_suggestions, prompt_diff, suggestion_diff, whole_prompt_edit
from cycle.records import (
    PRIORITY_ORDER,
    Example,
    Priority,
    Prompt,
    ReviewRequest,
    Suggestion,
    ToolDef,
)
from cycle.words import plural

__all__ = ["AutoReviewer", "PromptReviewer", "Reviewer", "decider", "edits", "example_source",
           "request_prompt"]


class Reviewer(Protocol):
    """Decides on suggestions. Returns them with ``decision`` (and ``reason``/``edited_value``) set."""

    name: str

    async def review(self, request: ReviewRequest) -> list[Suggestion]: ...


def decider(reviewer: Reviewer) -> str:
    """Who a reviewer's decisions are recorded as: its ``author`` (optional in the
    protocol), else ``reviewer:NAME (person)``."""
    author = getattr(reviewer, "author", None)
    if author:
        return str(author)
    return on_behalf(f"reviewer:{getattr(reviewer, 'name', 'reviewer')}")


def request_prompt(request: ReviewRequest) -> Prompt:
    """The incumbent prompt a review request is about, rebuilt from its fields for previews."""
    import json

    current = request.current
    return Prompt(
        id=request.prompt_id,
        system=current.get("system", ""),
        user_template=current.get("user_template", "{{ input }}"),
        params=json.loads(current.get("params") or "{}"),
        tools=tuple(ToolDef.model_validate(t) for t in json.loads(current.get("tools") or "[]")),
        examples=tuple(Example.model_validate(e)
                       for e in json.loads(current.get("examples") or "[]")),
        rubrics=json.loads(current.get("rubrics") or "{}"),
    )


def edits(s: Suggestion, short: dict[str, str] | None = None) -> str:
    """What a suggestion edits, as a reviewer reads it: its type (``short``: by its short
    name), and the tool or the criterion it names."""
    kind = (short or {}).get(s.type, s.type)
    named = s.criterion or s.tool
    return f"{kind} of '{named}'" if named else kind


def example_source(s: Suggestion) -> str:
    """Where an example suggestion comes from, in words a reviewer checks."""
    if s.source_case:
        return f"example drawn from case {s.source_case}"
    return "example edit (no source case: its input stays as it was)" if s.current_value.strip() \
        else "example with no source case (it cannot be applied: nothing gives its input)"


class AutoReviewer:
    """Approves every suggestion of at least ``min_priority``; rejects the rest, saying why."""

    name = "auto"

    def __init__(self, min_priority: Priority = "low") -> None:
        self.min_priority = min_priority

    @property
    def author(self) -> str:
        """The policy decides, on behalf of who runs the cycle: ``policy:auto (alice)``."""
        return on_behalf(f"policy:{self.name}")

    async def review(self, request: ReviewRequest) -> list[Suggestion]:
        limit = PRIORITY_ORDER[self.min_priority]
        out = []
        for s in request.suggestions:
            if PRIORITY_ORDER[s.priority] <= limit:
                out.append(s.model_copy(update={"decision": "approved", "reason": ""}))
            else:
                out.append(s.model_copy(update={
                    "decision": "rejected",
                    "reason": f"priority {s.priority} is below the minimum {self.min_priority} (auto review)",
                }))
        return out


class ReviewEnded(CycleError):
    """Standard input ended before the review was answered (a pipe of answers ran dry):
    the cycle stops as interrupted, resumable, instead of as a killed process."""

    exit_code = 130  # the cycle is interrupted, as by a Ctrl-C


class PromptReviewer:
    """Asks in the terminal for each suggestion, showing its diff.

    Answers: ``a`` approve, ``r`` reject (asks for a reason), ``e`` edit (asks
    for the replacement text, or opens $EDITOR with ``--editor``), ``t`` edit the
    text it replaces (then asks again, with the new diff), ``A`` approve this and all
    the rest, ``R`` reject this and all the rest.
    """

    name = "prompt"

    def __init__(self, *, use_editor: bool = False) -> None:
        self.use_editor = use_editor

    @property
    def author(self) -> str:
        """The person answering at the terminal."""
        return current_author()

    async def review(self, request: ReviewRequest) -> list[Suggestion]:
        # click.prompt blocks: keep the event loop free for the other subscribers
        try:
            return await asyncio.to_thread(self._review_sync, request)
        except click.exceptions.Abort:  # what click.prompt raises at the end of the input
            raise ReviewEnded(f"standard input ended before round {request.round}'s "
                              "suggestions were all reviewed") from None

    def _review_sync(self, request: ReviewRequest) -> list[Suggestion]:
        prompt = request_prompt(request)
        total = len(request.suggestions)
        out: list[Suggestion] = []
        rest: str | None = None
        score = "n/a" if request.score is None else f"{request.score:.1f}"
        of = f", {request.candidate}" if request.candidate else ""
        click.echo(f"\nRound {request.round}{of}: {plural(total, 'suggestion')} for "
                   f"{request.prompt_id}@{request.version} (score {score})")
        for i, s in enumerate(request.suggestions, 1):
            if rest == "A":
                out.append(s.model_copy(update={"decision": "approved"}))
                continue
            if rest == "R":
                out.append(s.model_copy(update={"decision": "rejected", "reason": "rejected by the reviewer"}))
                continue
            click.echo(f"\n[{i}/{total}] {edits(s)} ({s.priority})  targets: {', '.join(s.target_cases) or '-'}")
            if s.type == "example":
                click.echo(f"  {example_source(s)}")
            # the improver's words, indented under their label line after line: a line of
            # its own ("[2/2] ...", "+++ suggested/system") cannot pass for one of cycle's
            if s.reasoning:
                click.echo(_labelled("why", s.reasoning))
            if s.expected_improvement:
                click.echo(_labelled("expected", s.expected_improvement))
            retargeted = False
            while True:
                click.echo(suggestion_diff(prompt, s).rstrip("\n"))
                choice = click.prompt(
                    "approve (a), reject (r), edit (e), edit the text it replaces (t), approve "
                    "all the rest (A), reject all the rest (R)",
                    type=click.Choice(["a", "r", "e", "t", "A", "R"], case_sensitive=True),
                    default="a",
                )
                if choice != "t":
                    break
                # the improver quoted the prompt inexactly: point the edit at the right text
                target = click.prompt("text it replaces (empty: append)", default=s.current_value,
                                      show_default=bool(s.current_value))
                retargeted |= target != s.current_value
                s = s.model_copy(update={"current_value": target})
            if choice in ("a", "A"):
                decision = "edited" if retargeted else "approved"
                out.append(s.model_copy(update={"decision": decision}))
                rest = "A" if choice == "A" else None
            elif choice in ("r", "R"):
                reason = click.prompt("reason (goes back to the improver)", default="rejected by the reviewer")
                out.append(s.model_copy(update={"decision": "rejected", "reason": reason}))
                rest = "R" if choice == "R" else None
            else:
                edited = None
                if self.use_editor:
                    edited = click.edit(s.suggested_value)
                if edited is None:
                    edited = click.prompt("replacement text", default=s.suggested_value)
                out.append(s.model_copy(update={"decision": "edited", "edited_value": edited.rstrip("\n")}))
        return out + self._rewrite(prompt, out)

    def _rewrite(self, prompt: Prompt, decided: list[Suggestion]) -> list[Suggestion]:
        """The reviewer's own rewrite of the whole candidate system prompt, if asked for."""
        choice = click.prompt("submit (s), or rewrite the whole candidate system prompt in your "
                              "editor first (w)", type=click.Choice(["s", "w"]), default="s")
        if choice == "s":
            return []
        candidate = apply_suggestions(prompt, decided).prompt
        text = click.edit(candidate.system, extension=".txt")
        whole = None if text is None else whole_prompt_edit(prompt, decided, text.rstrip("\n"))
        if whole is None:
            click.echo("the candidate is unchanged")
            return []
        rewritten = candidate.model_copy(update={"system": whole.suggested_value})
        click.echo(prompt_diff(candidate, rewritten, a_label="candidate", b_label="rewritten").rstrip("\n"))
        return [whole]


def _labelled(label: str, text: str) -> str:
    """``  label: text``, each further line of ``text`` indented under the first."""
    head = f"  {label}: "
    return head + ("\n" + " " * len(head)).join(text.splitlines() or [""])
