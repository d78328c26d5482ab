"""Numbers as people read them in messages: "1 round", "2 rounds"."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and ``word``, plural unless the count is one (``many``: an irregular plural)."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def pct(x: float | None) -> str:
    """A share as a percentage, whole when that is true: never "100%" for 99.96% nor "0%"
    for 0.04% (up to two decimals, then ">99.99%" / "<0.01%")."""
    if x is None:
        return "—"
    for digits in (0, 1, 2):
        text = f"{x * 100:.{digits}f}"
        if (float(text) >= 100 and x < 1) or (float(text) <= 0 < x):
            continue
        return text + "%"
    return ">99.99%" if x > 0.5 else "<0.01%"
