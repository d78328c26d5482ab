"""cycle.tui.widgets."""

from __future__ import annotations

from typing import Any

from rich.text import Text

# what the screens read from the store is shown masked, as the CLI reports it
from cycle.store.masking import masked

__all__ = ["masked", "plain"]


def plain(value: Any) -> Any:
    """A table cell or line that came from outside (a case id, an improver's edit, a
    version message, a judge's reasoning) as literal text: Textual and Rich read a plain
    str as markup, where ``[/b]`` is an error that stops the app and ``[link=...]`` a
    link nobody wrote. Anything not a str passes as it is."""
    return Text(value) if isinstance(value, str) else value


