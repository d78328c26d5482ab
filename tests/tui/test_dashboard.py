"""The Dashboard driven by an event stream, and the throttled bridge."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from textual.widgets import DataTable, ProgressBar, RichLog, Sparkline, Static

from cycle import events as ev
from cycle.events import EventBus
from cycle.loop.review import Reviewer
from cycle.tui.app import CycleApp
from cycle.tui.bridge import EventBridge
from cycle.tui.screens.dashboard import DashboardScreen
from cycle.tui.state import DashboardState
from cycle.tui.widgets.case_table import CaseTable
from cycle.tui.widgets.header import HeaderInfo
from tests.tui.conftest import T0, population_events, synthetic_events


def emitting_app(tmp_path: Path, events: list[ev.Event], *, hold: bool = True, **kwargs) -> CycleApp:  # type: ignore[no-untyped-def]
    """An app whose 'cycle' emits ``events`` and then (if ``hold``) waits to be interrupted."""

    async def cycle(bus: EventBus, reviewer: Reviewer) -> None:
        for event in events:
            bus.emit(event)
        if hold:
            await asyncio.Event().wait()

    info = HeaderInfo(prompt_id="support-reply", models={"agent": "offline:default"}, offline=True)
    kwargs.setdefault("clock", lambda: T0 + 60)
    return CycleApp(cycle=cycle, store_path=tmp_path / "cycle.db", info=info, **kwargs)


async def _settle(pilot, app: CycleApp) -> None:  # type: ignore[no-untyped-def]
    for _ in range(100):
        await pilot.pause(0.02)
        if app.state.events_seen and not app.bridge.pending and not app.state.has_changes:
            await pilot.pause(0.05)
            return


async def test_dashboard_shows_rounds_progress_cost_and_cases(tmp_path: Path) -> None:
    events = synthetic_events()
    app = emitting_app(tmp_path, events)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        rounds = screen.query_one("#rounds", DataTable)
        assert rounds.row_count == 3
        assert [str(c) for c in rounds.get_row("1")][:6] == ["1", "1.0.1", "81.0 ±7.0", "75%", "+8.5", "yes"]
        # beside each round's score, the judge's agreement with people: uncalibrated until
        # labelled, then kappa with its interval and the labels; a running round's is to come
        judge = {key: str(rounds.get_cell(key, "judge")) for key in ("0", "1", "2")}
        assert judge == {"0": "uncalibrated", "1": "0.62 [0.41, 0.80] n 40", "2": "…"}
        bar = screen.query_one("#progress", ProgressBar)
        assert (bar.total, bar.progress) == (8, 3)
        status = str(screen.query_one("#status").render())
        # the cycle's elapsed time (started at T0, the frozen clock says T0 + 60)
        assert "3/8 done" in status and "1 error ·" in status and "1:00" in status
        assert "cost $0.0200 of $1.00" in str(screen.query_one("#cost").render())
        assert screen.query_one("#sparkline", Sparkline).data == [72.5, 81.0]
        cases = screen.query_one("#cases", CaseTable)
        assert cases.row_count == 3  # only the running round's cases
        assert cases.row("refund-2") == ["refund-2", "1", "-", "0/0", "-", "0", "1"]
        log = "".join(line.text for line in screen.query_one("#log", RichLog).lines)
        assert "candidate v1.0.1 accepted" in log and "refund-2 #0: timeout after 30s" in log
        words = log.replace(" ", "")  # the log wraps its lines at the panel's width
        assert "round0finished:v1.0.0score72.5;judgeuncalibrated(nolabels)" in words
        assert "round1finished:v1.0.1score81.0;judgekappa0.62[0.41,0.80],n40" in words
        assert "OFFLINE MODEL" in str(screen.query_one("#offline", Static).render())


async def test_elapsed_time_ticks_while_nothing_happens(tmp_path: Path) -> None:
    now = [T0 + 5]
    app = emitting_app(tmp_path, synthetic_events(), clock=lambda: now[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        assert "0:05" in str(app.screen.query_one("#status").render())
        now[0] = T0 + 73  # no event in between: the clock alone moves it
        await pilot.pause(0.3)
        assert "1:13" in str(app.screen.query_one("#status").render())


async def test_a_refresh_while_the_app_closes_draws_nothing(tmp_path: Path) -> None:
    """The refresh timer can fire once more after the app's screens are gone (textual
    closes them before its timers): that tick must not fail the app."""
    app = emitting_app(tmp_path, synthetic_events())
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
    app.flush_events()


async def test_quit_mid_cycle_asks_then_interrupts(tmp_path: Path) -> None:
    app = emitting_app(tmp_path, synthetic_events())
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        await pilot.press("q")
        await pilot.pause()
        assert type(app.screen).__name__ == "ConfirmScreen"
        assert "resume c-test" in str(app.screen.query_one(".question", Static).render())
        await pilot.press("n")
        await pilot.pause()
        assert app.cycle_running
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("y")
        for _ in range(100):
            if app.outcome is not None:
                break
            await pilot.pause(0.02)
    assert app.outcome is not None and app.outcome.status == "interrupted"
    assert app.return_value is app.outcome


async def _log_once_failed(app: CycleApp, pilot) -> str:
    """The Dashboard's log once its cycle has ended (a failing one: its note written)."""
    for _ in range(100):
        if app.outcome is not None:
            break
        await pilot.pause(0.02)
    await pilot.pause(0.15)
    return "".join(line.text for line in app.screen.query_one("#log", RichLog).lines)


