"""The one-line header: prompt, models, and the OFFLINE MODEL badge."""

from __future__ import annotations

from msgspec import Struct, field
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static


class HeaderInfo(Struct, frozen=True):
    """What the header names. ``models`` maps a role (agent, judge, improver) to a model."""

    prompt_id: str = ""
    version: str = ""
    models: dict[str, str] = field(default_factory=dict)
    #: True when any model is the offline (or scripted) one: results are not real
    offline: bool = False
    #: shown when there are no models (the History screen): where the store is
    store: str = ""


class CycleHeader(Horizontal):
    """Prompt and model names on the left; a red OFFLINE MODEL badge on the right."""

    DEFAULT_CSS = """
    CycleHeader { height: 1; dock: top; background: $panel; }
    CycleHeader > #title { width: 1fr; height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    CycleHeader > #offline { width: auto; height: 1; background: $error; color: $text; text-style: bold; padding: 0 1; }
    CycleHeader > #offline.-hidden { display: none; }
    """

    def __init__(self, info: HeaderInfo) -> None:
        super().__init__()
        self.info = info

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="title")
        yield Static("OFFLINE MODEL", id="offline", classes="" if self.info.offline else "-hidden")

    def update(self, info: HeaderInfo) -> None:
        """Show new information (another prompt, a new version)."""
        self.info = info
        self.query_one("#title", Static).update(self._title())
        self.query_one("#offline", Static).set_class(not info.offline, "-hidden")

    def _title(self) -> Text:
        info = self.info
        text = Text(" cycle", style="bold")
        if info.prompt_id:
            text.append("  ")
            text.append(info.prompt_id, style="bold")
            if info.version:
                text.append(f" v{info.version}")
        # roles that share a model are named together: "agent+judge offline:default"
        roles: dict[str, list[str]] = {}
        for role, model in info.models.items():
            roles.setdefault(model, []).append(role)
        for model, names in roles.items():
            text.append(f"  {'+'.join(names)} ", style="dim")
            text.append(model)
        if info.store and not info.models:
            text.append("  store ", style="dim")
            text.append(info.store)
        return text


class StatusLine(Widget):
    """One line of text that redraws without a layout pass (updated up to 5 times a second)."""

    DEFAULT_CSS = """
    StatusLine { height: 1; }
    """

    text: reactive[Text] = reactive(Text(), layout=False)

    def render(self) -> Text:
        return self.text
