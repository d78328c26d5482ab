"""Screenshots of every screen at 80x24 and at 120x40 (pytest-textual-snapshot).

Deterministic: stored versions carry a fixed time, events fixed timestamps,
and the app's clock is frozen. Update with ``pytest --snapshot-update``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from textual.widgets import RichLog

from cycle.cli import cli
from cycle.events import EventBus
from cycle.loop.review import Reviewer
from cycle.store import Store
from cycle.tui.app import CycleApp
from cycle.tui.screens.case import CaseScreen
from cycle.tui.screens.review import ReviewScreen
from cycle.tui.widgets.header import HeaderInfo
from tests.tui.conftest import T0, population_events, review_request, synthetic_events
from tests.tui.test_dashboard import emitting_app

INFO = HeaderInfo(
    prompt_id="support-reply", version="1.0.1",
    models={"agent": "offline:default", "judge": "offline:default"}, offline=True,
)
SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


@SIZES
def test_history_screen(snap_compare, history_store: Store, size) -> None:  # type: ignore[no-untyped-def]
    app = CycleApp(store=history_store, prompt_id="support-reply", info=HeaderInfo(store="cycle.db"))
    assert snap_compare(app, press=["a", "down", "down", "b", "d"], terminal_size=size)


@SIZES
def test_help_screen(snap_compare, history_store: Store, size) -> None:  # type: ignore[no-untyped-def]
    app = CycleApp(store=history_store, prompt_id="support-reply", info=HeaderInfo(store="cycle.db"))
    assert snap_compare(app, press=["question_mark"], terminal_size=size)


def settled(app):  # type: ignore[no-untyped-def]
    """Waits, before the snapshot, until the dashboard has shown every event it was sent."""
    async def settle(pilot) -> None:  # type: ignore[no-untyped-def]
        for _ in range(100):
            await pilot.pause(0.02)
            if app.state.events_seen and not app.bridge.pending and not app.state.has_changes:
                break
        await pilot.pause(0.15)
        # the log is on its last line once the layout has settled (a population's row
        # resizes it a frame after the events are drawn)
        log = app.screen.query_one("#log", RichLog)
        for _ in range(50):
            if log.scroll_y >= log.max_scroll_y:
                break
            await pilot.pause(0.02)
        await pilot.pause(0.05)
    return settle


@SIZES
def test_dashboard_screen(snap_compare, tmp_path: Path, size) -> None:  # type: ignore[no-untyped-def]
    app = emitting_app(tmp_path, synthetic_events())

    assert snap_compare(app, run_before=settled(app), terminal_size=size)


@SIZES
def test_population_dashboard_screen(snap_compare, tmp_path: Path, size) -> None:  # type: ignore[no-untyped-def]
    """A population's round on the dashboard: its candidates and the frontier."""
    app = emitting_app(tmp_path, population_events())

    assert snap_compare(app, run_before=settled(app), terminal_size=size)


@SIZES
def test_review_screen(snap_compare, tmp_path: Path, size) -> None:  # type: ignore[no-untyped-def]
    async def cycle(bus: EventBus, reviewer: Reviewer) -> None:
        await reviewer.review(review_request())

    app = CycleApp(cycle=cycle, store_path=tmp_path / "cycle.db", info=INFO, clock=lambda: T0)

    async def wait_for_review(pilot) -> None:  # type: ignore[no-untyped-def]
        for _ in range(100):
            if isinstance(app.screen, ReviewScreen):
                break
            await pilot.pause(0.02)
        await pilot.pause()
        await pilot.press("a", "r")
        await pilot.pause()
        await pilot.press(*"too vague", "enter")
        await pilot.pause()
        await pilot.press("up")  # back on the approved one: its diff

    assert snap_compare(app, run_before=wait_for_review, terminal_size=size)


@SIZES
def test_case_screen(snap_compare, tmp_path: Path, size) -> None:  # type: ignore[no-untyped-def]
    """A case of an offline run of the quickstart: input, outputs, verdicts."""
    for name in ("cases", "prompts", "cycle.yaml"):
        src = QUICKSTART / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    db = tmp_path / "cycle.db"
    r = CliRunner().invoke(cli, ["run", str(tmp_path / "cycle.yaml"), "--store", str(db), "-n", "2",
                                 "--case", "late-delivery", "--json", "--no-reports"])
    run_id = json.loads(r.output)["run_id"]
    store = Store.open(db)
    app = CycleApp(store=store, prompt_id="support-reply", info=HeaderInfo(store="cycle.db"))

    async def open_case(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause()
        screen = CaseScreen(store, run_id, "late-delivery", INFO)
        await app.push_screen(screen)
        for _ in range(100):
            if screen.results is not None:
                break
            await pilot.pause(0.02)
        await pilot.pause()

    try:
        assert snap_compare(app, run_before=open_case, terminal_size=size)
    finally:
        store.close()


@SIZES
def test_label_screen(snap_compare, tmp_path: Path, size) -> None:  # type: ignore[no-untyped-def]
    """An offline run's first output to label, its first criterion scored (the judge's
    score shown for it, hidden for the others)."""
    from cycle.judge.calibration import to_label
    from cycle.tui.app import LabelApp
    from tests.tui.test_label import RUN, stored_run

    with Store.open(stored_run(tmp_path)) as store:
        outputs, criteria = to_label(store, RUN, 4)
        app = LabelApp(store, RUN, outputs, criteria, labeler="ann")
        assert snap_compare(app, press=["p"], terminal_size=size)
