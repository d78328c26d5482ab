"""Review: decide on a round's suggestions before the loop applies them.

The screen works on copies of the suggestions; nothing reaches the loop (and
nothing is applied) until the reviewer submits. It dismisses with the
suggestions, each with its ``decision`` (and ``reason`` / ``edited_value``).
"""

from __future__ import annotations

import difflib
import re
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Input, Static, TextArea
from textual.widgets.data_table import ColumnKey

from cycle.improve.apply import (
    WHOLE_EDIT,
    apply_suggestions,
    prompt_diff,
    suggestion_diff,
    whole_prompt_edit,
)
from cycle.loop.review import edits, example_source, request_prompt
from cycle.records import PRIORITY_ORDER, ReviewRequest, Suggestion
from cycle.tui.screens.confirm import ConfirmScreen
from cycle.tui.widgets import plain
from cycle.tui.widgets.diff_view import DiffView
from cycle.tui.widgets.header import CycleHeader, HeaderInfo
from cycle.words import plural

#: how a decision is shown in the list
DECISION_MARK: dict[str, tuple[str, str]] = {
    "pending": ("· pending", "dim"),
    "approved": ("✓ approve", "bold green"),
    "edited": ("✎ edited", "bold yellow"),
    "rejected": ("✗ reject", "bold red"),
    "skipped": ("- skipped", "dim"),
}
TYPE_SHORT = {"system_prompt": "system", "user_prompt": "user", "parameters": "params"}
#: the reason given to the improver when a suggestion is left undecided at submit
UNDECIDED_REASON = "not approved in review"


#: words of unchanged text kept before a change in the list's excerpt
CONTEXT_WORDS = 3
_TOKENS = re.compile(r"\w+|\s+|[^\w\s]")


