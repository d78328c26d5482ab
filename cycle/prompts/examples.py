"""Few-shot examples: the demonstrations a prompt sends before the real user message.

Each example is a user turn, the prompt's user template rendered with the example's
input exactly as a case's input is rendered, and an assistant turn, its output. A case
is never shown an example of itself (the same input, or drawn from it): its score would
measure how well the model quotes an answer it was given, not how well it answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cycle.errors import TemplateError
from cycle.prompts.template import render
from cycle.records import Example, Prompt


def example_variables(value: dict[str, Any] | str) -> dict[str, Any]:
    """The variables a template is rendered with for an example's input: a case's rule
    (the mapping, plus ``input``; ``expected`` is None: an example has no reference)."""
    out: dict[str, Any] = dict(value) if isinstance(value, dict) else {}
    out.setdefault("input", value)
    out.setdefault("expected", None)
    return out


def example_turn(prompt: Prompt, example: Example) -> str:
    """The user message of one example."""
    return render(prompt.user_template, example_variables(example.input), field="user_template")


def shown_examples(prompt: Prompt, case_id: str | None = None,
                   case_input: Any = None) -> Sequence[Example]:
    """The examples a case is shown: all but those drawn from it or holding its input."""
    if case_id is None and case_input is None:
        return prompt.examples
    return [e for e in prompt.examples
            if not (e.source is not None and e.source == case_id)
            and not (case_input is not None and e.input == case_input)]


def check_examples(prompt: Prompt) -> None:
    """Raise TemplateError (field ``examples[i].input``) if an example's input does not
    render the user template: a variable the template reads and the input lacks."""
    for i, example in enumerate(prompt.examples):
        try:
            example_turn(prompt, example)
        except TemplateError as e:
            detail = e.message.split(": ", 1)[-1] if e.field else e.message
            fix = ("Give the example's input the variables the user template reads, as a "
                   "case's input would.")
            raise TemplateError(
                "the user template does not render with this example's input: "
                + detail.removeprefix("template "), field=f"examples[{i}].input",
                hint=f"{e.hint} {fix}" if e.hint else fix,
            ) from None
