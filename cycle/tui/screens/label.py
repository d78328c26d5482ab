"""People score stored outputs, criterion by criterion (``cycle judge label RUN_ID``, or
``l`` on a run of the Runs screen): the case's input, the agent's output or conversation,
and each criterion with its rubric. The judge's score of a criterion stays hidden until
the person has scored it, so it cannot sway them. Each label is stored the moment it is
given (``cycle.store.human_labels``): quitting half-way loses nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from cycle.tui.widgets import masked, plain
from cycle.tui.widgets.header import CycleHeader, HeaderInfo

if TYPE_CHECKING:
    from cycle.store import Store
    from cycle.store.human_labels import Label


class LabelScreen(Screen[None]):
    """Label the outputs of one run; ``outputs`` as ``human_labels.outputs`` gives them,
    ``criteria`` (id, rubric) the ones to label."""

    TITLE = "Label"
    HELP = """\
Score what the agent did, as a person would, criterion by criterion: the
case's input and the agent's output (or the conversation) on the left, the
criteria with their rubrics on the right. Up and down choose a criterion;
p marks it pass, f fail, Enter (or e) gives a score from 0 to 100 (70 and
over passes), n adds a note. The judge's score of a criterion appears only
once you have scored it. Each label is stored at once. ] goes to the next
output, [ to the previous one, s skips this one. Escape leaves (what you
gave is kept). The labels measure the judge:
cycle judge agreement RUN_ID.
"""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "mark(True)", "Pass"),
        Binding("f", "mark(False)", "Fail"),
        Binding("e", "ask('score')", "Score"),
        Binding("n", "ask('note')", "Note"),
        Binding("s", "skip", "Skip"),
        Binding("right_square_bracket", "step(1)", "Next", key_display="]"),
        Binding("left_square_bracket", "step(-1)", "Previous", key_display="["),
        Binding("escape", "leave", "Back"),
    ]

    def __init__(self, store: Store, run_id: str, outputs: list[dict[str, Any]],
                 criteria: list[tuple[str, str]], *, labeler: str) -> None:
        super().__init__()
        self.store = store
        self.run_id = run_id
        self.outputs = outputs
        self.criteria = criteria
        self.labeler = labeler
        from cycle.store.masking import MaskedRunLog

        #: the run read masked: an older store may hold keys raw (cycle.store.masking)
        self._runs = MaskedRunLog(store)
        row = self._runs.get(run_id)
        # the run's own prompt and models, and the offline badge when its outputs are not
        # a real model's
        self.info = HeaderInfo(
            prompt_id=(row.prompt_id or "") if row else "", version=(row.version or "") if row else "",
            models={k: v for k, v in (("agent", row.agent_model), ("judge", row.judge_model))
                    if v}
            if row else {}, offline=bool(row and row.offline))
        self.at = 0
        #: what is being typed into the entry line: "score" or "note"
        self.asking: str | None = None
        #: this labeler's labels: (case, iteration, criterion) -> Label
        self.given: dict[tuple[str, int, str], Label] = {
            (x.label.case, x.label.iteration, x.label.criterion): x.label
            for x in store.human_labels.of_run(run_id) if x.label.labeler == labeler}

    def compose(self) -> ComposeResult:
        yield CycleHeader(self.info)
        yield Static(id="label-summary", classes="summary")
        with Horizontal(id="label-body"):
            with VerticalScroll(id="label-output"):
                yield Static(id="label-answer")
            with Vertical(id="label-side"):
                table: DataTable[str | Text] = DataTable(id="label-criteria", cursor_type="row")
                table.border_title = "Criteria"
                yield table
                yield Static(id="label-rubric")
        entry = Input(id="label-entry")
        entry.display = False
        yield entry
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#label-criteria", DataTable)
        for key in ("criterion", "you", "judge"):
            table.add_column(key, key=key)
        self._show_output()
        table.focus()

    # -- what is shown --------------------------------------------------------------

    @property
    def output(self) -> dict[str, Any]:
        return self.outputs[self.at]

    def _key(self, criterion: str) -> tuple[str, int, str]:
        return (self.output["case"], self.output["iteration"], criterion)

    def _show_output(self) -> None:
        """The output at ``at``: read from the store once, when it comes up (a label given
        re-draws only the criteria)."""
        if self.outputs:
            self.query_one("#label-answer", Static).update(self._answer())
        self._show()

    def _show(self) -> None:
        if not self.outputs:
            self.query_one("#label-summary", Static).update(
                Text(f"Run {self.run_id} has no judged output to label."))
            return
        o = self.output
        shown = {(x["case"], x["iteration"]) for x in self.outputs}
        labelled = sum(1 for key in self.given
                       if key[:2] in shown and key[2] in dict(self.criteria))
        total = len(self.outputs) * len(self.criteria)
        self.query_one("#label-summary", Static).update(Text(
            f"Output {self.at + 1} of {len(self.outputs)} · case {o['case']}, iteration "
            f"{o['iteration']} · {labelled} of {total} labelled by {self.labeler or 'you'}"))
        table = self.query_one("#label-criteria", DataTable)
        row = table.cursor_row
        table.clear()
        for criterion, _ in self.criteria:
            table.add_row(plain(criterion), self._yours(criterion), self._judges(criterion),
                          key=criterion)
        table.move_cursor(row=min(row, len(self.criteria) - 1))
        self._show_rubric()

    def _show_rubric(self) -> None:
        criterion = self._criterion()
        rubric = dict(self.criteria).get(criterion or "", "")
        self.query_one("#label-rubric", Static).update(
            Text.assemble((f"{criterion}: ", "bold"), rubric or ("(no rubric)", "dim"))
            if criterion else "")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_rubric()

    def _answer(self) -> RenderableType:
        from cycle.tui.screens.case import input_text, render_answer

        o = self.output
        results = [r for r in self._runs.load_results(self.run_id, o["case"])
                   if r.iteration == o["iteration"]]
        parts: list[RenderableType] = [Text("Input", style="bold underline")]
        if results:
            parts += [Text(input_text(results[0].input)), Text(""), *render_answer(results[0])]
        else:
            parts += [Text("Output", style="bold"), Text(masked(o["output"], self._runs.secrets))]
        return Group(*parts)

    def _yours(self, criterion: str) -> Text:
        label = self.given.get(self._key(criterion))
        if label is None:
            return Text("—", style="dim")
        shown = (f"{label.score:.0f}" if label.score is not None
                 else "pass" if label.passed else "fail")
        return Text(shown + (" ✎" if label.note else ""),
                    style="green" if label.passed else "red")

    def _judges(self, criterion: str) -> Text:
        if self._key(criterion) not in self.given:
            return Text("hidden", style="dim italic")  # until the person has scored it
        verdict = self.output["verdicts"].get(criterion)
        if verdict is None or verdict["score"] is None:
            return Text("—", style="dim")
        return Text(f"{verdict['score']:.0f}", style="green" if verdict["passed"] else "red")

    # -- labelling -----------------------------------------------------------------

    def _criterion(self) -> str | None:
        table = self.query_one("#label-criteria", DataTable)
        if not self.outputs or not self.criteria or table.cursor_row < 0:
            return None
        return self.criteria[table.cursor_row][0]

    def _store(self, criterion: str, *, score: float | None = None, passed: bool | None = None,
               note: str | None = None) -> None:
        from msgspec.structs import replace

        from cycle.store.human_labels import Label

        key = self._key(criterion)
        old = self.given.get(key)
        if old is not None:
            label = replace(old, **({"note": note} if note is not None else {
                "score": score, "passed": passed}))
        elif note is not None:
            self.notify("Score it first (p, f or e), then add the note.", severity="warning")
            return
        else:
            label = Label(run=self.run_id, case=key[0], iteration=key[1], criterion=criterion,
                          score=score, passed=passed, labeler=self.labeler)
        self.store.human_labels.add([label])
        self.given[key] = label
        self._show()

    def action_mark(self, passed: bool) -> None:
        criterion = self._criterion()
        if criterion is not None:
            self._store(criterion, passed=passed)
            self.query_one("#label-criteria", DataTable).action_cursor_down()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_ask("score")

    def action_ask(self, what: str) -> None:
        if self._criterion() is None:
            return
        self.asking = what
        entry = self.query_one("#label-entry", Input)
        entry.placeholder = (f"score of {self._criterion()}, 0 to 100 (Enter stores it, Escape "
                             "cancels)" if what == "score" else
                             f"a note on {self._criterion()} (Enter stores it)")
        entry.value = ""
        entry.display = True
        entry.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        criterion, what = self._criterion(), self.asking
        text = event.value.strip()
        if criterion is not None and what == "score":
            try:
                score = float(text)
                if not 0 <= score <= 100:
                    raise ValueError
            except ValueError:
                self.notify(f"A score is a number from 0 to 100, not {text!r}.",
                            severity="error")
                return
            from cycle.judge.calibration import pass_mark

            row = self._runs.get(self.run_id)
            mark = pass_mark(row.config if row is not None else None, criterion)
            self._store(criterion, score=score, passed=score >= mark)
        elif criterion is not None and what == "note" and text:
            self._store(criterion, note=text)
        self._close_entry()

    def _close_entry(self) -> None:
        self.asking = None
        entry = self.query_one("#label-entry", Input)
        entry.display = False
        self.query_one("#label-criteria", DataTable).focus()

    def action_step(self, by: int) -> None:
        if self.outputs and 0 <= self.at + by < len(self.outputs):
            self.at += by
            self.query_one("#label-output", VerticalScroll).scroll_home(animate=False)
            self._show_output()

    def action_skip(self) -> None:
        """On to the next output, this one left unlabelled (a key of its own: the footer
        shows one key an action)."""
        self.action_step(1)

    def action_leave(self) -> None:
        if self.asking is not None:
            self._close_entry()
        elif len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:
            self.app.exit()
