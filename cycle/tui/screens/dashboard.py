"""Dashboard: the rounds so far, the running suite, cost, a score chart, a live log.

It draws ``DashboardState`` (cycle/tui/state.py); the app folds events into
that state and, every frame (5 a second), calls ``show_progress`` (status
line, progress bar, cost) or, at most once a second while a run is fast,
``show_changes`` (also the tables, chart and log), so only the rows that
changed since they were last drawn are touched.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, ProgressBar, RichLog, Sparkline, Static

from cycle.tui.state import CandidateRow, Changes, DashboardState, RoundRow, format_duration
from cycle.tui.widgets.case_table import CaseTable
from cycle.tui.widgets.header import CycleHeader, HeaderInfo, StatusLine
from cycle.words import pct, plural


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _round_cells(row: RoundRow) -> list[Text | str]:
    score = _score(row.score)
    if row.score is not None and row.ci_low is not None and row.ci_high is not None:
        score = f"{row.score:.1f} ±{(row.ci_high - row.ci_low) / 2:.1f}"
    accepted = {True: Text("yes", style="green"), False: Text("no", style="red")}.get(
        row.accepted,  # type: ignore[arg-type]
        Text("…" if row.status == "running" else "-", style="dim"),
    )
    return [
        f"{row.round}c" if row.stage == "confirm" else str(row.round),
        row.version,
        score,
        "-" if row.pass_rate is None else pct(row.pass_rate),
        "-" if row.delta is None else f"{row.delta:+.1f}",
        accepted,
        f"${row.cost:.4f}",
        _judge_cell(row),
    ]


def _judge_cell(row: RoundRow) -> Text | str:
    """The round's judge's kappa with people: "0.50 [0.10, 0.80] n 8", "uncalibrated"
    (dim: no labels), "…" while the round runs, "-" when no model judged it."""
    if row.judge is None:
        return Text("…" if row.status == "running" else "-", style="dim")
    return row.judge.compact() if row.judge.labels else Text(row.judge.compact(), style="dim")


def _candidate_cells(row: CandidateRow) -> list[Text | str]:
    parents = f"{row.parent} + {row.second_parent}" if row.second_parent else row.parent
    if row.none:  # nothing approved, or it rebuilt a version already tried
        return [str(row.slot + 1), "-", parents, "-", Text("none", style="dim")]
    if not row.screened:
        gain: Text | str = Text("…", style="dim")
    else:
        gain = "-" if row.gain is None else f"{row.gain:+.1f}"
    if not row.screened:
        then = Text("…", style="dim")
    elif not row.kept:
        then = Text("ends", style="dim")
    else:
        then = {True: Text("kept", style="green"), False: Text("rejected", style="red")}.get(
            row.accepted, Text("full", style="bold"))  # type: ignore[arg-type]
    return [str(row.slot + 1), row.version or "…", parents, gain, then]


class DashboardScreen(Screen[None]):
    """Watch the cycle run."""

    TITLE = "Dashboard"
    HELP = """\
