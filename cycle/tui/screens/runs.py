"""Every stored run, newest first: `cycle run`s, a cycle's evaluations, and eval files run
against an endpoint (which have no prompt, so the History screen cannot reach them).
The highlighted run's cases are read in a thread; Enter on a case opens it."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from cycle.tui.reading import deliver, read_in_thread
from cycle.tui.widgets import plain
from cycle.tui.widgets.header import CycleHeader, HeaderInfo
from cycle.words import pct

if TYPE_CHECKING:
    from cycle.records import RunResult, RunRow
    from cycle.store import Store

#: the newest runs listed (`cycle runs --since` reaches older ones)
LIMIT = 500


def run_subject(row: RunRow) -> str:
    """What a run evaluated: the prompt version, else the agent (an endpoint's URL)."""
    if row.prompt_id:
        return f"{row.prompt_id}@{row.version}" if row.version else row.prompt_id
    return row.agent_model or "-"


def run_origin(row: RunRow) -> str:
    if row.cycle_id:
        return f"cycle round {row.round}"
    return "eval file" if (row.config or {}).get("eval_file") else "run"


class RunsScreen(Screen[None]):
    """Browse the stored runs and their cases."""

    TITLE = "Runs"
    HELP = """\
Every stored run, newest first: what it evaluated (a prompt version, or for an
eval file run against an endpoint, the endpoint), what made it (a run, a
cycle's round, an eval file), its score, pass rate and cost. The highlighted
run's cases are listed on the right; Enter on a case opens its iterations.
l labels the highlighted run's outputs (50 of them, spread over its cases and
the judge's scores), to measure its judge. Escape goes back.
"""
    BINDINGS: ClassVar[list[BindingType]] = [Binding("l", "label", "Label"),
                                             Binding("escape", "back", "Back")]

    def __init__(self, store: Store, info: HeaderInfo) -> None:
        super().__init__()
        self.store = store
        self.info = info
        self.rows: dict[str, RunRow] = {}
        #: the run whose cases are shown, once read
        self.shown: RunResult | None = None

    def compose(self) -> ComposeResult:
        yield CycleHeader(self.info)
        yield Static(id="runs-summary", classes="summary")
        with Horizontal(id="runs-body"):
            runs: DataTable[str | Text] = DataTable(id="runs", cursor_type="row")
            runs.border_title = "Runs"
            yield runs
            cases: DataTable[str | Text] = DataTable(id="run-cases", cursor_type="row")
            cases.border_title = "Cases"
            yield cases
        yield Footer()

    def on_mount(self) -> None:
        runs = self.query_one("#runs", DataTable)
        # the figures first: at 80 columns the run's long id is what gets cut, not its score
        for label in ("score", "pass", "cost", "evaluated", "by", "run"):
            runs.add_column(label, key=label)
        cases = self.query_one("#run-cases", DataTable)
        for label in ("case", "status", "mean", "pass", "err"):
            cases.add_column(label, key=label)
        from cycle.store.masking import MaskedRunLog

        # an older store's rows may hold keys, or an endpoint's credentials: shown masked
        for row in MaskedRunLog(self.store).recent(limit=LIMIT):
            self.rows[row.id] = row
            s = row.summary or {}
            score = s.get("score")
            rate = s.get("pass_rate")
            runs.add_row("-" if score is None else f"{score:.1f}",
                         "-" if rate is None else pct(rate),
                         f"${s.get('cost') or 0:.4f}", plain(run_subject(row)),
                         plain(run_origin(row)), plain(row.id), key=row.id)
        summary = self.query_one("#runs-summary", Static)
        if not self.rows:
            summary.update("The store holds no run yet: `cycle run` or `cycle run --eval FILE`.")
            return
        summary.update(f"{len(self.rows)} runs, newest first" +
                       (f" (the newest {LIMIT})" if len(self.rows) == LIMIT else ""))
        runs.focus()
        self.load(next(iter(self.rows)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if event.data_table.id == "runs" and key in self.rows and (
                self.shown is None or self.shown.run_id != key):
            self.load(str(key))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "runs":
            self.query_one("#run-cases", DataTable).focus()
        elif self.shown is not None and event.row_key.value is not None:
            from cycle.tui.screens.case import CaseScreen

            self.app.push_screen(CaseScreen(self.store, self.shown.run_id,
                                            str(event.row_key.value), self.info))

    @work(thread=True, exclusive=True)
    def load(self, run_id: str) -> None:
        """Read the run's figures, in a thread, on a connection of its own (cycle.tui.reading)."""
        from cycle.evals.results import load_run
        from cycle.store.runs import StoredResults

        result = read_in_thread(self.store, lambda own: load_run(own.runs, run_id))
        if isinstance(result.source, StoredResults):
            # what it reads later (a case's representative), it reads in the UI thread on
            # the app's connection: the thread's own is closed
            result.source.log = self.store.runs
        deliver(self, self._show, result)

    def _show(self, result: RunResult) -> None:
        self.shown = result
        table = self.query_one("#run-cases", DataTable)
        table.clear()
        colours = {"passed": "green", "failed": "red", "error": "bold red", "terminated": "yellow"}
        for c in result.cases.values():
            mean = "-" if c.stats.mean is None else f"{c.stats.mean:.1f}"
            rate = "-" if c.pass_rate is None else pct(c.pass_rate)
            table.add_row(plain(c.case_id), Text(c.status, style=colours.get(c.status, "")), mean, rate,
                          str(c.errors), key=c.case_id)
        table.border_title = f"Cases of {result.run_id}"

    def action_label(self) -> None:
        """Label the highlighted run's outputs (cycle judge label RUN_ID)."""
        from cycle.authors import current_author
        from cycle.errors import ConfigError
        from cycle.judge.calibration import to_label
        from cycle.tui.screens.label import LabelScreen

        table = self.query_one("#runs", DataTable)
        if not self.rows or table.cursor_row < 0:
            return
        run_id = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        try:
            outputs, criteria = to_label(self.store, run_id, 50)
        except ConfigError as e:
            self.notify(e.message, severity="warning")
            return
        self.app.push_screen(LabelScreen(self.store, run_id, outputs, criteria,
                                         labeler=current_author()))

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