async def test_a_failing_cycle_is_reported_not_raised(tmp_path: Path) -> None:
    async def cycle(bus: EventBus, reviewer: Reviewer) -> None:
        raise RuntimeError("provider exploded")

    app = CycleApp(cycle=cycle, store_path=tmp_path / "cycle.db")
    async with app.run_test(size=(80, 24)) as pilot:
        log = await _log_once_failed(app, pilot)
        assert app.outcome is not None and app.outcome.status == "failed"
        assert str(app.outcome.error) == "provider exploded"
        assert "the cycle failed: RuntimeError: provider exploded" in log
        await pilot.press("q")  # finished: quits without asking
        await pilot.pause()
    assert app.return_value is app.outcome


async def test_a_cycle_failing_with_the_environments_key_in_its_error_shows_it_masked(
        tmp_path: Path, monkeypatch) -> None:
    """An error cycle did not write (a plugin's, a library's) may quote a key: the CLI masks
    the environment's keys in such an 'internal error', and the Dashboard's log showed it."""
    key = "gw-secret-31415926535"
    monkeypatch.setenv("GATEWAY_SECRET", key)

    async def cycle(bus: EventBus, reviewer: Reviewer) -> None:
        raise RuntimeError(f"gateway refused {key}")

    app = CycleApp(cycle=cycle, store_path=tmp_path / "cycle.db")
    async with app.run_test(size=(80, 24)) as pilot:
        log = await _log_once_failed(app, pilot)
        await pilot.press("q")
        await pilot.pause()
    assert "the cycle failed: RuntimeError: gateway refused ***" in log and key not in log


async def test_ten_thousand_cases_are_drawn_in_few_batches(tmp_path: Path) -> None:
    n = 10_000
    events: list[ev.Event] = [ev.RunStarted(at=T0, run_id="big", cases=n, iterations=1)]
    events += [
        ev.CaseFinished(at=T0 + i / 1000, run_id="big", case_id=f"case-{i:05d}", iteration=0,
                        score=float(i % 100), passed=i % 100 >= 70)
        for i in range(n)
    ]
    app = emitting_app(tmp_path, events)
    frames = 0
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        original = screen.show_changes

        def counting(changes, *, now):  # type: ignore[no-untyped-def]
            nonlocal frames
            frames += 1
            original(changes, now=now)

        screen.show_changes = counting  # type: ignore[method-assign]
        await _settle(pilot, app)
        assert screen.query_one("#cases", CaseTable).row_count == n
        assert screen.query_one("#progress", ProgressBar).progress == n
    # 10,001 events, a handful of redraws: the refresh timer batches them
    assert 1 <= frames <= 20


def test_state_folds_events_and_hands_over_changes_once() -> None:
    state = DashboardState()
    for event in synthetic_events():
        state.apply(event)
    changes = state.take_changes()
    assert changes.run_reset and {c.case_id for c in changes.cases} == {"refund-1", "refund-2", "late-3"}
    assert state.rounds[0].score == 72.5 and state.rounds[1].accepted is True
    assert state.cost == 0.02 and state.cost_limit == 1.0
    assert state.take_changes().empty
    # a straggler from an earlier run changes nothing
    state.apply(ev.CaseFinished(run_id="r0", case_id="refund-1", iteration=1, score=1.0, passed=False))
    assert state.take_changes().empty and state.done == 3


def test_bridge_drains_in_order_and_detaches() -> None:
    bus = EventBus()
    bridge = EventBridge()
    bridge.attach(bus)
    for i in range(5):
        bus.emit(ev.CaseFinished(run_id="r", case_id=str(i), iteration=0, score=1.0, passed=True))
    assert [e.case_id for e in bridge.drain()] == ["0", "1", "2", "3", "4"]  # type: ignore[attr-defined]
    assert bridge.drain() == []
    bridge.detach()
    bus.emit(ev.CostUpdated(total=1.0))
    assert bridge.pending == 0


