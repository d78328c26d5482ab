"""The offline decider of natural-language end conditions (``cycle_condition``): the
condition holds when most of its words (by their first five letters) are in the
assistant's last message."""

from __future__ import annotations

import re
from typing import Any

from cycle.testing.offline import schema as js

_STOP = frozenset({"the", "a", "an", "to", "has", "have", "been", "was", "is", "are", "and",
                   "of", "for", "user", "assistant", "customer", "their", "his", "her"})
_ALIASES = {"met": ("met", "holds", "done"), "reason": ("reason", "reasoning", "why")}


def _words(text: str) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOP and len(w) > 2}


def decide(block: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    condition = _words(str(block.get("condition") or ""))
    lines = [str(x) for x in block.get("transcript") or []]
    last = next((x for x in reversed(lines) if x.startswith("assistant:")), "")
    found = condition & _words(last)
    met = bool(condition) and len(found) * 2 >= len(condition) + 1
    reason = (f"the assistant's last message has {len(found)} of the condition's "
              f"{len(condition)} words")
    answer = {"met": met, "reason": reason}
    return js.fill(answer, _ALIASES, schema, schema) if schema else answer
