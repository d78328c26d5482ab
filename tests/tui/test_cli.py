"""``cycle tui``: its errors (the screen itself is tested through the app)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from cycle.store import Store


def test_tui_without_a_store_says_where_it_looked(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    result = CliRunner().invoke(cli, ["--store", str(missing), "tui"])
    assert result.exit_code != 0
    assert f"no cycle store at {missing}" in result.output
    assert not missing.exists()  # browsing never creates a store


def test_tui_on_an_unknown_prompt_lists_the_known_ones(history_store: Store) -> None:
    result = CliRunner().invoke(cli, ["--store", str(history_store.path), "tui", "nosuch"])
    assert result.exit_code == 2
    assert "no prompt 'nosuch'" in result.output and "greeter" in result.output


def test_tui_without_a_terminal_says_so_instead_of_waiting(history_store: Store) -> None:
    """Run from a script (stdin not a terminal), the app wrote its screen into the pipe and
    waited for keys that never came: the command hung."""
    result = CliRunner().invoke(cli, ["--store", str(history_store.path), "tui", "greeter"])
    assert result.exit_code == 2
    assert "no terminal for the TUI" in result.output and "cycle history ID" in result.output


def test_tui_on_a_postgresql_store_does_not_show_its_password(postgres, monkeypatch) -> None:
    """The History screen's header names the store: it named --store as given, the
    password of a team store's URL with it (cycle improve's header masked it)."""
    import asyncio
    from types import SimpleNamespace

    from cycle.testing.postgres import PASSWORD
    from cycle.tui.app import CycleApp
    from cycle.tui.widgets.header import CycleHeader
    from tests.tui.conftest import fill_history

    url = postgres.schema_url()
    assert PASSWORD in url
    fill_history(Store.open(url)).close()
    shown: list[str] = []

    def run(app: CycleApp) -> None:  # the real app, driven headless instead of on a terminal
        async def look() -> None:
            async with app.run_test(size=(160, 30)) as pilot:
                await pilot.pause()
                shown.append(str(app.screen.query_one(CycleHeader).query_one("#title").render()))
        asyncio.run(look())

    monkeypatch.setattr(CycleApp, "run", run)
    terminal = SimpleNamespace(isatty=lambda: True)  # CliRunner's streams are no terminal
    monkeypatch.setattr("cycle.cli.tui.sys", SimpleNamespace(stdin=terminal, __stdout__=terminal))
    result = CliRunner().invoke(cli, ["--store", url, "tui", "greeter"])
    assert result.exit_code == 0, result.output
    (header,) = shown
    assert "store postgresql://" in header and ":***@" in header
    assert PASSWORD not in header