async def test_a_fast_run_redraws_the_tables_once_a_second_and_loses_nothing(tmp_path: Path) -> None:
    def cases(start: int, count: int) -> list[ev.Event]:
        return [ev.CaseFinished(at=T0, run_id="fast", case_id=f"case-{i:04d}", iteration=0, score=80.0, passed=True)
                for i in range(start, start + count)]

    # no timer of its own: the test calls the refresh
    app = emitting_app(tmp_path, [], refresh_rate=0.001)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        table = screen.query_one("#cases", CaseTable)
        bar = screen.query_one("#progress", ProgressBar)
        for event in [ev.RunStarted(at=T0, run_id="fast", cases=1000, iterations=1), *cases(0, 300)]:
            app.bridge(event)
        app.flush_events()  # the first frame draws everything
        assert (table.row_count, bar.progress) == (300, 300)
        await pilot.pause()
        for event in cases(300, 300):
            app.bridge(event)
        # within the second of the last full draw, however long a loaded machine took to
        # draw it: a busy frame then redraws progress only
        app._full_at = time.monotonic()
        app.flush_events()
        assert (table.row_count, bar.progress) == (300, 600)
        assert "600/1000 done" in str(screen.query_one("#status").render())
        app.flush_events()  # the flow stopped: the case list catches up at once
        assert (table.row_count, bar.progress) == (600, 600)
        assert table.row("case-0599") == ["case-0599", "1", "80.0", "1/1", "1", "0", "0"]

        # the list grew under its scrollbar (no layout pass): the thumb shrank, the end is reachable
        assert table.vertical_scrollbar.window_virtual_size == 601
        await pilot.pause()
        table.focus()
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor == 599
        assert table.scroll_offset.y == table.max_scroll_y == 600 + 1 - table.scrollable_content_region.height


def test_the_log_says_the_gain_on_seen_and_held_out_cases_apart() -> None:
    state = DashboardState()
    state.apply(ev.CandidateDecided(cycle_id="c", round=1, version="1.0.1", accepted=False,
                                    delta=4.0, seen_delta=9.0, held_out_delta=-3.0,
                                    reason="overfitting"))
    text = " ".join(str(line) for line in state.take_changes().log)
    assert "seen +9.0 / held-out -3.0, gap 12.0" in text


async def test_a_rate_limited_provider_is_shown_in_the_status_and_the_log(tmp_path: Path) -> None:
    """Adaptive concurrency (issue 17): the status line says how many calls the provider now
    gets, and the log says when it was cut."""
    events = [*synthetic_events(),
              ev.ConcurrencyChanged(at=T0 + 30, provider="openai", limit=8, ceiling=32,
                                    rate_limited=3),
              ev.ConcurrencyChanged(at=T0 + 31, provider="openai", limit=4, ceiling=32,
                                    rate_limited=9)]
    app = emitting_app(tmp_path, events)
    async with app.run_test(size=(160, 24)) as pilot:
        await _settle(pilot, app)
        status = str(app.screen.query_one("#status").render())
        assert "openai 4/32 in flight (9 x 429)" in status
        log = "".join(line.text for line in app.screen.query_one("#log", RichLog).lines)
        assert "openai is rate limiting: 4 of 32 calls in flight (9 rate-limited" in log


def test_the_log_says_when_a_batch_job_starts_and_ends_not_each_poll() -> None:
    state = DashboardState()
    for e in (ev.BatchProgress(model="openai:m", job_id="b1", state="submitted", total=40),
              ev.BatchProgress(model="openai:m", job_id="b1", state="in_progress", total=40),
              ev.BatchProgress(model="openai:m", job_id="b1", state="in_progress", total=40,
                               completed=20),
              ev.BatchProgress(model="openai:m", job_id="b1", state="failed", done=True,
                               total=40, note="the batch job b1 ended failed")):
        state.apply(e)
    log = [str(line) for line in state.take_changes().log]
    assert len(log) == 2
    assert "openai:m batch b1 submitted (40 calls)" in log[0]
    assert "b1 failed 0/40 answered: the batch job b1 ended failed" in log[1]


