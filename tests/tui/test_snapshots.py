"""Screenshots of each screen at 80x24 (pytest-textual-snapshot).

Deterministic: stored versions carry a fixed time, events fixed timestamps,
and the app's clock is frozen. Update with ``pytest --snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path

from cycle.events import EventBus
from cycle.loop.review import Reviewer
from cycle.store import Store
from cycle.tui.app import CycleApp
from cycle.tui.screens.review import ReviewScreen
from cycle.tui.widgets.header import HeaderInfo
from tests.tui.conftest import T0, review_request, synthetic_events
from tests.tui.test_dashboard import emitting_app

INFO = HeaderInfo(
    prompt_id="support-reply", version="1.0.1",
    models={"agent": "offline:default", "judge": "offline:default"}, offline=True,
)


def test_history_screen(snap_compare, history_store: Store) -> None:  # type: ignore[no-untyped-def]
    app = CycleApp(store=history_store, prompt_id="support-reply", info=HeaderInfo(store="cycle.db"))
    assert snap_compare(app, press=["a", "down", "down", "b", "d"], terminal_size=(80, 24))


def test_help_screen(snap_compare, history_store: Store) -> None:  # type: ignore[no-untyped-def]
    app = CycleApp(store=history_store, prompt_id="support-reply", info=HeaderInfo(store="cycle.db"))
    assert snap_compare(app, press=["question_mark"], terminal_size=(80, 24))


def test_dashboard_screen(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app = emitting_app(tmp_path, synthetic_events())

    async def settle(pilot) -> None:  # type: ignore[no-untyped-def]
        for _ in range(100):
            await pilot.pause(0.02)
            if app.state.events_seen and not app.bridge.pending and not app.state.has_changes:
                break
        await pilot.pause(0.15)

    assert snap_compare(app, run_before=settle, terminal_size=(80, 24))


def test_review_screen(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
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

    assert snap_compare(app, run_before=wait_for_review, terminal_size=(80, 24))
