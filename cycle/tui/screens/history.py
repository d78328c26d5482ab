"""History: the prompts in the store, their versions (with who stored them), diffs and
rollback.

Reads through the Store API only; the one write is ``Store.rollback``, after
a confirmation, recorded as by the person at the terminal (cycle.authors); a protected
head refuses it with a notice (the CLI's ``--force`` is the way past a protection).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.widgets.data_table import ColumnKey

from cycle.authors import current_author
from cycle.errors import StoreError
from cycle.records import BUILTIN_PROMPTS
from cycle.tui.screens.confirm import ConfirmScreen
from cycle.tui.widgets import plain
from cycle.tui.widgets.diff_view import DiffView
from cycle.tui.widgets.header import CycleHeader, HeaderInfo

if TYPE_CHECKING:
    from cycle.records import Version
    from cycle.store import Store

def _when(value: datetime | str | float | None) -> str:
    if value is None:
        return ""
    if isinstance(value, (int, float)):
        value = datetime.fromtimestamp(value, tz=UTC)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


#: the labels column; what does not fit is abbreviated or counted, never cut mid-word
LABELS_WIDTH = 14
SHORT_LABELS = {"production": "prod"}


#: the author column: a person's name, or "cycle (alice)" for a cycle's candidate
AUTHOR_WIDTH = 14
#: the terminal width from which the versions table has room for the author column
WIDE = 100


def fit(text: str, width: int) -> str:
    """``text`` in ``width`` characters, an ellipsis where it is cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def fit_labels(labels: list[str], width: int) -> str:
    """``head, production`` in ``width`` characters: whole, else with short names
    (``head, prod``), else as many whole labels as fit and how many more (``head +2``)."""
    for names in (labels, [SHORT_LABELS.get(x, x) for x in labels]):
        if len(", ".join(names)) <= width:
            return ", ".join(names)
    for k in range(len(names) - 1, 0, -1):
        text = ", ".join(names[:k]) + f" +{len(names) - k}"
        if len(text) <= width:
            return text
    return f"+{len(names)}" if len(names) > 1 else names[0][: width - 1] + "…"


