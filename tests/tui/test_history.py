"""The History screen on a real store: marks, diffs, rollback after confirmation."""

from __future__ import annotations

from cycle.store import Store
from cycle.tui.app import CycleApp
from cycle.tui.screens.confirm import ConfirmScreen
from cycle.tui.screens.history import HistoryScreen
from cycle.tui.widgets.diff_view import DiffView
from tests.conftest import AUTHOR


def _diff_text(app: CycleApp) -> str:
    return str(app.screen.query_one("#version-diff", DiffView).render())


async def test_versions_are_listed_newest_first_with_labels(history_store: Store) -> None:
    app = CycleApp(store=history_store, prompt_id="support-reply")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        table = screen.query_one("#versions")
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        assert [r[1] for r in rows] == ["1.0.2", "1.0.1", "1.0.0"]
        assert str(rows[0][2]) == "head" and str(rows[2][2]) == "production"
        # the highlighted (newest) version is shown against its parent
        assert "+Answer politely and briefly." in _diff_text(app)


async def test_mark_two_versions_and_diff_them(history_store: Store) -> None:
    app = CycleApp(store=history_store, prompt_id="support-reply")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("d")  # nothing marked yet: a warning, no diff change
        await pilot.press("a", "down", "down", "b", "d")
        await pilot.pause()
        text = _diff_text(app)
        assert "--- 1.0.2/system" in text and "+++ 1.0.0/system" in text
        assert "-Always cite the order number." in text


async def test_rollback_moves_head_after_confirmation(history_store: Store) -> None:
    app = CycleApp(store=history_store, prompt_id="support-reply")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "R")  # to 1.0.0
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")  # changed my mind: nothing moves
        await pilot.pause()
        assert history_store.labels("support-reply")["head"] == "1.0.2"
        await pilot.press("R")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert history_store.labels("support-reply")["head"] == "1.0.0"
        move = history_store.label_moves("support-reply", label="head", limit=1)[0]
        assert (move.action, move.from_version, move.to_version, move.who) == ("rollback", "1.0.2", "1.0.0", AUTHOR)
        # the table shows the move, and every version is still there
        table = app.screen.query_one("#versions")
        assert [str(table.get_row_at(i)[2]) for i in range(3)] == ["", "", "head, prod"]


async def test_each_version_shows_who_stored_it(history_store: Store) -> None:
    """A column from 100 columns on; at 80 the highlighted version's heading says it."""
    app = CycleApp(store=history_store, prompt_id="support-reply")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#versions")
        assert [str(table.get_row_at(i)[5]) for i in range(3)] == [
            "cycle (alice)", "cycle (alice)", "alice"]
    app = CycleApp(store=history_store, prompt_id="support-reply")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#versions")
        assert "author" not in [str(c.label) for c in table.columns.values()]
        await pilot.press("down", "down")
        await pilot.pause()
        assert "by alice" in str(app.screen.query_one("#version-meta").render())
        await pilot.resize_terminal(120, 40)  # wider: the column comes, the cursor stays
        await pilot.pause()
        assert "author" in [str(c.label) for c in table.columns.values()]
        assert app.screen.selected_version.version == "1.0.0"


async def test_a_protected_head_refuses_the_rollback_and_says_why(history_store: Store) -> None:
    history_store.protections.protect("head", prompt_id="support-reply", allowed=("alice",),
                                      by="alice")
    app = CycleApp(store=history_store, prompt_id="support-reply")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "R")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert history_store.labels("support-reply")["head"] == "1.0.2"  # not moved
        assert isinstance(app.screen, HistoryScreen)  # the screen goes on
        (notice,) = [n for n in app._notifications if n.severity == "error"]
        assert f"{AUTHOR} may not move 'head' of support-reply" in notice.message
        assert "Only alice may move it" in notice.message and "--force" in notice.message


async def test_switching_prompt_lists_its_versions(history_store: Store) -> None:
    app = CycleApp(store=history_store)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        prompts = app.screen.query_one("#prompts")
        prompts.focus()
        ids = [str(prompts.get_row_at(i)[0]) for i in range(prompts.row_count)]
        await pilot.press(*(["down"] * ids.index("greeter")))
        await pilot.pause()
        assert app.screen.prompt_id == "greeter"
        assert app.screen.query_one("#versions").row_count == 1


async def test_help_lists_the_screen_keys(history_store: Store) -> None:
    app = CycleApp(store=history_store)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HistoryScreen)