The cycle runs while you watch: the rounds so far with their score, its 95%
interval, the change against the incumbent and, beside them, the judge's
agreement with people (Cohen's kappa with its 95% interval and the number of
labels, or uncalibrated while no one has labelled its outputs; cycle judge
sample) (a round marked c is the
confirmation: both versions evaluated again on fresh samples; head moves
only if it says yes); the running evaluation's
progress; the money spent against the budget; and a live log.
With a population (improve.population), the round's candidates: each one's
parent (two for a merge), its screen's gain over its parent on a minibatch
of cases, and what became of it (ends at its screen, or goes on to the full
evaluation, then kept or rejected); beside them the Pareto frontier, the
versions best on some case with how many, the parents of the next round.
Select a case (enter) to see its input, output and the judge's reasoning.
"""
    BINDINGS: ClassVar[list[BindingType]] = [Binding("h", "app.history", "History")]

    class CaseChosen(Message):
        """The user selected a case of the running suite."""

        def __init__(self, run_id: str, case_id: str) -> None:
            super().__init__()
            self.run_id = run_id
            self.case_id = case_id

    def __init__(self, state: DashboardState, info: HeaderInfo) -> None:
        super().__init__()
        self.state = state
        self.info = info
        self._status_text = ""
        self._cost_text = ""

    def compose(self) -> ComposeResult:
        yield CycleHeader(self.info)
        yield StatusLine(id="status", classes="summary")
        with Horizontal(id="progress-row"):
            yield ProgressBar(total=None, show_eta=False, id="progress")
            yield StatusLine(id="cost")
        with Horizontal(id="top"):
            rounds: DataTable[Text | str] = DataTable(id="rounds", cursor_type="row", zebra_stripes=True)
            rounds.border_title = "Rounds"
            yield rounds
            with Vertical(id="chart") as chart:
                chart.border_title = "Score"
                yield Sparkline([], id="sparkline", summary_function=max)
                yield Static(id="chart-label")
        with Horizontal(id="population"):
            candidates: DataTable[Text | str] = DataTable(id="candidates", cursor_type="none")
            candidates.border_title = "Candidates"
            yield candidates
            front: DataTable[Text | str] = DataTable(id="frontier", cursor_type="none")
            front.border_title = "Frontier"
            yield front
        with Horizontal(id="bottom"):
            cases = CaseTable(id="cases")
            cases.border_title = "Cases"
            yield cases
            log = RichLog(id="log", max_lines=500, wrap=True, min_width=20)
            log.border_title = "Log"
            yield log
        yield Footer()

    def on_mount(self) -> None:
        rounds = self.query_one("#rounds", DataTable)
        for label, key, width in (
            ("#", "round", 2), ("version", "version", 8), ("score", "score", 11),
            ("pass", "pass", 4), ("Δ", "delta", 5), ("acc", "accepted", 3), ("cost", "cost", 8),
            ("judge κ", "judge", 22),
        ):
            rounds.add_column(label, key=key, width=width)
        candidates = self.query_one("#candidates", DataTable)
        for label, width in (("#", 1), ("version", 8), ("from", 15), ("screen", 6),
                             ("then", 8)):
            candidates.add_column(label, width=width)
        front = self.query_one("#frontier", DataTable)
        for label, width in (("version", 8), ("best on", 7)):
            front.add_column(label, width=width)
        self.show_changes(Changes(run_reset=True, cases=list(self.state.cases.values()),
                                  rounds=list(self.state.rounds.values()),
                                  population=self.state.has_population), now=None)

    # -- drawing -------------------------------------------------------------

    def show_changes(self, changes: Changes, *, now: float | None) -> None:
        """Draw what changed (called by the app on its refresh timer)."""
        state = self.state
        if changes.rounds:
            table = self.query_one("#rounds", DataTable)
            for row in changes.rounds:
                key = str(row.round)
                cells = _round_cells(row)
                if key in table.rows:
                    for column, value in zip(
                        ("round", "version", "score", "pass", "delta", "accepted", "cost", "judge"),
                        cells, strict=True
                    ):
                        table.update_cell(key, column, value)
                else:
                    table.add_row(*cells, key=key)
            scores = state.scores
            self.query_one("#sparkline", Sparkline).data = scores
            label = " → ".join(f"{s:.1f}" for s in (scores[:1] + scores[-1:] if len(scores) > 1 else scores))
            self.query_one("#chart-label", Static).update(label or "no score yet")
        if changes.population:
            self._show_population()
            # the population's row grows and shrinks with its candidates, and the log below
            # with it: keep the log on its last line once the new layout is drawn, as a
            # write does (else a shrunk log shows an older line, depending on timing)
            log = self.query_one("#log", RichLog)
            self.call_after_refresh(log.scroll_end, animate=False)
        if changes.run_reset or changes.cases:
            self._show_cases(changes)
        if changes.log:
            log = self.query_one("#log", RichLog)
            for line in changes.log:
                log.write(Text(line, style="red" if "[error]" in line else ""))
        self.show_progress(now)

    def _show_population(self) -> None:
        """The round's candidates and the frontier, drawn whole (a few rows each); the
        row appears with the cycle's first population round."""
        state = self.state
        self.query_one("#population").display = state.has_population
        candidates = self.query_one("#candidates", DataTable)
        candidates.clear()
        for row in sorted(state.candidates.values(), key=lambda r: r.slot):
            candidates.add_row(*_candidate_cells(row))
        if state.population_round is not None:
            candidates.border_title = f"Candidates of round {state.population_round}"
        front = self.query_one("#frontier", DataTable)
        front.clear()
        for version, cases in state.frontier.items():
            front.add_row(version, plural(cases, "case"))

    def _show_cases(self, changes: Changes) -> None:
        table = self.query_one("#cases", CaseTable)
        if changes.run_reset:
            table.reset()
            version = self.state.run_version
            table.border_title = f"Cases of v{version}" if version else "Cases"
        table.update_rows(changes.cases)

    def show_progress(self, now: float | None) -> None:
        """The status line, progress bar and cost; cheap when nothing changed."""
        s = self.state
        bar = self.query_one("#progress", ProgressBar)
        if s.total:
            bar.update(total=s.total, progress=s.done)
        round_text = "" if s.current_round is None else f"Round {s.current_round} · "
        version = f"v{s.run_version} · " if s.run_version else ""
        elapsed = format_duration(s.elapsed(now)) if now is not None else format_duration(0)
        status = (
            f"{round_text}{version}{s.done}/{s.total} done · {plural(s.errors, 'error')} · {elapsed} · {s.status}"
            + (f": {s.stop_reason}" if s.stop_reason else "")
            + "".join(f" · {e.shown}" for e in s.throttled.values())
        )
        if status != self._status_text:
            self._status_text = status
            line = self.query_one("#status", StatusLine)
            if s.stop_reason:
                # the cycle is over: the line stops updating and wraps, so the stop
                # reason is read whole (one layout pass, once)
                line.styles.height, line.styles.text_wrap = "auto", "wrap"
            line.text = Text(status)
        limit = f" of ${s.cost_limit:.2f}" if s.cost_limit else ""
        cost = f"cost ${s.cost:.4f}{limit}" + (" (est.)" if s.cost_estimated else "")
        if cost != self._cost_text:
            self._cost_text = cost
            near = s.cost_limit is not None and s.cost >= 0.8 * s.cost_limit
            self.query_one("#cost", StatusLine).text = Text(cost, style="bold red" if near else "")

    def on_case_table_selected(self, event: CaseTable.Selected) -> None:
        event.stop()
        if self.state.run_id is not None:
            self.post_message(self.CaseChosen(self.state.run_id, event.case_id))