class HistoryScreen(Screen[None]):
    """Browse versions; mark two and diff them; roll a label back."""

    TITLE = "History"
    HELP = """\
Every version of every prompt in the store, newest first, with its labels, the
score of its latest evaluation and who stored it ("cycle (alice)": a cycle
alice ran). The diff shows the highlighted version against its parent; mark two
versions (a, b) and press d to compare them. Rollback moves the head label to
the highlighted version after you confirm; nothing is deleted (a protected head
moves only with the CLI's --force, or by the people its protection names). r
lists every stored run (eval files run against an endpoint included) and their
cases. s opens Simulate on ./cycle.yaml's agent: you play its model and the
session becomes a golden trace.
"""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "mark('a')", "Mark A"),
        Binding("b", "mark('b')", "Mark B"),
        Binding("d", "diff", "Diff A..B"),
        Binding("R", "rollback", "Rollback"),
        Binding("r", "runs", "Runs"),
        Binding("s", "app.simulate", "Simulate"),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self, store: Store, info: HeaderInfo, *, prompt_id: str | None = None) -> None:
        super().__init__()
        self.store = store
        self.info = info
        self.prompt_id = prompt_id
        self.versions: dict[str, Version] = {}
        self.marks: dict[str, str | None] = {"a": None, "b": None}
        #: whether the screen is wide enough for the author column (WIDE)
        self._wide = True
        self._scores: dict[str, tuple[float, bool]] = {}

    def compose(self) -> ComposeResult:
        yield CycleHeader(self.info)
        yield Static(id="history-summary", classes="summary")
        with Horizontal(id="history-body"):
            prompts: DataTable[str] = DataTable(id="prompts", cursor_type="row", show_header=False)
            prompts.border_title = "Prompts"
            yield prompts
            with Vertical(id="history-right"):
                versions: DataTable[Text | str] = DataTable(id="versions", cursor_type="row")
                versions.border_title = "Versions"
                yield versions
                with VerticalScroll(id="history-diff") as panel:
                    panel.border_title = "Diff"
                    yield Static(id="version-meta")
                    yield DiffView(id="version-diff")
        yield Footer()

    def on_resize(self, event: events.Resize) -> None:
        # at 80 columns the versions' messages need the room more than the prompt names,
        # and than the authors (the highlighted version's author is in the diff's heading)
        wide = event.size.width >= WIDE
        self.query_one("#prompts", DataTable).styles.width = 20 if wide else 14
        if wide != self._wide:
            self._wide = wide
            selected = self.selected_version
            self._add_columns()
            if self.versions:
                self._load_versions(keep=selected.version if selected else None)

    def on_mount(self) -> None:
        self._wide = self.app.size.width >= WIDE
        self._add_columns()
        self.reload()
        self.query_one("#versions", DataTable).focus()

    def _add_columns(self) -> None:
        versions = self.query_one("#versions", DataTable)
        versions.clear(columns=True)
        author = [("author", "author", AUTHOR_WIDTH)] if self._wide else []
        for label, key, width in (
            ("", "mark", 1), ("version", "version", 7), ("labels", "labels", LABELS_WIDTH),
            ("score", "score", 6), ("source", "source", 8), *author, ("message", "message", None),
        ):
            versions.add_column(label, key=key, width=width)

    # -- loading -----------------------------------------------------------

    def reload(self) -> None:
        """Read the prompts (and the chosen prompt's versions) from the store again."""
        prompts = self.query_one("#prompts", DataTable)
        prompts.clear()
        if not prompts.columns:
            prompts.add_column("prompt", key="prompt")
        # cycle's own prompts only when asked for by name (cycle tui cycle-improver)
        summaries = [s for s in self.store.list_prompts()
                     if s.id not in BUILTIN_PROMPTS or s.id == self.prompt_id]
        for summary in summaries:
            prompts.add_row(plain(summary.id), key=summary.id)
        if not summaries:
            self.query_one("#history-summary", Static).update(
                "The store holds no prompt yet: run `cycle improve` or `cycle prompt import FILE` first."
            )
            return
        ids = [s.id for s in summaries]
        if self.prompt_id not in ids:
            self.prompt_id = ids[0]
        prompts.move_cursor(row=ids.index(self.prompt_id))
        self._load_versions()

    def _load_versions(self, *, keep: str | None = None) -> None:
        assert self.prompt_id is not None
        history = self.store.history(self.prompt_id, limit=200)
        self.versions = {v.version: v for v in history}
        offline = self.store.runs.offline_versions(self.prompt_id)
        self._scores = {
            version: (score, version in offline)
            for version, score in self.store.latest_scores(self.prompt_id).items()
        }
        labels = self.store.labels(self.prompt_id)  # head and production first
        by_version: dict[str, list[str]] = {}
        for label, version in labels.items():
            by_version.setdefault(version, []).append(label)
        table = self.query_one("#versions", DataTable)
        table.clear()
        # whole version numbers, however long (columns are sized before versions load)
        table.columns[ColumnKey("version")].width = max([7, *(len(v.version) for v in history)])
        for v in history:
            score = self._scores.get(v.version)
            score_cell = "-" if score is None else f"{score[0]:.1f}" + ("*" if score[1] else "")
            author = [plain(fit(v.author or "-", AUTHOR_WIDTH))] if self._wide else []
            table.add_row(
                self._mark_of(v.version),
                v.version,
                Text(fit_labels(by_version.get(v.version, []), LABELS_WIDTH), style="bold cyan"),
                score_cell,
                v.source,
                *author,
                plain(v.message.splitlines()[0] if v.message else ""),
                key=v.version,
            )
        offline = any(offline for _, offline in self._scores.values())
        self.query_one(CycleHeader).update(
            HeaderInfo(prompt_id=self.prompt_id, models=self.info.models,
                       offline=self.info.offline or offline, store=self.info.store)
        )
        if keep in self.versions:
            table.move_cursor(row=list(self.versions).index(keep))
        self._refresh_summary()
        if history:
            self._show_parent_diff(self.selected_version or history[0])

    def _mark_of(self, version: str) -> Text:
        if self.marks["a"] == version:
            return Text("A", style="bold magenta")
        if self.marks["b"] == version:
            return Text("B", style="bold magenta")
        return Text("")

    # -- what is shown -------------------------------------------------------

    @property
    def selected_version(self) -> Version | None:
        table = self.query_one("#versions", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return self.versions.get(str(key.value))

    def _refresh_summary(self) -> None:
        a, b = self.marks["a"] or "-", self.marks["b"] or "-"
        starred = " · * offline model" if any(o for _, o in self._scores.values()) else ""
        self.query_one("#history-summary", Static).update(
            f"{self.prompt_id}: {len(self.versions)} versions · A {a} · B {b}{starred}"
        )

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = str(event.row_key.value)
        if event.data_table.id == "prompts":
            if key != self.prompt_id:
                self.prompt_id = key
                self.marks = {"a": None, "b": None}
                self._load_versions()
        elif event.data_table.id == "versions" and key in self.versions:
            self._show_parent_diff(self.versions[key])

    def _show_parent_diff(self, version: Version) -> None:
        meta = Text()
        meta.append(f"v{version.version}", style="bold")
        meta.append(f" · {version.source} · {_when(version.created_at)} · by ")
        meta.append(version.author or "-")  # a name is text from outside: never markup
        meta.append(f" · {version.hash[:10]}")
        if version.second_parent:
            meta.append(f" · merge of {version.parent} and {version.second_parent}")
        if version.message:
            meta.append(f"\n{version.message}", style="italic")
        self.query_one("#version-meta", Static).update(meta)
        diff_view = self.query_one("#version-diff", DiffView)
        if version.parent:
            diff = self.store.diff(version.prompt_id, version.parent, version.version)
            diff_view.show(diff.render().splitlines(), empty="same content as its parent")
        else:
            lines = [f"+{line}" for line in version.prompt.system.splitlines()]
            diff_view.show(["(first version: its system prompt)"] + lines)

    # -- actions -----------------------------------------------------------

    def action_mark(self, which: str) -> None:
        version = self.selected_version
        if version is None:
            return
        other = "b" if which == "a" else "a"
        if self.marks[other] == version.version:  # a diff of a version with itself
            self.notify(f"{version.version} is marked {other.upper()} already: mark another "
                        f"version {which.upper()}, then press d", severity="warning")
            return
        table = self.query_one("#versions", DataTable)
        previous = self.marks[which]
        self.marks[which] = version.version
        for v in {previous, version.version} - {None}:
            if v in self.versions:
                table.update_cell(v, "mark", self._mark_of(v))  # type: ignore[arg-type]
        self._refresh_summary()

    def action_diff(self) -> None:
        a, b = self.marks["a"], self.marks["b"]
        if a is None or b is None:
            self.notify("Mark two versions first: a on one, b on the other.", severity="warning")
            return
        assert self.prompt_id is not None
        diff = self.store.diff(self.prompt_id, a, b)
        self.query_one("#version-meta", Static).update(Text(f"v{a} → v{b}", style="bold"))
        self.query_one("#version-diff", DiffView).show(
            diff.render().splitlines(), empty=f"v{a} and v{b} have the same content"
        )

    def action_rollback(self) -> None:
        version = self.selected_version
        if version is None or self.prompt_id is None:
            return
        prompt_id = self.prompt_id
        head = self.store.labels(prompt_id).get("head")
        if head == version.version:
            self.notify(f"head is already at v{version.version}.")
            return

        def confirmed(yes: bool | None) -> None:
            if not yes:
                return
            try:
                self.store.rollback(
                    prompt_id, version.version, label="head",
                    reason=f"rollback from v{head} in the TUI", who=current_author(),
                )
            except StoreError as e:  # a protected head: said, not a crash of the screen
                self.notify(str(e), severity="error", timeout=10)
                return
            self.notify(f"head of {prompt_id} moved to v{version.version}")
            self._load_versions(keep=version.version)

        self.app.push_screen(
            ConfirmScreen(
                f"Roll back {prompt_id}: move head from v{head} to v{version.version}?\n"
                "Nothing is deleted; the move is recorded."
            ),
            confirmed,
        )

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()

    def action_runs(self) -> None:
        from cycle.tui.screens.runs import RunsScreen

        self.app.push_screen(RunsScreen(self.store, self.info))
