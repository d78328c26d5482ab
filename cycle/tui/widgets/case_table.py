"""The running suite's cases, drawn line by line.

A DataTable measures every cell of every row it is given, which for a suite
of 10,000 cases costs the running cycle a noticeable share of the GIL. This
widget (Textual's line API on a ScrollView) keeps references to the
dashboard's ``CaseRow`` objects and formats only the lines on screen, so a
frame costs the same with 10 cases or 10,000.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cycle.tui.state import CaseRow

#: (title, width, right-aligned)
COLUMNS: tuple[tuple[str, int, bool], ...] = (
    ("case", 14, False), ("n", 3, True), ("mean", 5, True), ("pass", 5, True),
    ("turns", 5, True), ("lim", 3, True), ("err", 3, True),
)
HEADER = Style(bold=True)
CURSOR = Style(reverse=True)
GREEN = Style(color="green")
RED = Style(color="red")
YELLOW = Style(color="yellow")


def case_cells(row: CaseRow) -> list[tuple[str, Style | None]]:
    """The cells of one case and their colours."""
    mean = row.mean
    judged = row.done - row.errors - row.terminated  # a limit is no verdict
    colour = None if mean is None else (GREEN if row.passed * 2 >= max(1, judged) else RED)
    return [
        (row.case_id, None),
        (str(row.done), None),
        ("-" if mean is None else f"{mean:.1f}", colour),
        (f"{row.passed}/{judged}", None),
        (_turns(row.turns), None),
        (str(row.terminated), YELLOW if row.terminated else None),
        (str(row.errors), RED if row.errors else None),
    ]


def _turns(turns: list[int]) -> str:
    """How many user turns the case's conversations took: one figure, or the range."""
    if not turns:
        return "-"
    low, high = min(turns), max(turns)
    return str(low) if low == high else f"{low}-{high}"


class CaseTable(ScrollView, can_focus=True):
    """Cases with a cursor; enter posts ``CaseTable.Selected``."""

    DEFAULT_CSS = """
    CaseTable { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "move(-10)", "Page up", show=False),
        Binding("pagedown", "move(10)", "Page down", show=False),
        Binding("home", "move(-1000000000)", "First", show=False),
        Binding("end", "move(1000000000)", "Last", show=False),
        Binding("enter", "select", "Show case"),
    ]

    cursor = reactive(0)

    class Selected(Message):
        def __init__(self, case_id: str) -> None:
            super().__init__()
            self.case_id = case_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: list[CaseRow] = []
        self._index: dict[str, int] = {}

    # -- data ----------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def row(self, case_id: str) -> list[str]:
        """The shown cells of a case (for tests and tools)."""
        return [text for text, _ in case_cells(self._rows[self._index[case_id]])]

    def reset(self) -> None:
        self._rows, self._index = [], {}
        self.cursor = 0
        self._resize()

    def update_rows(self, rows: list[CaseRow]) -> None:
        """Add new cases at the bottom; cases already shown redraw from their (shared) row."""
        for row in rows:
            if row.case_id not in self._index:
                self._index[row.case_id] = len(self._rows)
                self._rows.append(row)
            else:
                self._rows[self._index[row.case_id]] = row
        self._resize()
        self.refresh()

    def _resize(self) -> None:
        width = 1 + sum(w for _, w, _ in COLUMNS) + len(COLUMNS)  # a margin, cells, gaps
        size = Size(width, len(self._rows) + 1)
        current = self.virtual_size
        if size == current:
            return
        if self.show_vertical_scrollbar and size.width == current.width and size.height > current.height:
            # a longer list under a scrollbar already shown: only the scrollbar's
            # thumb changes. Setting ``virtual_size`` would lay out the whole
            # screen (~10 ms at 80x24, once a second while a run is fast)
            self.set_reactive(ScrollView.virtual_size, size)
            self._scroll_update(size)
        else:
            self.virtual_size = size

    # -- drawing -------------------------------------------------------------

    def _line(self, cells: list[tuple[str, Style | None]], base: Style | None) -> list[Segment]:
        segments = [Segment(" ", base)]
        for (text, style), (_, width, right) in zip(cells, COLUMNS, strict=True):
            text = text if len(text) <= width else text[: width - 1] + "…"
            text = text.rjust(width) if right else text.ljust(width)
            segments.append(Segment(text + " ", (base + style) if base and style else (style or base)))
        return segments

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            header = [(title, None) for title, _, _ in COLUMNS]
            return Strip(self._line(header, HEADER)).adjust_cell_length(width).crop(0, width)
        index = int(self.scroll_offset.y) + y - 1
        if index >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        base = CURSOR if index == self.cursor and self.has_focus else None
        strip = Strip(self._line(case_cells(self._rows[index]), base))
        return strip.adjust_cell_length(width, base or self.rich_style).crop(0, width)

    # -- moving ----------------------------------------------------------------

    def watch_cursor(self, old: int, new: int) -> None:
        visible = max(1, self.size.height - 1)
        top = int(self.scroll_offset.y)
        if new < top:
            self.scroll_to(y=new, animate=False)
        elif new >= top + visible:
            self.scroll_to(y=new - visible + 1, animate=False)
        self.refresh()

    def action_move(self, by: int) -> None:
        if self._rows:
            self.cursor = max(0, min(len(self._rows) - 1, self.cursor + by))

    def action_select(self) -> None:
        if self._rows:
            self.post_message(self.Selected(self._rows[self.cursor].case_id))

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
