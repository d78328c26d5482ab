"""Suggestions refused before anyone reviews or pays for them.

- **Repeats**: a suggestion that makes the same edit as one already rejected,
  skipped or tried in a rejected candidate this cycle (the improver was told, and
  proposed it again). Evaluating it again would pay for a known answer.
- **Copies**: a suggestion that pastes a run of ``COPY_WORDS`` or more words of
  a case's input or expected answer into the prompt. It raises the score of
  that case by quoting its answer, not by instructing better: overfitting by
  copying, which held-out cases may not catch when the copied case is seen.

Each refusal is a rejection with its reason, which goes back to the improver.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from cycle.cases import TestCase
from cycle.records import RejectedSuggestion, Suggestion

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
