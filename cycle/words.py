"""Numbers as people read them in messages: "1 round", "2 rounds"."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and ``word``, plural unless the count is one (``many``: an irregular plural)."""
    return f"{count} {word if count == 1 else many or word + 's'}"
