"""Help on ``?``: what the screen underneath shows and its keys."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Markdown, Static

GENERAL = """\
cycle evaluates a prompt, lets an improver propose edits, asks you to
review them, and keeps every version in the store.
"""


class HelpScreen(ModalScreen[None]):
    """Lists the keys of the screen it was opened over, with that screen's ``HELP`` text."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss_help", "Close")]

    def __init__(self, screen: Screen) -> None:
        super().__init__()
        self.topic = screen

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog help"):
            yield Static(Text(f"Help: {self.topic.title or type(self.topic).__name__}", style="bold"))
            yield Markdown(self.topic.HELP or GENERAL)
            yield Static(self._keys())
            yield Static(Text("escape closes this help", style="dim"))

    def _keys(self) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        seen: set[str] = set()
        for active in self.topic.active_bindings.values():
            binding = active.binding
            # the footer's keys, and the rarer keys of the screen it leaves out for room
            # (not the hidden keys of its widgets: cursor moves are no news)
            hidden_here = not binding.show and active.node is self.topic
            if not (binding.show or hidden_here) or not binding.description \
                    or binding.description in seen:
                continue
            seen.add(binding.description)
            table.add_row(self.app.get_key_display(binding), binding.description)
        return table

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
