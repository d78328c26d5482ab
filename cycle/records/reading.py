"""Reading what an agent did: the JSON an answer holds, and whether a tool call's
arguments match what a check or a mock wants. Beside the trace records, so that the
agents (mocks matching arguments, end conditions reading an answer) and the judge read
them the same way, and the agents need nothing of the judge."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from cycle import patterns


def json_in(answer: str) -> Any:
    """The JSON an answer holds: the whole text, or its first ```json fence.
    Raises ValueError (json.JSONDecodeError) when there is none."""
    text = answer.strip()
    fence = re.search(r"```(?:json)?\s*\n(.*?)```", text, re.DOTALL)
    if fence:
        text = fence.group(1)
    return json.loads(text)


Match = Literal["exact", "subset", "regex", "schema"]


def close_enough(a: Any, b: Any, tolerance: float) -> bool:
    """Equal, with numbers equal within ``tolerance`` (recursively in lists and dicts)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) <= tolerance
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close_enough(a[k], b[k], tolerance) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close_enough(x, y, tolerance) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def value_text(value: Any) -> str:
    """A value as text: itself when a string, else its JSON (keys sorted)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def arguments_match(actual: dict[str, Any], want: dict[str, Any], *, match: Match = "subset",
                    tolerance: float = 0.0) -> bool:
    """Whether a call's arguments satisfy ``want`` under ``match`` (see the module docstring)."""
    if match == "exact":
        return close_enough(actual, want, tolerance)
    if match == "subset":
        return all(k in actual and close_enough(actual[k], v, tolerance) for k, v in want.items())
    if match == "regex":
        return all(k in actual and patterns.search(str(p), value_text(actual[k])) is not None
                   for k, p in want.items())
    import jsonschema

    return jsonschema.Draft202012Validator(want).is_valid(actual)