async def test_the_finished_dashboard_shows_a_long_stop_reason_whole(tmp_path: Path) -> None:
    reason = ("max_rounds reached (3); 1.0.2, the best candidate, was not confirmed: head stays "
              "at 1.0.0 (to use it anyway: cycle rollback support-reply --to 1.0.2)")
    events = [*synthetic_events(), ev.CycleFinished(at=T0 + 50, cycle_id="c-test", reason=reason,
                                                    final_version="1.0.0", score=72.5)]
    app = emitting_app(tmp_path, events, hold=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        await pilot.pause(0.1)
        status = app.screen.query_one("#status")
        assert status.size.height >= 3  # wrapped over lines, not cut at 80 columns
        shown = " ".join(" ".join(str(s.text) for s in status.render_line(y)._segments).strip()
                         for y in range(status.size.height))
        assert "--to 1.0.2)" in shown


async def test_the_dashboard_says_how_far_the_judge_agrees_with_people(tmp_path: Path) -> None:
    note = "Judge openai:gpt-4o cycle-judge@1.0.0, against 50 human labels: quality kappa 0.71"
    events = [ev.CycleStarted(at=T0, cycle_id="c-test", prompt_id="support-reply",
                              version="1.0.0", judge_note=note)]
    app = emitting_app(tmp_path, events)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot, app)
        log = "".join(line.text for line in app.screen.query_one("#log", RichLog).lines)
        assert "quality kappa 0.71" in log


def _rows(table: DataTable) -> list[list[str]]:
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_a_population_round_shows_its_candidates_and_the_frontier(tmp_path: Path) -> None:
    """Each candidate of the round with its parent, screen gain and fate, beside the
    frontier; as the events come: the verdict on the one evaluated in full, the frontier
    it changes, then the next round's candidates, a merge with both its parents."""
    app = emitting_app(tmp_path, population_events())
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        screen = app.screen
        assert screen.query_one("#population").display
        candidates = screen.query_one("#candidates", DataTable)
        front = screen.query_one("#frontier", DataTable)
        assert candidates.border_title == "Candidates of round 2"
        assert _rows(candidates) == [["1", "1.0.4", "1.0.1", "+6.0", "full"],
                                     ["2", "1.0.5", "1.0.0", "+1.5", "ends"],
                                     ["3", "1.0.6", "1.0.1", "-1.0", "ends"]]
        assert _rows(front) == [["1.0.1", "3 cases"], ["1.0.0", "1 case"]]

        cid, t = "c-test", T0 + 40
        for event in (
            ev.CandidateDecided(at=t, cycle_id=cid, round=2, version="1.0.4", accepted=False,
                                delta=-1.5, reason="not significant"),
            ev.FrontierChanged(at=t, cycle_id=cid, round=2,
                               versions={"1.0.1": 3, "1.0.4": 1, "1.0.0": 1}),
        ):
            app.bus.emit(event)
        await _settle(pilot, app)
        assert _rows(candidates)[0] == ["1", "1.0.4", "1.0.1", "+6.0", "rejected"]
        assert _rows(front) == [["1.0.1", "3 cases"], ["1.0.4", "1 case"], ["1.0.0", "1 case"]]

        # round 3: its own candidates, as they are proposed, built and screened
        app.bus.emit(ev.SuggestionsProposed(at=t + 1, cycle_id=cid, round=3, slot=0,
                                            parent="1.0.1", suggestions=[{}]))
        app.bus.emit(ev.SuggestionsProposed(at=t + 1, cycle_id=cid, round=3, slot=1,
                                            parent="1.0.1", suggestions=[{}]))
        await _settle(pilot, app)
        assert candidates.border_title == "Candidates of round 3"
        assert _rows(candidates) == [["1", "…", "1.0.1", "…", "…"], ["2", "…", "1.0.1", "…", "…"]]
        app.bus.emit(ev.VersionCreated(at=t + 2, prompt_id="support-reply", version="1.0.7",
                                       parent="1.0.1", cycle_id=cid, round=3, slot=1))
        app.bus.emit(ev.CandidateScreened(at=t + 3, cycle_id=cid, round=3, slot=1,
                                          version="1.0.7", parent="1.0.1", second_parent="1.0.4",
                                          run_id=f"{cid}-r3-s1", gain=3.5, cases=8, kept=True))
        await _settle(pilot, app)
        # the round's screens are told once all its candidates were built: the first
        # candidate came to nothing
        assert _rows(candidates) == [["1", "-", "1.0.1", "-", "none"],
                                     ["2", "1.0.7", "1.0.1 + 1.0.4", "+3.5", "full"]]


async def test_a_chain_has_no_population_panel(tmp_path: Path) -> None:
    app = emitting_app(tmp_path, synthetic_events())
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot, app)
        assert not app.screen.query_one("#population").display


def test_a_resumed_run_starts_at_what_it_had_judged() -> None:
    state = DashboardState()
    state.apply(ev.RunStarted(at=T0, run_id="r", cases=3, iterations=3, total=9, done=5))
    assert (state.total, state.done) == (9, 5)
    state.apply(ev.CaseFinished(at=T0 + 1, run_id="r", case_id="c1", iteration=2, score=80.0,
                                passed=True))
    assert state.done == 6
