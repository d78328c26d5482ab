"""The Runs screen: every stored run, an eval file run against an endpoint included (it has
no prompt, so the History screen cannot reach it); its cases; a case's iterations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.store import Store
from cycle.testing.endpoint import AgentEndpoint
from cycle.tui.app import CycleApp
from cycle.tui.screens.case import CaseScreen
from cycle.tui.screens.history import HistoryScreen
from cycle.tui.screens.runs import RunsScreen

EVALS = [
    {"id": "weather-tokyo", "input": {"message": "Weather in Tokyo?"},
     "expect": {"responseContains": ["Tokyo"]}},
    {"id": "weather-joke", "input": {"message": "Tell me a joke"},
     "expect": {"responseContains": ["Tokyo"]}},
]


@pytest.fixture
def endpoint_store(tmp_path: Path, monkeypatch) -> Path:
    """A store holding only an eval file's run against a loopback endpoint."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "weather.golden.json").write_text(json.dumps(EVALS))
    with AgentEndpoint(lambda body: {"response": f"Sunny: {body['message']}", "toolCalls": []}) as e:
        r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", "--eval",
                                     "evals/weather.golden.json", "--agent-endpoint", e.url])
        url = e.url
    assert r.exit_code == 1, r.output
    (tmp_path / "url").write_text(url)
    return tmp_path / "s.db"


def cells(table, row: int) -> list[str]:
    return [str(c) for c in table.get_row_at(row)]


async def test_a_store_of_endpoint_runs_opens_on_the_runs_and_reaches_a_case(endpoint_store):
    url = (endpoint_store.parent / "url").read_text()
    with Store.open(endpoint_store) as store:
        app = CycleApp(store=store)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            assert isinstance(app.screen, RunsScreen)
            runs = app.screen.query_one("#runs")
            assert runs.row_count == 1
            _, rate, _, subject, origin, _ = cells(runs, 0)  # the figures first
            assert subject == url and origin == "eval file" and rate == "50%"
            await app.workers.wait_for_complete()
            await pilot.pause()
            cases = app.screen.query_one("#run-cases")
            assert [cells(cases, i)[:2] for i in range(cases.row_count)] == [
                ["weather-tokyo", "passed"], ["weather-joke", "failed"]]
            await pilot.press("enter")  # into the cases
            await pilot.press("down", "enter")  # the failed one
            await pilot.pause()
            assert isinstance(app.screen, CaseScreen) and app.screen.case_id == "weather-joke"
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert app.screen.results and app.screen.results[0].output == "Sunny: Tell me a joke"
            await pilot.press("escape")
            assert isinstance(app.screen, RunsScreen)


async def test_history_reaches_the_runs_and_back(history_store: Store, endpoint_store) -> None:
    with Store.open(endpoint_store) as other:
        run = other.runs.recent(limit=1)[0]
    app = CycleApp(store=history_store, prompt_id="support-reply")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, HistoryScreen)
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, RunsScreen)
        assert "no run yet" in str(app.screen.query_one("#runs-summary").render())
        assert run.id  # (the other store's run is not in this one)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HistoryScreen)


async def test_an_endpoint_url_a_store_kept_with_its_credentials_is_shown_without_them(
        endpoint_store) -> None:
    """Stores written before cycle dropped an HTTP agent's credentials from its URL hold
    them in the run's agent: the Runs screen names it without them (safe_url)."""
    with Store.open(endpoint_store) as store, store.transaction() as db:
        db.execute("update runs set agent_model = replace(agent_model, 'http://', ?) || ?",
                   ["http://agentuser:agent-pass-7a7a@", "?api-key=qk-1234567890"])
    with Store.open(endpoint_store) as store:
        app = CycleApp(store=store)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            subject = cells(app.screen.query_one("#runs"), 0)[3]
            await app.workers.wait_for_complete()
            await pilot.pause()
    assert subject.startswith("http://127.0.0.1:") and subject.endswith("/chat?api-key=***")
    assert "agent-pass-7a7a" not in subject and "agentuser" not in subject


