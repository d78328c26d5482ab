"""One case of a run: its input, and per iteration its output, what the agent did (its
tool calls, their results and errors, state changes) and each criterion's verdict."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, ClassVar

from rich.align import Align
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from cycle.records.transcript import event_lines, has_behaviour
from cycle.tui.reading import deliver, read_in_thread
from cycle.tui.widgets import plain
from cycle.tui.widgets.header import CycleHeader, HeaderInfo
from cycle.words import plural

if TYPE_CHECKING:
    from cycle.records import IterationResult
    from cycle.store import Store


def input_text(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def render_case(case_id: str, results: list[IterationResult]) -> RenderableType:
    """The case's input once, then each iteration's output and verdicts."""
    if not results:
        return Text(f"No stored result for {case_id} yet.", style="dim italic")
    parts: list[RenderableType] = [Text("Input", style="bold underline"), Text(input_text(results[0].input))]
    for r in results:
        score = "-" if r.score is None else f"{r.score:.1f}"
        verdict = {True: ("passed", "green"), False: ("failed", "red")}.get(
            r.passed,  # type: ignore[arg-type]
            ("terminated", "yellow") if r.status == "terminated" else ("error", "bold red"),
        )
        head = Text(f"\nIteration {r.iteration} · score {score} · ", style="bold")
        head.append(verdict[0], style=verdict[1])
        parts.append(head)
        if r.error:
            parts.append(Text(f"error: {r.error}", style="red"))
        parts += render_answer(r)
        if r.verdicts:
            table = Table(box=None, padding=(0, 1), show_edge=False, expand=True)
            table.add_column("criterion", style="cyan", no_wrap=True)
            table.add_column("score", justify="right", no_wrap=True)
            table.add_column("reasoning", ratio=1)
            for v in r.verdicts:
                mark = Text(f"{v.score:.0f}", style="green" if v.passed else "red")
                table.add_row(plain(v.criterion_id + (" *" if v.required else "")), mark,
                              plain(v.reasoning))
            parts.append(table)
    return Group(*parts)


def render_answer(r: IterationResult) -> list[RenderableType]:
    """What the agent gave: its output or, when it did more than answer, the conversation."""
    if has_behaviour(r.trace):
        ending = f" · {r.status}" if r.status == "terminated" else ""
        turns = sum(1 for e in r.trace if e.kind == "user")
        return [Text(f"Conversation · {plural(turns, 'turn')}{ending}", style="bold"), _chat(r)]
    return [Text("Output", style="bold"), Text(r.output or "(empty)", style="" if r.output else "dim")]


#: how each transcript line starts -> its style
_STYLES = (("assistant ->", "cyan"), ("assistant [", "cyan"), ("tool ", "green"), ("state:", "magenta"),
           ("ended:", "yellow"))


def _chat(r: IterationResult) -> RenderableType:
    """The conversation as a chat: what the user said on the left, the assistant's
    answers on the right, and between them what the assistant did (tool calls, their
    results or errors, asks answered by the user, state changes), one line each; last,
    why the conversation ended."""
    parts: list[RenderableType] = []
    turn = 0
    for e in r.trace:
        if e.kind == "user":
            turn += 1
            parts.append(Panel(Text(e.text), title=f"user · turn {turn}", title_align="left",
                               border_style="blue", expand=False, width=_BUBBLE))
        elif e.kind == "model" and e.text:
            # an ADK workflow's steps each answer: the bubble names which
            title = f"assistant · {e.agent}" if e.agent else "assistant"
            parts.append(Align.right(Panel(Text(e.text), title=title, title_align="right",
                                           border_style="green", expand=False, width=_BUBBLE)))
        if e.kind in ("model", "tool_result", "tool_error", "state", "final"):
            lines = event_lines(e, for_people=True)
            # a model turn's text line is its bubble, above
            for line in lines[1:] if e.kind == "model" and e.text else lines:
                style = "bold red" if " FAILED: " in line else next(
                    (s for prefix, s in _STYLES if line.startswith(prefix)), "")
                parts.append(Text(f"   {line}", style=style))
    return Group(*parts)


#: a chat bubble's width: most of an 80-column screen, a readable line on a wide one
_BUBBLE = 72


class CaseScreen(Screen[None]):
    """Reads the case's stored iterations (in a thread: a large run takes a moment)."""

    TITLE = "Case"
    HELP = """\
A case of the running evaluation: its input, then for every iteration the
agent's output or, when it did more than answer, the conversation as a
chat (the user's turns on the left, the assistant's answers on the right,
tool calls, results, errors, asks and state changes between them), and
the judge's score and reasoning per criterion
(* marks a required criterion). Escape goes back.
"""
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self, store: Store, run_id: str, case_id: str, info: HeaderInfo) -> None:
        super().__init__()
        self.store = store
        self.run_id = run_id
        self.case_id = case_id
        self.info = info
        #: the iterations shown, once read
        self.results: list[IterationResult] | None = None

    def compose(self) -> ComposeResult:
        yield CycleHeader(self.info)
        yield Static(Text(f"Case {self.case_id}"), classes="summary")
        with VerticalScroll(id="case-body"):
            yield Static(Text("loading…", style="dim"), id="case-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#case-body").focus()
        self.load()

    @work(thread=True, exclusive=True)
    def load(self) -> None:
        from cycle.store.masking import MaskedRunLog

        # on a connection of the thread's own (cycle.tui.reading), masked as an older store
        # may hold keys raw (cycle.store.masking)
        results = read_in_thread(
            self.store, lambda own: MaskedRunLog(own).load_results(self.run_id, self.case_id))
        deliver(self, self._show, results)

    def _show(self, results: list[IterationResult]) -> None:
        self.results = results
        self.query_one("#case-detail", Static).update(render_case(self.case_id, results))
