"""A coloured unified diff (the text comes from cycle.improve.apply or Store.diff)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.widgets import Static


def colour_diff(lines: Iterable[str]) -> Text:
    """Green additions, red removals, cyan hunk headers."""
    text = Text()
    for line in lines:
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        else:
            style = ""
        text.append(line + "\n", style=style)
    return text


class DiffView(Static):
    """Shows diff lines, or a note when there is nothing to show."""

    DEFAULT_CSS = """
    DiffView { width: 1fr; height: auto; }
    """

    def show(self, lines: list[str], *, empty: str = "no difference") -> None:
        self.update(colour_diff(lines) if lines else Text(empty, style="dim italic"))