async def test_a_store_written_before_masking_shows_no_key_of_the_environment(
        endpoint_store, monkeypatch) -> None:
    """Stores written before cycle masked keys (in answers, errors, an endpoint's URL)
    may hold them raw: the screens show what they read with the environment's keys
    masked, as a defence in depth (the store is not rewritten)."""
    import io

    from rich.console import Console

    key = "agent-token-9f8e7d6c5b"
    monkeypatch.setenv("AGENT_TOKEN", key)
    with Store.open(endpoint_store) as store, store.transaction() as db:
        # what an older cycle wrote: the endpoint's URL with its token, answers and errors
        # quoting it, a judge's reasoning repeating it
        db.execute("update runs set agent_model = agent_model || ?", [f"?token={key}"])
        db.execute("update results set output = output || ?, error = ?, trace = replace(trace, "
                   "'Sunny', ?) where case_id = 'weather-joke'",
                   [f" (token {key})", f"endpoint refused {key}", key])
        db.execute("update verdicts set reasoning = ?", [f"the answer quotes {key}"])
    with Store.open(endpoint_store) as store:
        app = CycleApp(store=store)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            subject = cells(app.screen.query_one("#runs"), 0)[3]
            assert subject.endswith("?token=***") and key not in subject
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.press("enter")  # into the cases
            await pilot.press("down", "enter")  # the one that quotes it
            await pilot.pause()
            assert isinstance(app.screen, CaseScreen) and app.screen.case_id == "weather-joke"
            await app.workers.wait_for_complete()
            await pilot.pause()
            console = Console(width=200, file=io.StringIO(), record=True)
            detail = app.screen.query_one("#case-detail")
            console.print(getattr(detail.visual, "_renderable", detail.visual))
            shown = console.export_text()
            await pilot.press("escape")
    assert "endpoint refused ***" in shown and "(token ***)" in shown
    assert "the answer quotes ***" in shown
    assert key not in shown


class _HeldRead:
    """Holds a store read of a worker thread (``RunLog.tally_rows`` or ``load_results``)
    until the test lets it go: it says when the read began, which store it read from, and
    what it read or raised."""

    def __init__(self, monkeypatch, method: str) -> None:
        import threading

        from cycle.store.runs import RunLog

        self.began, self.go, self.done = threading.Event(), threading.Event(), threading.Event()
        self.stores: list[Store] = []
        self.read: object = None
        self.error: BaseException | None = None
        original = getattr(RunLog, method)
        held = self

        def hold(log, *args, **kwargs):
            if threading.current_thread() is threading.main_thread():
                return original(log, *args, **kwargs)
            held.stores.append(log.store)
            held.began.set()
            held.go.wait(timeout=30)
            try:
                held.read = list(original(log, *args, **kwargs))
                return held.read
            except BaseException as e:
                held.error = e
                raise
            finally:
                held.done.set()

        monkeypatch.setattr(RunLog, method, hold)


async def _quit_while_reading(app: CycleApp, held: _HeldRead, *keys: str) -> None:
    import asyncio

    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        if keys:  # to the screen whose read is held (once the Runs screen has its run)
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.press(*keys)
        assert await asyncio.to_thread(held.began.wait, 10), "the screen read nothing in a thread"
        app.exit()  # the app quits while the worker is inside its read


@pytest.mark.parametrize("screen", ["runs", "case"])
async def test_quitting_while_a_screen_reads_in_a_thread_leaves_the_worker_a_store_to_read(
        endpoint_store, monkeypatch, screen) -> None:
    """`cycle tui` closes its store as soon as the app returns, and Textual does not wait
    for a thread worker still reading (the Runs screen's run, the Case screen's
    iterations): a SQLite connection closed while another thread is inside one of its
    statements crashed Python (a segfault in tally_rows). The workers read through a
    connection of their own, so closing the app's store cannot touch theirs."""
    held = _HeldRead(monkeypatch, "tally_rows" if screen == "runs" else "load_results")
    store = Store.open(endpoint_store)
    app = CycleApp(store=store)
    await _quit_while_reading(app, held, *(() if screen == "runs" else ("enter", "enter")))
    store.close()  # as `cycle tui` does once the app has returned
    held.go.set()
    assert held.done.wait(timeout=10)
    assert held.error is None, held.error  # was: Cannot operate on a closed database (or SIGSEGV)
    assert held.read and all(s is not store for s in held.stores)


async def test_leaving_a_case_before_its_iterations_are_read_does_not_stop_the_app(
        endpoint_store, monkeypatch) -> None:
    """The Case screen left (escape) while its worker still reads: what it read is not
    shown on a screen that is gone (an error there stopped the app)."""
    import asyncio

    held = _HeldRead(monkeypatch, "load_results")
    with Store.open(endpoint_store) as store:
        app = CycleApp(store=store)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.press("enter", "enter")
            assert await asyncio.to_thread(held.began.wait, 10)
            case = app.screen
            assert isinstance(case, CaseScreen)
            await pilot.press("escape")
            held.go.set()
            assert await asyncio.to_thread(held.done.wait, 10)
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert app.is_running and isinstance(app.screen, RunsScreen)
            assert case.results is None and held.read
