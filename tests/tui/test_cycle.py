"""A real cycle (the Loop, scripted models) under the TUI: the dashboard, a review
with approve, reject and edit, then a rollback from the History screen; the store
is checked afterwards."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable

from cycle.assemble import build_loop
from cycle.assemble.config import LoadedConfig
from cycle.events import EventBus
from cycle.loop.review import Reviewer
from cycle.store import Store
from cycle.tui.app import CycleApp
from cycle.tui.screens.confirm import ConfirmScreen
from cycle.tui.screens.dashboard import DashboardScreen
from cycle.tui.screens.history import HistoryScreen
from cycle.tui.screens.review import ReviewScreen
from cycle.tui.widgets.case_table import CaseTable
from cycle.tui.widgets.header import HeaderInfo


def _rendered(visual) -> str:  # type: ignore[no-untyped-def]
    console = Console(width=80, file=io.StringIO(), record=True)
    console.print(getattr(visual, "_renderable", visual))
    return console.export_text()


async def _until(pilot, condition, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(300):
        if condition():
            await pilot.pause()
            return
        outcome = pilot.app.outcome
        if outcome is not None and outcome.status == "failed":
            raise AssertionError(f"the cycle failed: {outcome.error!r}") from outcome.error
        await pilot.pause(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_real_cycle_reviewed_and_rolled_back(loaded: LoadedConfig, tmp_path: Path) -> None:
    db = tmp_path / ".cycle" / "cycle.db"

    async def cycle(bus: EventBus, reviewer: Reviewer):  # type: ignore[no-untyped-def]
        with Store.open(db) as store:  # opened in the cycle's own thread
            return await build_loop(loaded, store=store, bus=bus, reviewer=reviewer).run()

    info = HeaderInfo(prompt_id="support", models={"agent": "scripted:agent", "judge": "scripted:judge"},
                      offline=True)
    app = CycleApp(cycle=cycle, store_path=db, info=info)
    async with app.run_test(size=(80, 24)) as pilot:
        # the baseline is evaluated and shown, then the loop asks for a review
        await _until(pilot, lambda: isinstance(app.screen, ReviewScreen), "the review")
        dashboard = app.screen_stack[0]
        assert isinstance(dashboard, DashboardScreen)
        # the dashboard under the review catches up within a refresh or two
        rounds = dashboard.query_one("#rounds", DataTable)
        await _until(pilot, lambda: rounds.row_count > 0
                     and str(rounds.get_row("0")[2]).startswith("40.0"), "round 0 on the dashboard")
        await _until(pilot, lambda: dashboard.query_one("#cases", CaseTable).row_count == 6,
                     "the cases of round 0")

        await pilot.press("a")  # approve "say sorry"
        await pilot.press("r")  # reject "say order", with a reason
        await _until(pilot, lambda: type(app.screen).__name__ == "ReasonScreen", "the reason prompt")
        await pilot.press(*"off topic", "enter")
        await pilot.press("e")  # edit "say nothing" into "say thanks"
        await _until(pilot, lambda: type(app.screen).__name__ == "EditScreen", "the editor")
        app.screen.query_one("#editor").text = "Always say thanks."
        await pilot.press("ctrl+s")
        await pilot.pause()
        await pilot.press("s")
        await _until(pilot, lambda: app.outcome is not None, "the end of the cycle")
        assert app.outcome is not None and app.outcome.status == "finished", app.outcome
        result = app.outcome.result
        await _until(pilot, lambda: rounds.row_count > 1, "round 1 on the dashboard")
        assert [str(c) for c in rounds.get_row("1")][1:2] == ["1.0.1"]
        assert str(rounds.get_row("1")[5]) == "yes"

        # a case of the last evaluation: its input, output and the judge's reasoning
        dashboard.query_one("#cases", CaseTable).focus()
        await pilot.press("enter")
        await _until(pilot, lambda: type(app.screen).__name__ == "CaseScreen", "the case screen")
        await _until(pilot, lambda: app.screen.results is not None, "the case's results")  # read in a thread
        text = _rendered(app.screen.query_one("#case-detail").render())
        assert "Input" in text and "case 1" in text and "Iteration 0" in text
        assert "Hello. sorry thanks" in text and "points for the keywords" in text
        await pilot.press("escape")

        # History: the candidate is head; roll back to the first version
        await pilot.press("h")
        await _until(pilot, lambda: isinstance(app.screen, HistoryScreen), "the history")
        versions = app.screen.query_one("#versions", DataTable)
        assert [versions.get_row_at(i)[1] for i in range(versions.row_count)] == ["1.0.1", "1.0.0"]
        await pilot.press("down", "R")
        await _until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        await pilot.pause()
        await pilot.press("escape", "q")  # back to the dashboard; the cycle is over: no question
        await pilot.pause()

    assert app.return_value is app.outcome
    with Store.open(db) as store:
        assert store.labels("support")["head"] == "1.0.0"
        assert "Always say thanks." in store.get_version("support", "1.0.1").prompt.system
        assert "say order" not in store.get_version("support", "1.0.1").prompt.system
        assert store.cycles.get(result.cycle_id).status == "finished"
        decided = {s.suggested_value: s for s in store.cycles.get_suggestions(result.cycle_id, 1)}
        assert decided["Always say sorry."].decision == "approved"
        assert (decided["Always say order."].decision, decided["Always say order."].reason) == ("rejected", "off topic")
        edited = decided["Always say nothing."]
        assert (edited.decision, edited.edited_value) == ("edited", "Always say thanks.")


async def test_quitting_mid_review_leaves_the_cycle_resumable(loaded: LoadedConfig, tmp_path: Path) -> None:
    db = tmp_path / ".cycle" / "cycle.db"

    async def cycle(bus: EventBus, reviewer: Reviewer):  # type: ignore[no-untyped-def]
        with Store.open(db) as store:
            return await build_loop(loaded, store=store, bus=bus, reviewer=reviewer).run()

    app = CycleApp(cycle=cycle, store_path=db)
    async with app.run_test(size=(80, 24)) as pilot:
        await _until(pilot, lambda: isinstance(app.screen, ReviewScreen), "the review")
        cycle_id = app.screen.request.cycle_id
        opened = app.store  # the app's own connection, for its screens
        await pilot.press("q")
        await _until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        await _until(pilot, lambda: app.outcome is not None, "the interruption")
    assert app.outcome is not None and app.outcome.status == "interrupted"
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):  # closed with the app
        opened.db.execute("SELECT 1")
    with Store.open(db) as store:
        assert store.cycles.get(cycle_id).status == "interrupted"
        assert store.labels("support")["head"] == "1.0.0"  # nothing was applied


async def test_a_real_population_cycle_shows_its_last_round_and_the_frontier(
        merge_world, tmp_path: Path) -> None:
    """A cycle of two candidates a round whose third round merges (the Loop, scripted
    models, reviewed by the policy): the dashboard ends on round 3's candidates, the merge
    with both its parents, and on the frontier the reports read back from the store."""
    from cycle.loop.lineage import lineage_of
    from cycle.loop.review import AutoReviewer

    loaded = merge_world([])
    db = tmp_path / ".cycle" / "cycle.db"

    async def cycle(bus: EventBus, reviewer: Reviewer):  # type: ignore[no-untyped-def]
        with Store.open(db) as store:
            return await build_loop(loaded, store=store, bus=bus, reviewer=AutoReviewer()).run()

    app = CycleApp(cycle=cycle, store_path=db, info=HeaderInfo(prompt_id="support"))
    async with app.run_test(size=(80, 24)) as pilot:
        await _until(pilot, lambda: app.outcome is not None, "the end of the cycle")
        assert app.outcome is not None and app.outcome.status == "finished", app.outcome
        dashboard = app.screen
        candidates = dashboard.query_one("#candidates", DataTable)
        await _until(pilot, lambda: candidates.border_title == "Candidates of round 3",
                     "round 3's candidates")
        rows = [[str(c) for c in candidates.get_row_at(i)] for i in range(candidates.row_count)]
        front = dashboard.query_one("#frontier", DataTable)
        shown = {str(front.get_row_at(i)[0]): str(front.get_row_at(i)[1])
                 for i in range(front.row_count)}
    # its first candidate came to nothing (the improver had no edit of 1.0.1 left)
    assert rows == [["1", "-", "1.0.1", "-", "none"], ["2", "1.0.4", "1.0.1 + 1.0.3", "+7.5", "kept"]]
    with Store.open(db) as store:
        stored = lineage_of(store, app.outcome.result.cycle_id).frontier
    assert shown == {v: f"{n} cases" for v, n in stored.items()} and len(shown) == 3
