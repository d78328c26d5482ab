"""Applying suggestions to a prompt, and unified-diff previews.

A suggestion replaces its ``current_value`` wherever it occurs in the field it
names (for ``tool_description``, the description of the tool it names): exactly
first, then ignoring differences in whitespace (models often re-wrap the text
they quote), then the one run of words at least 85% like it (a word changed, a
comma dropped); the review's diff shows the reviewer exactly what is replaced. An empty ``current_value`` appends. A
``parameters`` suggestion is a JSON object merged into ``params``. An ``example``
suggestion adds a few-shot example (its ``example_input``, the source case's, with the
suggested output), or replaces or removes (an empty suggested value) the example whose
output its ``current_value`` quotes. A ``rubric`` suggestion edits the rubric the
judge prompt carries for the criterion it names, as text (an empty ``current_value``
appends a sentence). A
suggestion that cannot be applied is marked ``skipped`` with the reason, never
dropped silently. Bumping the version number is the store's job
(``Store.save_version(bump=...)``).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from msgspec import Struct, field

from cycle.errors import TemplateError
from cycle.prompts import compile_template
from cycle.prompts.diff import diff_prompts
from cycle.prompts.examples import example_turn
from cycle.records import Example, Prompt, Suggestion

#: which Prompt field each suggestion type edits
FIELD_OF: dict[str, str] = {
    "system_prompt": "system",
    "user_prompt": "user_template",
    "parameters": "params",
}


class NotApplicable(Exception):
    """A suggestion cannot be applied; the message says why (shown to the user and the improver)."""


class ApplyResult(Struct, frozen=True):
    """The prompt after applying the accepted suggestions, and what happened to each."""

    prompt: Prompt
    applied: list[Suggestion] = field(default_factory=list)
    skipped: list[Suggestion] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def _whitespace_pattern(text: str) -> re.Pattern[str]:
    """A regex matching ``text`` with any run of whitespace matching any other run."""
    words = text.split()
    return re.compile(r"\s+".join(re.escape(w) for w in words))


def replace_text(source: str, current: str, new: str) -> str:
    """Replace ``current`` by ``new`` everywhere in ``source``.

    Exact occurrences first; if there are none, occurrences that differ only in
    whitespace. An empty ``current`` appends ``new`` as a new paragraph.
    Raises NotApplicable when ``current`` is not found.
    """
    if not current.strip():
        if not source.strip():
            return new
        return source.rstrip("\n") + "\n\n" + new
    if current in source:
        return source.replace(current, new)
    pattern = _whitespace_pattern(current)
    if pattern.search(source):
        # a function replacement, so backslashes in `new` are taken literally
        return pattern.sub(lambda _m: new, source)
    span = closest_span(source, current)
    if span is not None:
        start, end = span
        return source[:start] + new + source[end:]
    shown = current if len(current) <= 80 else current[:77] + "..."
    raise NotApplicable(f"the current value {shown!r} does not occur in the prompt: quote the text "
                        "to replace exactly as the prompt has it, or leave it empty to append")


#: how alike (difflib's ratio, by character, white space folded) a span must be to stand for
#: a misquoted text
FUZZY_RATIO = 0.85


def closest_span(source: str, quoted: str) -> tuple[int, int] | None:
    """Where in ``source`` a slightly misquoted ``quoted`` is (character offsets): the run
    of whole words most like it, if at least FUZZY_RATIO alike; else None. Models quote
    the prompt back with a word changed or a comma dropped; a far-off text is not a quote."""
    import difflib

    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", source)]
    wanted = " ".join(quoted.split())
    n = len(wanted.split())
    if not words or not n:
        return None
    best, where = 0.0, None
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(wanted)
    slack = max(1, n // 5)
    for size in range(max(1, n - slack), n + slack + 1):
        for i in range(len(words) - size + 1):
            start, end = words[i][0], words[i + size - 1][1]
            matcher.set_seq1(" ".join(source[start:end].split()))
            if matcher.real_quick_ratio() < FUZZY_RATIO or matcher.quick_ratio() < FUZZY_RATIO:
                continue
            ratio = matcher.ratio()
            if ratio > best:
                best, where = ratio, (start, end)
    return where if best >= FUZZY_RATIO else None


def _merge_params(params: dict[str, Any], value: str) -> dict[str, Any]:
    try:
        update = json.loads(value)
    except json.JSONDecodeError as e:
        raise NotApplicable(f"a parameters suggestion must be a JSON object; this is not JSON ({e.msg})") from e
    if not isinstance(update, dict):
        raise NotApplicable(
            f"a parameters suggestion must be a JSON object, not {type(update).__name__}"
        )
    return {**params, **update}


def apply_one(prompt: Prompt, suggestion: Suggestion) -> Prompt:
    """The prompt with one suggestion applied (its ``value``: the edit when edited).

    Raises NotApplicable when the suggestion cannot be applied or changes nothing.
    """
    value = suggestion.value
    if suggestion.type == "example":
        return _edit_examples(prompt, suggestion)
    if suggestion.type == "tool_description":
        return _edit_tool(prompt, suggestion.tool, suggestion.current_value, value)
    if suggestion.type == "rubric":
        return _edit_rubric(prompt, suggestion.criterion, suggestion.current_value, value)
    if suggestion.type == "parameters":
        params = _merge_params(prompt.params, value)
        if params == prompt.params:
            raise NotApplicable("the parameters already have these values")
        return prompt.model_copy(update={"params": params})
    name = FIELD_OF[suggestion.type]
    before: str = getattr(prompt, name)
    after = replace_text(before, suggestion.current_value, value)
    if after == before:
        raise NotApplicable("the suggestion changes nothing")
    try:
        compile_template(after, field=name)
    except TemplateError as e:
        raise NotApplicable(f"the edited {name} is not a valid template: {e.message}") from e
    return prompt.model_copy(update={name: after})


def _edit_tool(prompt: Prompt, name: str, current: str, value: str) -> Prompt:
    tool = prompt.tool(name)
    if tool is None:
        known = ", ".join(t.name for t in prompt.tools) or "none"
        raise NotApplicable(f"the prompt has no tool named {name!r} (tools: {known})")
    # an empty current value rewrites the description (appending to one rarely reads well)
    after = value if not current.strip() else replace_text(tool.description, current, value)
    if after == tool.description:
        raise NotApplicable("the suggestion changes nothing")
    edited = tool.model_copy(update={"description": after})
    return prompt.model_copy(update={"tools": tuple(edited if t.name == name else t
                                                    for t in prompt.tools)})


def _edit_rubric(prompt: Prompt, criterion: str, current: str, value: str) -> Prompt:
    before = prompt.rubrics.get(criterion)
    if before is None:
        known = ", ".join(prompt.rubrics) or "none"
        raise NotApplicable(f"the prompt carries no rubric of a criterion {criterion!r} "
                            f"(rubrics: {known})")
    # a rubric is one paragraph (cycle.yaml's one line): an appended rule is its next sentence
    after = (f"{before.rstrip()} {value.strip()}".strip() if not current.strip()
             else replace_text(before, current, value))
    if after == before:
        raise NotApplicable("the suggestion changes nothing")
    if not after.strip():
        raise NotApplicable(f"the rubric of {criterion!r} would be empty: the judge would not "
                            "know what to score")
    return prompt.model_copy(update={"rubrics": {**prompt.rubrics, criterion: after}})


def quoted_example(examples: tuple[Example, ...], quoted: str) -> int:
    """The index of the example whose output ``quoted`` quotes: exactly but for white
    space, else the one at least FUZZY_RATIO alike. Raises NotApplicable."""
    import difflib

    wanted = " ".join(quoted.split())
    outputs = [" ".join(e.output.split()) for e in examples]
    if wanted in outputs:
        return outputs.index(wanted)
    ratios = [difflib.SequenceMatcher(a=o, b=wanted, autojunk=False).ratio() for o in outputs]
    if ratios and max(ratios) >= FUZZY_RATIO:
        return ratios.index(max(ratios))
    shown = quoted if len(quoted) <= 80 else quoted[:77] + "..."
    raise NotApplicable(f"no example of the prompt has the output {shown!r}: quote the output "
                        "of the example to replace or remove, or leave it empty to add one")


def _edit_examples(prompt: Prompt, s: Suggestion) -> Prompt:
    examples = list(prompt.examples)
    output = s.value
    if s.current_value.strip():
        at = quoted_example(prompt.examples, s.current_value)
        if not output.strip():
            del examples[at]
        else:
            old = examples[at]
            # a new source brings its own input; an output edited alone keeps the old one
            drawn = s.example_input is not None
            examples[at] = Example(input=s.example_input if drawn else old.input, output=output,
                                   source=(s.source_case or None) if drawn else old.source)
            if examples[at] == old:
                raise NotApplicable("the suggestion changes nothing")
    else:
        if not output.strip():
            raise NotApplicable("an example needs an output: the ideal answer to its input")
        if s.example_input is None:
            raise NotApplicable("an example needs an input: name the case it is drawn from "
                                "(source_case), whose input it takes")
        examples.append(Example(input=s.example_input, output=output,
                                source=s.source_case or None))
    inputs = [json.dumps(e.input, sort_keys=True) for e in examples]
    if len(set(inputs)) < len(inputs):
        raise NotApplicable("the prompt already has an example of this input: replace that "
                            "one instead (quote its output in current_value)")
    edited = prompt.model_copy(update={"examples": tuple(examples)})
    for e in edited.examples:
        try:
            example_turn(edited, e)
        except TemplateError as error:
            raise NotApplicable(f"the example's input does not render the user template: "
                                f"{error.message}") from error
    return edited


def apply_suggestions(prompt: Prompt, suggestions: list[Suggestion]) -> ApplyResult:
    """Apply the accepted suggestions in order (highest priority first is the caller's choice).

    Accepted suggestions that cannot be applied come back with
    ``decision="skipped"`` and the reason; the others are returned unchanged.
    The input suggestions are not mutated.
    """
    current = prompt
    applied: list[Suggestion] = []
    skipped: list[Suggestion] = []
    for s in suggestions:
        if not s.accepted:
            continue
        try:
            current = apply_one(current, s)
        except NotApplicable as e:
            skipped.append(s.model_copy(update={"decision": "skipped", "reason": str(e)}))
        else:
            applied.append(s)
    return ApplyResult(prompt=current, applied=applied, skipped=skipped)


#: how the id of the reviewer's own rewrite of the whole candidate system prompt begins
WHOLE_EDIT = "rewrite-"


def whole_prompt_edit(prompt: Prompt, suggestions: list[Suggestion], system: str,
                      id: str | None = None) -> Suggestion | None:
    """The reviewer's rewrite of the whole candidate system prompt, as one more suggestion.

    It replaces what the accepted ``suggestions`` leave of the system prompt with
    ``system``, so it must be applied after them (the loop appends it last). None when
    it changes nothing. The reviewer's text is the candidate: every edit before it is
    kept only as far as the reviewer kept it.
    """
    others = [s for s in suggestions if not s.id.startswith(WHOLE_EDIT)]
    candidate = apply_suggestions(prompt, others).prompt.system
    if system == candidate:
        return None
    return Suggestion(
        id=id or WHOLE_EDIT + uuid.uuid4().hex[:12], type="system_prompt", priority="high",
        current_value=candidate, suggested_value=system, decision="edited",
        reasoning="The reviewer rewrote the candidate's system prompt.",
    )


# -- previews ----------------------------------------------------------------


def prompt_diff(a: Prompt, b: Prompt, *, a_label: str = "a", b_label: str = "b") -> str:
    """Unified diffs (difflib) of every field that differs between two prompts."""
    diff = diff_prompts(a, b, a=a_label, b=b_label)
    return diff.render() if diff.changed else ""


def suggestion_diff(prompt: Prompt, suggestion: Suggestion) -> str:
    """A unified diff previewing one suggestion on ``prompt``.

    When the suggestion cannot be applied the preview says why instead.
    """
    try:
        after = apply_one(prompt, suggestion)
    except NotApplicable as e:
        return f"(cannot be applied: {e})\n"
    return prompt_diff(prompt, after, a_label="current", b_label="suggested")