def change_excerpt(before: str, after: str, width: int) -> Text:
    """What a suggestion changes, in one line of ``width``: from a few words before the
    first difference, the added text in green and the removed struck in red, so two
    suggestions that start alike do not look alike."""
    a = _TOKENS.findall(" ".join(before.split()))
    b = _TOKENS.findall(" ".join(after.split()))
    ops = [op for op in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    text = Text(no_wrap=True, overflow="ellipsis")
    if not a or not ops:
        text.append("".join(b) or "(no change)")
    else:
        first = ops[0][3]
        words = [i for i in range(first) if b[i].strip()]
        start = words[-CONTEXT_WORDS] if len(words) >= CONTEXT_WORDS else 0
        if start > 0:
            text.append("… ", style="dim")
        text.append("".join(b[start:first]), style="dim")
        end = first
        for _, i1, i2, j1, j2 in ops:
            text.append("".join(b[end:j1]))  # unchanged text between two changes
            if i2 > i1:
                text.append("".join(a[i1:i2]), style="red strike")
            if j2 > j1:
                text.append("".join(b[j1:j2]), style="green")
            end = j2
            if len(text) >= width:
                break
        else:
            text.append("".join(b[end:]))
    text.truncate(width, overflow="ellipsis")
    return text


class ReasonScreen(ModalScreen[str | None]):
    """Asks why a suggestion is rejected; the reason goes back to the improver."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Why reject it? (the improver reads this; enter to confirm)", classes="question")
            yield Input(placeholder="reason", id="reason")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class EditScreen(ModalScreen[str | None]):
    """Edit a suggestion's text; ctrl+s keeps the edit, escape drops it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Keep edit", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, text: str, what: str = "the suggested text") -> None:
        super().__init__()
        self.text = text
        self.what = what

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog edit"):
            yield Static(f"Edit {self.what} (ctrl+s keep, escape cancel)", classes="question")
            yield TextArea(self.text, id="editor", soft_wrap=True)

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_save(self) -> None:
        self.dismiss(self.query_one(TextArea).text)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ReviewScreen(Screen[list[Suggestion]]):
    """The suggestions beside a coloured diff of the selected one."""

    TITLE = "Review"
    HELP = """\
The improver proposed these edits to the prompt. Nothing is applied until
you submit: approve, reject (with a reason the improver will read) or edit
each suggestion (e: its new text; t: the text it replaces, when the improver
quoted the prompt inexactly). w rewrites the whole candidate system prompt as
your decisions leave it: your text is what is evaluated (r on its row drops it).
Undecided suggestions are rejected at submit.
"""
    # the footer shows how to finish first (at 80 columns it cuts from the right); the
    # rarer keys are in the help (?) only
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s,ctrl+s", "submit", "Submit"),
        Binding("a", "approve", "Approve"),
        Binding("r", "reject", "Reject"),
        Binding("e", "edit", "Edit"),
        Binding("A", "approve_all", "All"),
        Binding("t", "edit_target", "Edit replaced text", show=False),
        Binding("w", "edit_whole", "Rewrite whole", show=False),
        Binding("u", "undo", "Undo", show=False),
    ]

    def __init__(self, request: ReviewRequest, info: HeaderInfo | None = None) -> None:
        super().__init__()
        self.request = request
        self.info = info or HeaderInfo(prompt_id=request.prompt_id, version=request.version)
        self.suggestions = [s.model_copy(deep=True) for s in request.suggestions]
        self._by_id = {s.id: s for s in self.suggestions}
        self._prompt = request_prompt(request)
        #: the reviewer's text of the whole candidate system prompt (w), if written
        self._whole_text: str | None = None
        self._whole_id = WHOLE_EDIT + request.cycle_id + f"-r{request.round}"

    # -- layout --------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield CycleHeader(self.info)
        yield Static(id="review-summary", classes="summary")
        table: DataTable[Text | str] = DataTable(id="suggestions", cursor_type="row")
        table.border_title = "Suggestions"
        yield table
        with Horizontal(id="review-body"):
            with VerticalScroll(id="detail-panel") as detail:
                detail.border_title = "Why"
                yield Static(id="detail")
            with VerticalScroll(id="diff-panel") as diff:
                diff.border_title = "Diff of the prompt"
                yield DiffView(id="diff")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#suggestions", DataTable)
        table.add_column("decision", key="decision", width=9)
        table.add_column("pri", key="priority", width=6)
        table.add_column("type", key="type", width=6)
        table.add_column("change", key="change", width=self._change_width())
        ordered = sorted(self.suggestions, key=lambda s: PRIORITY_ORDER.get(s.priority, 9))
        for s in ordered:
            table.add_row(*self._cells(s), key=s.id)
        table.focus()
        self._refresh_summary()
        if ordered:
            self._show(ordered[0])

    def _change_width(self) -> int:
        """The change column fills what the fixed columns leave (each has 2 of padding)."""
        return max(20, self.size.width - (9 + 6 + 6) - 4 * 2 - 3)

    def on_resize(self) -> None:
        table = self.query_one("#suggestions", DataTable)
        width = self._change_width()
        column = table.columns.get(ColumnKey("change"))
        if column is None or column.width == width:
            return
        column.width = width
        for s in self.suggestions:
            table.update_cell(s.id, "change", self._cells(s)[3])
        table.refresh()

    def _cells(self, s: Suggestion) -> list[Text | str]:
        label, style = DECISION_MARK.get(s.decision, (s.decision, ""))
        priority_style = {"high": "bold", "medium": "", "low": "dim"}.get(s.priority, "")
        return [
            Text(label, style=style),
            Text(s.priority, style=priority_style),
            plain(TYPE_SHORT.get(s.type, s.type)),
            plain(change_excerpt(s.current_value, s.value, self._change_width())),
        ]

    # -- what is shown ------------------------------------------------------

    @property
    def selected(self) -> Suggestion | None:
        table = self.query_one("#suggestions", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return self._by_id.get(str(key.value))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        suggestion = self._by_id.get(str(event.row_key.value))
        if suggestion is not None:
            self._show(suggestion)

    def _show(self, s: Suggestion) -> None:
        detail = Text()
        detail.append(f"{s.priority} priority · {edits(s, TYPE_SHORT)}\n", style="bold")
        if s.type == "example":
            detail.append("Source: ", style="bold")
            detail.append(example_source(s) + "\n")
        if s.reasoning:
            detail.append("Reasoning: ", style="bold")
            detail.append(s.reasoning + "\n")
        if s.expected_improvement:
            detail.append("Expected: ", style="bold")
            detail.append(s.expected_improvement + "\n")
        detail.append("Targets: ", style="bold")
        detail.append((", ".join(s.target_cases) or "-") + "\n")
        if s.decision == "rejected" and s.reason:
            detail.append("Rejected: ", style="bold red")
            detail.append(s.reason + "\n")
        if s.decision == "edited":
            detail.append("Edited by you.\n", style="yellow")
        self.query_one("#detail", Static).update(detail)
        if s.id == self._whole_id:  # the rewrite: the whole candidate against the incumbent
            diff = prompt_diff(self._prompt, apply_suggestions(self._prompt, self.suggestions).prompt,
                               a_label="current", b_label="candidate")
        else:
            diff = suggestion_diff(self._prompt, s)
        self.query_one("#diff", DiffView).show(diff.splitlines(), empty="this suggestion changes nothing")

    def _refresh_summary(self) -> None:
        counts = {d: 0 for d in ("approved", "edited", "rejected", "pending")}
        for s in self.suggestions:
            counts[s.decision] = counts.get(s.decision, 0) + 1
        r = self.request
        score = "" if r.score is None else f" · score {r.score:.1f}"
        parts = [f"{n} {d}" for d, n in counts.items() if n]
        self.query_one("#review-summary", Static).update(
            Text(f"Round {r.round}{' · ' + r.candidate if r.candidate else ''} · v{r.version}{score} · "
                 f"{plural(len(self.suggestions), 'suggestion')}: ")
            + Text(", ".join(parts), style="bold")
        )

    def _decide(self, s: Suggestion, decision: str, *, reason: str = "", edited: str | None = None) -> None:
        s.decision = decision  # type: ignore[assignment]
        s.reason = reason
        s.edited_value = edited
        self._redraw_row(s)
        self._sync_whole()  # the rewrite, if any, is laid over what the decisions now make
        self._refresh_summary()
        self._show(s)

    def _redraw_row(self, s: Suggestion) -> None:
        table = self.query_one("#suggestions", DataTable)
        for column, value in zip(("decision", "priority", "type", "change"), self._cells(s), strict=True):
            table.update_cell(s.id, column, value)

    def _sync_whole(self) -> None:
        """Lay the reviewer's rewrite over the candidate the other decisions now make: its row
        follows (added, updated, or gone when the rewrite equals the candidate)."""
        others = [s for s in self.suggestions if s.id != self._whole_id]
        whole = (None if self._whole_text is None else
                 whole_prompt_edit(self._prompt, others, self._whole_text, id=self._whole_id))
        table = self.query_one("#suggestions", DataTable)
        had = self._by_id.pop(self._whole_id, None) is not None
        self.suggestions = others
        if whole is None:
            if had:
                table.remove_row(self._whole_id)
            return
        self.suggestions.append(whole)
        self._by_id[whole.id] = whole
        if had:
            self._redraw_row(whole)
        else:
            table.add_row(*self._cells(whole), key=whole.id)

    # -- actions -----------------------------------------------------------

    def action_approve(self) -> None:
        if (s := self.selected) is not None:
            if s.id != self._whole_id:  # the rewrite is approved by being written
                self._decide(s, "approved")
            self._advance()

    def action_approve_all(self) -> None:
        for s in list(self.suggestions):
            if s.decision == "pending":
                self._decide(s, "approved")

    def action_undo(self) -> None:
        if (s := self.selected) is not None:
            if s.id == self._whole_id:
                self._drop_whole()
            else:
                self._decide(s, "pending")

    def action_reject(self) -> None:
        s = self.selected
        if s is None:
            return
        if s.id == self._whole_id:
            self._drop_whole()
            return

        def rejected(reason: str | None) -> None:
            if reason is not None:
                self._decide(s, "rejected", reason=reason or "rejected by the reviewer")
                self._advance()

        self.app.push_screen(ReasonScreen(), rejected)

    def action_edit(self) -> None:
        s = self.selected
        if s is None:
            return
        if s.id == self._whole_id:
            self.action_edit_whole()
            return

        def edited(text: str | None) -> None:
            if text is None:
                return
            if text == s.suggested_value:
                self._decide(s, "approved")
            else:
                self._decide(s, "edited", edited=text)

        self.app.push_screen(EditScreen(s.value), edited)

    def action_edit_target(self) -> None:
        """Edit the text the suggestion replaces (the improver quoted the prompt inexactly,
        or the edit belongs elsewhere); the diff shows the result at once."""
        s = self.selected
        if s is None:
            return
        if s.id == self._whole_id:
            self.action_edit_whole()
            return

        def edited(text: str | None) -> None:
            if text is None or text == s.current_value:
                return
            s.current_value = text
            self._decide(s, "edited", edited=s.value)

        self.app.push_screen(EditScreen(s.current_value, "the text it replaces (empty: append)"),
                             edited)

    def action_edit_whole(self) -> None:
        """Rewrite the whole candidate system prompt, as the decisions so far leave it (or as
        last rewritten); the rewrite is one more row, applied after every other edit."""
        others = [s for s in self.suggestions if s.id != self._whole_id]
        text = self._whole_text
        if text is None:
            text = apply_suggestions(self._prompt, others).prompt.system

        def edited(new: str | None) -> None:
            if new is None:
                return
            self._whole_text = new
            self._sync_whole()
            self._refresh_summary()
            table = self.query_one("#suggestions", DataTable)
            if self._whole_id in self._by_id:
                table.move_cursor(row=table.get_row_index(self._whole_id))
                self._show(self._by_id[self._whole_id])

        self.app.push_screen(EditScreen(text, "the whole candidate system prompt"), edited)

    def _drop_whole(self) -> None:
        self._whole_text = None
        self._sync_whole()
        self._refresh_summary()
        if (s := self.selected) is not None:
            self._show(s)

    def action_submit(self) -> None:
        undecided = [s for s in self.suggestions if s.decision == "pending"]
        if not undecided:
            self.dismiss(self.suggestions)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                for s in undecided:
                    s.decision, s.reason = "rejected", UNDECIDED_REASON
                self.dismiss(self.suggestions)

        self.app.push_screen(
            ConfirmScreen(f"{plural(len(undecided), 'suggestion')} undecided: reject them and submit?"),
            confirmed,
        )

    def _advance(self) -> None:
        """Move to the next suggestion, so a review is a run of single keys."""
        table = self.query_one("#suggestions", DataTable)
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1)
