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

- **Examples** (few-shot, ``improve.examples``) are meant to hold case text, so the copy
  and leak guards leave them alone; instead an example is refused when examples are off,
  when the prompt would hold more than ``improve.examples.max``, when it is drawn from a
  case that is not an improvement case (a held-out case, or none of the suite), and when
  its text copies a held-out case's input or expected answer (8+ words, or a distinctive
  expected answer whole): a held-out case only tells whether the prompt generalises while
  the prompt holds nothing of it.

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


def _case_grams(case: TestCase) -> Iterable[tuple[int, tuple[str, ...]]]:
    """(0 for the expected answer, 1 for the input, run of words) of a case's text."""
    for what, value in enumerate((case.expected, case.input)):
        if value is not None:
            for gram in _grams(_text(value), COPY_WORDS):
                yield what, gram


def _copied(added: dict[str, set[tuple[str, ...]]], cases: Sequence[TestCase],
            common: frozenset[tuple[str, ...]] = frozenset()) -> dict[str, tuple[str, str]]:
    """Suggestion id -> (case id, 'expected answer' | 'input') of the first case, in order,
    whose expected answer, then input, shares a run of COPY_WORDS words with ``added``
    (a run in ``common`` counts for none)."""
    if not any(added.values()):
        return {}
    # every case's text read once (not once per suggestion): run of words -> first place
    first: dict[tuple[str, ...], tuple[int, int]] = {}
    for position, case in enumerate(cases):
        for what, gram in _case_grams(case):
            if gram not in common:
                first.setdefault(gram, (position, what))
    out = {}
    for sid, grams in added.items():
        places = [first[g] for g in grams if g in first]
        if places:
            position, what = min(places)
            out[sid] = (cases[position].id, ("expected answer", "input")[what])
    return out


def copies(suggestions: Sequence[Suggestion], cases: Sequence[TestCase]) -> dict[str, str]:
    """Suggestion id -> which case text it copies into the prompt (the first case, in
    order, whose expected answer, then input, shares a run of words with what it adds).
    Examples are left out: they are meant to hold case text (``example_faults``)."""
    added = {s.id: _grams(s.value, COPY_WORDS) - _grams(s.current_value, COPY_WORDS)
             for s in suggestions if s.type != "example"}  # the replaced text may quote the prompt
    return {sid: (f"copies {COPY_WORDS}+ words of case '{case}''s {what} into the prompt: "
                  "that fits the prompt to one case instead of instructing better "
                  "(overfitting by copying)")
            for sid, (case, what) in _copied(added, cases).items()}


def example_faults(suggestions: Sequence[Suggestion], prompt: Prompt,
                   cases: Sequence[TestCase], *, held_out: Iterable[str] = (),
                   most: int = 0) -> dict[str, str]:
    """Example suggestion id -> why it is refused: examples are off (``most`` 0), it would
    make the prompt hold more than ``most``, it is drawn from a held-out case or from no
    case of the suite, or its text copies a held-out case's (in order, the first found)."""
    examples = [s for s in suggestions if s.type == "example"]
    if not examples:
        return {}
    hidden = frozenset(held_out)
    known = {c.id for c in cases}
    secret = [c for c in cases if c.id in hidden]
    # a run of words an improvement case holds too is not evidence of copying a held-out
    # case: references often share their phrasing ("I'm sorry for the trouble with order")
    shown = frozenset(g for c in cases if c.id not in hidden for _, g in _case_grams(c))
    secret_expected = {t for t in (_norm(x) for c in secret for x in _expected_texts(c.expected))
                       if len(t) >= 12 or (len(t) >= 5 and _DISTINCTIVE.search(t))}
    copied = _copied({s.id: _grams(f"{s.value}\n{_text(s.example_input or '')}", COPY_WORDS)
                      for s in examples}, secret, shown)
    count = len(prompt.examples)
    out = {}
    for s in examples:
        adds = not s.current_value.strip()
        removes = not adds and not s.value.strip()
        source = s.source_case
        pasted = sorted(t for t in secret_expected if t in _norm(s.value))
        if most <= 0:
            out[s.id] = ("few-shot examples are off for this cycle: set improve.examples "
                         "(e.g. {max: 3}) to let the improver propose them")
        elif source and source in hidden:
            out[s.id] = (f"drawn from held-out case '{source}': held-out cases are never put "
                         "in the prompt, so that they tell whether it generalises")
        elif source and source not in known:
            out[s.id] = (f"names no case of the suite as its source ('{source}'): an example "
                         "is drawn from a case the improver was shown")
        elif s.id in copied:
            case, what = copied[s.id]
            out[s.id] = (f"copies {COPY_WORDS}+ words of held-out case '{case}''s {what}: "
                         "held-out cases are never put in the prompt, so that they tell "
                         "whether it generalises")
        elif pasted:
            out[s.id] = (f"holds a held-out case's expected answer ({pasted[0][:40]!r}): "
                         "held-out cases are never put in the prompt")
        elif adds and count >= most:
            out[s.id] = (f"the prompt would hold more than improve.examples.max ({most}) "
                         "examples: replace one instead")
        else:
            count += 1 if adds else -1 if removes else 0
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
        if s.type == "example":
            continue  # an example holds case text by design (example_faults guards it)
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