async def test_cycles_own_prompts_stay_out_of_the_list(history_store: Store) -> None:
    from cycle.records import Prompt

    history_store.save_version(Prompt(id="cycle-improver", system="Propose edits."))
    app = CycleApp(store=history_store)  # no prompt asked for: the first of the user's
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#prompts")
        ids = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert ids == ["greeter", "support-reply"]
    app = CycleApp(store=history_store, prompt_id="cycle-improver")  # by name: shown
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#prompts")
        assert "cycle-improver" in [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


def test_tui_opens_on_the_configs_prompt_else_the_last_used(history_store: Store, tmp_path,
                                                            monkeypatch) -> None:
    from cycle.cli.tui import config_prompt_id
    from cycle.records import Prompt

    # the newest version is greeter's; a run of support-reply after it makes that the last used
    assert history_store.last_used_prompt() == "greeter"
    history_store.save_version(Prompt(id="cycle-improver", system="Propose edits."))
    assert history_store.last_used_prompt() == "greeter"  # cycle's own prompt never counts
    history_store.runs.create(run_id="run-x", prompt_id="support-reply", version="1.0.2")
    assert history_store.last_used_prompt() == "support-reply"

    folder = tmp_path / "project"
    (folder / "prompts").mkdir(parents=True)
    (folder / "prompts" / "p.yaml").write_text("id: greeter\nsystem: Say hello.\n")
    assert config_prompt_id(folder) is None  # no cycle.yaml
    (folder / "cycle.yaml").write_text("prompt: prompts/p.yaml\n")
    assert config_prompt_id(folder) == "greeter"
    (folder / "cycle.yaml").write_text("prompt: store:support-reply@production\n")
    assert config_prompt_id(folder) == "support-reply"
    (folder / "cycle.yaml").write_text("prompt: [broken\n")
    assert config_prompt_id(folder) is None  # browsing works whatever the config says


async def test_text_from_outside_is_shown_literally_never_read_as_markup(history_store: Store) -> None:
    """A version message (an improver's, say) with Rich markup in it: ``[/b]`` would stop
    the app with a markup error, ``[link=...]`` make a link nobody wrote."""
    from cycle.records import Prompt

    head = history_store.resolve("support-reply")
    history_store.save_version(
        Prompt(**{**head.prompt.model_dump(), "system": head.prompt.system + " More."}),
        source="improver", message="[/b] closes nothing [link=https://evil.example]here[/link]")
    app = CycleApp(store=history_store, prompt_id="support-reply")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#versions")
        message = table.get_row_at(0)[6]
        assert str(message) == "[/b] closes nothing [link=https://evil.example]here[/link]"
        assert not any(span.style and "link" in str(span.style) for span in message.spans)


async def test_marking_a_and_b_on_one_row_is_refused_with_a_hint(history_store: Store) -> None:
    app = CycleApp(store=history_store, prompt_id="support-reply")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("a", "b")  # the same row: a diff of a version with itself
        await pilot.pause()
        screen = app.screen
        assert screen.marks == {"a": "1.0.2", "b": None}
        assert any("marked A already" in str(n.message) for n in app._notifications)


async def test_the_history_screen_on_a_team_store(postgres) -> None:
    """The same screen on PostgreSQL: versions, a rollback through the screen, and a header
    that names the store without its password."""
    from cycle.testing.postgres import PASSWORD
    from cycle.tui.widgets.header import HeaderInfo
    from tests.tui.conftest import fill_history

    url = postgres.schema_url()
    fill_history(Store.open(url)).close()
    app = CycleApp(store_path=url, prompt_id="support-reply")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#versions")
        assert [table.get_row_at(i)[1] for i in range(table.row_count)] == ["1.0.2", "1.0.1",
                                                                           "1.0.0"]
        await pilot.press("down", "down", "R")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.info, HeaderInfo) and PASSWORD not in app.info.store
        assert "cycle:***@" in app.info.store
    with Store.open(url) as store:
        assert store.labels("support-reply")["head"] == "1.0.0"


async def test_a_merged_version_names_both_parents(history_store: Store) -> None:
    """A merge (improve.merge) is made from two versions: its heading says both."""
    base = history_store.resolve("support-reply@1.0.0")
    merged = history_store.save_version(
        base.prompt.model_copy(update={"system": base.prompt.system + " Merged."}),
        source="improver", parent="1.0.2", second_parent="1.0.1", move_head=False)
    assert (merged.parent, merged.second_parent) == ("1.0.2", "1.0.1")
    app = CycleApp(store=history_store, prompt_id="support-reply")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()  # the newest version first, highlighted
        meta = str(app.screen.query_one("#version-meta").render())
        assert f"v{merged.version}" in meta and "merge of 1.0.2 and 1.0.1" in meta
