"""Simulate: a person plays the agent's model; the session becomes a golden trace.

The screen draws and collects; ``cycle.simulate.Simulation`` holds the session
(its states, history, validation, the tools' mocks and the export). The right panel
shows what the state allows: choose an agent, type the query, pick a tool (or the final
response), fill the tool's form. The left panel is the history as it grows.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import (
    Button,
    Checkbox,
    ContentSwitcher,
    Footer,
    Input,
    Label,
    OptionList,
    Select,
    Static,
    TextArea,
)
from textual.widgets.option_list import Option

from cycle.errors import CycleError
from cycle.simulate import (
    FinalResponse,
    HistoryEntry,
    SessionState,
    Simulation,
    SimulationError,
    ToolCallEntry,
    ToolErrorEntry,
    ToolOutput,
    UserQuery,
    field_kind,
    form_fields,
    parse_form,
)
from cycle.tui.screens.confirm import ConfirmScreen

#: the option that ends the session, among the tools
FINAL = "__final__"
#: lines of a tool error's traceback shown in the history (the end, where it was raised)
TRACEBACK_LINES = 6


def _short(value: Any, width: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def entry_text(entry: HistoryEntry) -> Text:
    """One history entry as the history panel shows it."""
    at = entry.timestamp.strftime("%H:%M:%S")
    out = Text(f"{at} ", style="dim")
    if isinstance(entry, UserQuery):
        out.append("user  ", style="bold cyan").append(entry.content)
    elif isinstance(entry, ToolCallEntry):
        out.append("call  ", style="bold yellow").append(entry.tool_name, style="bold")
        out.append(f" {_short(entry.arguments)}  ").append(f"[{entry.call_id}]", style="dim")
    elif isinstance(entry, ToolOutput):
        out.append("  ←   ", style="green").append(_short(entry.result))
        out.append(f"  {entry.duration_ms:.1f} ms", style="dim")
    elif isinstance(entry, ToolErrorEntry):
        out.append("  ✗   ", style="bold red").append(f"{entry.error_type}: {entry.error_message}",
                                                      style="red")
        out.append(f"  {entry.duration_ms:.1f} ms", style="dim")
        if entry.traceback:
            tail = entry.traceback.rstrip().splitlines()[-TRACEBACK_LINES:]
            out.append("\n" + "\n".join("      " + line for line in tail), style="dim red")
    elif isinstance(entry, FinalResponse):
        out.append("final ", style="bold green").append(entry.content)
    return out


class SimulateScreen(Screen[None]):
    """Play the agent's model; export the session as a golden trace."""

    TITLE = "Simulate"
    HELP = """\
You play the agent's model. Type the user's query, then pick a tool, fill
its arguments (checked against its JSON schema before it runs) and see what
it returns or how it fails; repeat, and end with the final response. Tools
answer through the config's mocks: a tool without a mock (or passthrough)
cannot run here. A finished session is appended to the EvalSet (and the case
file, when given); quitting before the end exports nothing.
ctrl+s submits the query, the form or the final response; escape goes back;
q (or ctrl+q) asks before it drops an unfinished session.
"""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "submit", "Submit"),
        Binding("escape", "back", "Back"),
        Binding("ctrl+n", "new_session", "New session"),
        Binding("q", "leave", "Quit"),
    ]

    def __init__(self, simulation: Simulation) -> None:
        super().__init__()
        self.simulation = simulation
        self._tool: str | None = None

    # -- layout --------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="sim-summary", classes="summary")
        with Horizontal(id="sim-body"):
            history = VerticalScroll(id="sim-history")
            history.border_title = "History"
            with history:
                yield Static("The session's history appears here.", id="sim-empty",
                             classes="hint")
            with ContentSwitcher(id="sim-panel", initial="pick-agent"):
                with Vertical(id="pick-agent"):
                    yield Label("Which agent do you play?")
                    yield OptionList(id="agents")
                with Vertical(id="ask-query"):
                    yield Label("The user's query (ctrl+s to start):")
                    yield TextArea(id="query")
                    yield Button("Start", id="start", variant="primary")
                with Vertical(id="act"):
                    yield Label("Your move: call a tool, or answer.")
                    yield OptionList(id="tools")
                with Vertical(id="form"):
                    yield Static(id="form-title")
                    yield VerticalScroll(id="form-fields")
                    yield Static(id="form-error", classes="error")
                    with Horizontal(classes="buttons"):
                        yield Button("Run (ctrl+s)", id="run", variant="primary")
                        yield Button("Back (esc)", id="cancel")
                with Vertical(id="final"):
                    yield Label("The final response (ctrl+s to submit):")
                    yield TextArea(id="response")
                    yield Static(id="final-error", classes="error")
                    yield Button("Submit", id="submit", variant="success")
                with Vertical(id="done"):
                    yield Static(id="done-text")
        yield Footer()

    def on_mount(self) -> None:
        agents = self.query_one("#agents", OptionList)
        for agent in self.simulation.agents.values():
            agents.add_option(Option(Text.assemble((agent.name, "bold"), "  ",
                                                   (agent.source, "dim")), id=agent.name))
        self._show()

    # -- drawing -------------------------------------------------------------

    def _show(self, pane: str | None = None) -> None:
        """Switch to the pane the state asks for (or ``pane``) and redraw the summary."""
        sim = self.simulation
        pane = pane or {
            SessionState.SELECTING_AGENT: "pick-agent",
            SessionState.AWAITING_QUERY: "ask-query",
            SessionState.ACTIVE: "act",
            SessionState.COMPLETED: "done",
        }[sim.state]
        self.query_one("#sim-panel", ContentSwitcher).current = pane
        if pane == "act":
            self._fill_tools()
        focus = {"pick-agent": "#agents", "ask-query": "#query", "act": "#tools",
                 "final": "#response"}.get(pane)
        if focus:
            self.query_one(focus).focus()
        agent = sim.agent
        calls = sum(isinstance(e, ToolCallEntry) for e in sim.history)
        parts = [f"agent {agent.name}" if agent else "choose an agent",
                 sim.state.value.replace("_", " "),
                 f"{calls} tool call{'s' * (calls != 1)}"]
        if agent is not None:
            parts.append(f"→ {agent.eval_set_path.name}"
                         + (f" + {agent.cases_path.name}" if agent.cases_path else ""))
        self.query_one("#sim-summary", Static).update(" · ".join(parts))
        self.query_one("#sim-empty", Static).display = not sim.history

    def _add_history(self, *entries: HistoryEntry) -> None:
        panel = self.query_one("#sim-history", VerticalScroll)
        for entry in entries:
            panel.mount(Static(entry_text(entry), classes=f"entry {entry.type}"))
        panel.scroll_end(animate=False)

    def _fill_tools(self) -> None:
        assert self.simulation.agent is not None
        agent = self.simulation.agent
        tools = self.query_one("#tools", OptionList)
        tools.clear_options()
        for tool in agent.tools:
            how = agent.how(tool.name)
            label = Text.assemble((tool.name, "bold"), "  ",
                                  (how or "no mock: cannot run here", "dim" if how else "red"))
            tools.add_option(Option(label, id=tool.name, disabled=how is None))
        tools.add_option(Option(Text("✎ final response", style="bold green"), id=FINAL))
        tools.highlighted = next((i for i, o in enumerate(tools.options) if not o.disabled), 0)

    async def _open_form(self, name: str) -> None:
        tool = self.simulation.tool(name)
        self._tool = name
        self.query_one("#form-title", Static).update(Text.assemble(
            (tool.name, "bold"), "\n", (tool.description, "dim")))
        self.query_one("#form-error", Static).update("")
        fields = self.query_one("#form-fields", VerticalScroll)
        await fields.remove_children()
        widgets: list[Widget] = []
        for arg, schema, required in form_fields(tool):
            kind = field_kind(schema)
            about = schema.get("description", "")
            widgets.append(Label(Text.assemble((arg, "bold"), " *" if required else "",
                                               (f"  {kind}", "dim"),
                                               (f"  {about}" if about else "", "dim"))))
            if kind == "boolean":
                widgets.append(Checkbox(arg, value=bool(schema.get("default", False)),
                                        id=f"arg-{arg}"))
            elif kind == "enum":
                widgets.append(Select([(str(c), str(c)) for c in schema["enum"]],
                                      allow_blank=not required, id=f"arg-{arg}"))
            else:
                hint = {"json": "JSON, e.g. [1, 2] or {\"k\": \"v\"}"}.get(kind, kind)
                widgets.append(Input(placeholder=hint, id=f"arg-{arg}"))
        if not widgets:
            widgets.append(Static("(no arguments)", classes="hint"))
        await fields.mount_all(widgets)
        self._show("form")
        first = next((w for w in widgets if isinstance(w, Input | Checkbox | Select)), None)
        (first or self.query_one("#run")).focus()

    def _form_values(self) -> dict[str, Any]:
        assert self._tool is not None
        values: dict[str, Any] = {}
        for arg, _schema, required in form_fields(self.simulation.tool(self._tool)):
            widget = self.query_one(f"#arg-{arg}")
            if isinstance(widget, Checkbox):
                values[arg] = widget.value if (widget.value or required) else None
            elif isinstance(widget, Select):
                values[arg] = None if widget.is_blank() else str(widget.value)
            elif isinstance(widget, Input):
                values[arg] = widget.value
        return values

    # -- the state machine's steps -------------------------------------------

    @on(OptionList.OptionSelected, "#agents")
    def _agent_chosen(self, event: OptionList.OptionSelected) -> None:
        try:
            self.simulation.select(str(event.option.id))
        except CycleError as e:
            self.notify(str(e), severity="error", timeout=10)
            return
        self._show()

    @on(OptionList.OptionSelected, "#tools")
    async def _tool_chosen(self, event: OptionList.OptionSelected) -> None:
        if event.option.id == FINAL:
            self.query_one("#final-error", Static).update("")
            self._show("final")
        else:
            await self._open_form(str(event.option.id))

    @on(Button.Pressed, "#start")
    async def _start(self) -> None:
        await self.action_submit()

    @on(Button.Pressed, "#run")
    async def _run(self) -> None:
        await self._run_tool()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.action_back()

    @on(Button.Pressed, "#submit")
    def _submit(self) -> None:
        self._finish()

    async def action_submit(self) -> None:
        pane = self.query_one("#sim-panel", ContentSwitcher).current
        if pane == "ask-query":
            try:
                self.simulation.begin(self.query_one("#query", TextArea).text)
            except CycleError as e:
                self.notify(str(e), severity="error")
                return
            self._add_history(*self.simulation.history)
            self._show()
        elif pane == "form":
            await self._run_tool()
        elif pane == "final":
            self._finish()

    async def _run_tool(self) -> None:
        assert self._tool is not None
        error = self.query_one("#form-error", Static)
        try:
            arguments = parse_form(self.simulation.tool(self._tool), self._form_values())
            outcome = await self.simulation.call(self._tool, arguments)
        except SimulationError as e:
            error.update(Text(str(e), style="bold red"))  # nothing ran, nothing recorded
            return
        self._add_history(*self.simulation.history[-2:])
        self._tool = None
        self._show()
        if isinstance(outcome, ToolErrorEntry):
            self.notify(f"{outcome.error_type}: {outcome.error_message}", severity="warning")

    def _finish(self) -> None:
        text = self.query_one("#response", TextArea).text
        try:
            exported = self.simulation.finish(text)
        except CycleError as e:
            self.query_one("#final-error", Static).update(Text(str(e), style="bold red"))
            return
        self._add_history(self.simulation.history[-1])
        where = [str(exported.eval_set_path)] + (
            [str(exported.cases_path)] if exported.cases_path else [])
        self.query_one("#done-text", Static).update(Text.assemble(
            ("Exported ", "bold green"), (exported.eval_id, "bold"), "\nto ",
            "\nand ".join(where), "\n\nctrl+n: a new session · q: quit"))
        self._show()

    def action_back(self) -> None:
        pane = self.query_one("#sim-panel", ContentSwitcher).current
        if pane in ("form", "final"):
            self._tool = None
            self._show("act")

    def action_new_session(self) -> None:
        if self.simulation.state is SessionState.COMPLETED:
            self._reset()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._reset()

        if self._open():
            self.app.push_screen(ConfirmScreen(
                "Start a new session? This one is not finished: it will not be exported.",
                yes="Discard it"), answered)

    def _reset(self) -> None:
        self.simulation.new_session()
        self.query_one("#sim-history", VerticalScroll).query(".entry").remove()
        self.query_one("#query", TextArea).text = ""
        self.query_one("#response", TextArea).text = ""
        self._show()

    def _open(self) -> bool:
        """A session is under way (quitting would lose it)."""
        return self.simulation.state is SessionState.ACTIVE or (
            self.simulation.state is SessionState.AWAITING_QUERY
            and bool(self.query_one("#query", TextArea).text.strip()))

    def action_leave(self) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self._close()

        if self._open():
            self.app.push_screen(ConfirmScreen(
                "Quit? This session is not finished: it will not be exported.",
                yes="Quit"), answered)
        else:
            self._close()

    def _close(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:
            self.app.exit()
