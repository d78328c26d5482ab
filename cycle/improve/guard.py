"""Suggestions refused before anyone reviews or pays for them.

- **Repeats**: a suggestion that makes the same edit as one already rejected,
  skipped or tried in a rejected candidate this cycle (the improver was told, and
  proposed it again). Evaluating it again would pay for a known answer.
- **Copies**: a suggestion that pastes a run of ``COPY_WORDS`` or more words of
  a case's input or expected answer into the prompt. It raises the score of
  that case by quoting its answer, not by instructing better: overfitting by
  copying, which held-out cases may not catch when the copied case is seen.
- **Leaks**: a suggestion that makes a template read a variable production will not
  give it (``{{ expected }}``, or any name outside the case inputs' variables and
  ``improve.allowed_variables``), or that pastes a case's expected answer whole when it
  is distinctive (a short reference such as an order number). A template that reads
  the expected answer scores 100 on every case and means nothing in production.

Each refusal is a rejection with its reason, which goes back to the improver.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from cycle.cases import TestCase
from cycle.records import Prompt, RejectedSuggestion, Suggestion

#: this many consecutive words of a case's text in a suggestion is a copy
COPY_WORDS = 8

_WORD = re.compile(r"\w+")


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _key(type_: str, tool: str, current: str, value: str) -> tuple[str, str, str, str]:
    return type_, tool, _norm(current), _norm(value)


def repeats(suggestions: Sequence[Suggestion], earlier: Iterable[RejectedSuggestion]) -> dict[str, str]:
    """Suggestion id -> why it repeats an earlier refused edit."""
    known = {_key(r.type, r.tool, r.current_value, r.suggested_value): r.reason for r in earlier}
    out = {}
    for s in suggestions:
        reason = known.get(_key(s.type, s.tool, s.current_value, s.value))
        if reason is not None:
            out[s.id] = f"repeats an edit already refused this cycle ({reason}): not paid for again"
    return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _grams(text: str, n: int) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.casefold())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def copies(suggestions: Sequence[Suggestion], cases: Sequence[TestCase]) -> dict[str, str]:
    """Suggestion id -> which case text it copies into the prompt (the first case, in
    order, whose expected answer, then input, shares a run of words with what it adds)."""
    added = {s.id: _grams(s.value, COPY_WORDS) - _grams(s.current_value, COPY_WORDS)
             for s in suggestions}  # text the edit replaces may quote the prompt
    if not any(added.values()):
        return {}
    # every case's text read once (not once per suggestion): run of words -> first place
    first: dict[tuple[str, ...], tuple[int, int]] = {}
    for position, case in enumerate(cases):
        for what, value in enumerate((case.expected, case.input)):
            if value is not None:
                for gram in _grams(_text(value), COPY_WORDS):
                    first.setdefault(gram, (position, what))
    out = {}
    for s in suggestions:
        places = [first[g] for g in added[s.id] if g in first]
        if places:
            position, what = min(places)
            out[s.id] = (f"copies {COPY_WORDS}+ words of case '{cases[position].id}''s "
                         f"{('expected answer', 'input')[what]} into the prompt: that fits the "
                         "prompt to one case instead of instructing better (overfitting by "
                         "copying)")
    return out


#: the variables a case gives a template that production inputs will not have
CASE_ONLY = frozenset({"expected"})


def template_variables(source: str) -> set[str]:
    """The variables a template reads (jinja2's own parse: ``{{ x.y }}``, ``{% if x %}``,
    filters' arguments...), less those it sets itself."""
    if "{" not in source:
        return set()
    import jinja2
    from jinja2 import meta

    from cycle.prompts.template import _environment

    try:
        return set(meta.find_undeclared_variables(_environment().parse(source)))
    except jinja2.TemplateSyntaxError:
        return set()  # applying it fails with the syntax error, named


def _prompt_variables(prompt: Prompt) -> set[str]:
    return template_variables(prompt.system) | template_variables(prompt.user_template)


def production_variables(cases: Sequence[TestCase], allowed: Iterable[str] = ()) -> set[str]:
    """What a prompt may read: every case input's variables (``input`` included) and
    ``allowed``, never a case-only one unless ``allowed`` names it."""
    names = set(allowed) | {"input"}
    for case in cases:
        if isinstance(case.input, dict):
            names.update(k for k in case.input if isinstance(k, str))
    return names - (CASE_ONLY - set(allowed))


_DISTINCTIVE = re.compile(r"\d|[^\w\s]")


def _expected_texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, str)]
    return []


def leaks(suggestions: Sequence[Suggestion], prompt: Prompt, cases: Sequence[TestCase], *,
          allowed: Iterable[str] = ()) -> dict[str, str]:
    """Suggestion id -> which case data it makes the prompt depend on: a variable the
    prompt did not read and production will not give (``expected``...), or a case's
    expected answer pasted whole where it is distinctive (12+ characters, or 5+ with a
    digit or a sign: an order number, a reference), which the 8-word copy guard misses."""
    from cycle.improve.apply import NotApplicable, apply_one

    before = _prompt_variables(prompt)
    may = production_variables(cases, allowed) | before
    expected = {_norm(t) for c in cases for t in _expected_texts(c.expected)}
    expected = {t for t in expected
                if len(t) >= 12 or (len(t) >= 5 and _DISTINCTIVE.search(t))}
    out = {}
    for s in suggestions:
        try:
            after = apply_one(prompt, s)
        except NotApplicable:
            continue  # applying it says why, with its own reason
        gained = sorted(_prompt_variables(after) - may)
        if gained:
            names = ", ".join(f"{{{{ {n} }}}}" for n in gained)
            out[s.id] = (f"makes the prompt read {names}, which production inputs do not have "
                         "(a template that reads the case's data scores on the test, not in "
                         "use); name it in improve.allowed_variables if production gives it")
            continue
        added = _norm(s.value).replace(_norm(s.current_value), "")
        pasted = sorted(t for t in expected if t in added)
        if pasted:
            out[s.id] = (f"pastes a case's expected answer ({pasted[0][:40]!r}) into the prompt: "
                         "the prompt would answer the test, not the task")
    return out
