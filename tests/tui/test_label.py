"""The Label screen (issue 35): a person scores stored outputs criterion by criterion;
the judge's score stays hidden until they have; each label is stored at once and is what
cycle judge agreement measures. Driven through Pilot on a real offline run."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from textual.widgets import DataTable, Input, Static

from cycle.assemble import load_config
from cycle.assemble.suite import build_suite
from cycle.cli import cli
from cycle.judge.calibration import to_label
from cycle.store import Store
from cycle.tui.app import LabelApp

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
RUN = "run-label-demo"


def stored_run(folder: Path) -> Path:
    """An offline run of the quickstart under a fixed id (screenshots show it)."""
    for name in ("cases", "prompts", "cycle.yaml"):
        src = QUICKSTART / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, folder / name)
    db = folder / "cycle.db"
    loaded = load_config(folder / "cycle.yaml")

    async def run() -> None:
        with Store.open(db) as store:
            suite = build_suite(loaded, store=store)
            try:
                await suite.runner(store=store).run(run_id=RUN, meta=suite.meta())
            finally:
                await suite.aclose()

    asyncio.run(run())
    return db


@pytest.fixture(scope="module")
def run_db(tmp_path_factory) -> Path:
    return stored_run(tmp_path_factory.mktemp("label"))


@pytest.fixture
def store(run_db: Path, tmp_path: Path):
    db = tmp_path / "cycle.db"
    shutil.copy(run_db, db)
    with Store.open(db) as s:
        yield s


def app_for(store: Store, n: int = 4) -> LabelApp:
    outputs, criteria = to_label(store, RUN, n)
    return LabelApp(store, RUN, outputs, criteria, labeler="ann")


def cells(app: LabelApp) -> dict[str, tuple[str, str]]:
    table = app.screen.query_one("#label-criteria", DataTable)
    return {str(table.get_row_at(i)[0]): (str(table.get_row_at(i)[1]), str(table.get_row_at(i)[2]))
            for i in range(table.row_count)}


async def test_a_person_labels_and_the_judge_shows_only_after(store: Store) -> None:
    app = app_for(store)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert set(cells(app)) == {"accuracy", "tone", "actionable"}  # the LLM criteria
        assert all(judge == "hidden" for _, judge in cells(app).values())
        summary = str(app.screen.query_one("#label-summary", Static).render())
        assert summary.startswith("Output 1 of 4 · case ") and "0 of 12 labelled by ann" in summary
        await pilot.press("p")  # the first criterion passes; the cursor moves on
        first = app.screen.outputs[0]
        shown = cells(app)
        assert shown["accuracy"][0] == "pass"
        assert shown["accuracy"][1] == f"{first['verdicts']['accuracy']['score']:.0f}"
        assert shown["actionable"][1] == shown["tone"][1] == "hidden"
        await pilot.press("enter")  # a score for the second (the criteria are sorted)
        assert app.screen.query_one("#label-entry", Input).display
        await pilot.press("1", "0", "1", "enter")  # out of range: refused, asked again
        assert app.screen.query_one("#label-entry", Input).display
        entry = app.screen.query_one("#label-entry", Input)
        entry.value = ""
        await pilot.press("3", "5", "enter")
        assert cells(app)["actionable"][0] == "35" and not entry.display
        assert cells(app)["actionable"][1] != "hidden" and cells(app)["tone"][1] == "hidden"
        await pilot.press("up", "n")  # a note on the first
        await pilot.press(*"too terse", "enter")
        await pilot.press("right_square_bracket")
        assert "Output 2 of 4" in str(app.screen.query_one("#label-summary", Static).render())
        assert all(judge == "hidden" for _, judge in cells(app).values())
        await pilot.press("f", "escape")
    stored = {(x.label.case, x.label.iteration, x.label.criterion): x.label
              for x in store.human_labels.of_run(RUN)}
    by_first = {c: stored[(first["case"], first["iteration"], c)]
                for c in ("accuracy", "actionable")}
    assert by_first["accuracy"].passed is True and by_first["accuracy"].score is None
    assert by_first["accuracy"].note == "too terse" and by_first["accuracy"].labeler == "ann"
    assert by_first["actionable"].score == 35.0 and by_first["actionable"].passed is False
    assert len(stored) == 3  # two on the first output, one on the second


async def test_labels_given_earlier_are_shown_and_replaced_not_added(store: Store) -> None:
    app = app_for(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("f")
    app = app_for(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert cells(app)["accuracy"][0] == "fail"  # kept from before, judge now shown
        assert cells(app)["accuracy"][1] != "hidden"
        await pilot.press("p")
    labels = store.human_labels.of_run(RUN)
    assert len(labels) == 1 and labels[0].label.passed is True


def test_the_command_refuses_without_a_terminal(run_db: Path) -> None:
    r = CliRunner().invoke(cli, ["--store", str(run_db), "judge", "label", RUN])
    assert r.exit_code == 2 and "cycle judge sample" in r.output and "Traceback" not in r.output


async def test_an_output_a_store_kept_with_the_environments_key_is_shown_masked(
        store: Store, monkeypatch) -> None:
    """A store written before cycle masked keys may hold one in an answer: the output to
    label is shown with the environment's keys masked (cycle.tui.widgets.masked)."""
    import io

    from rich.console import Console

    key = "sk-live-0a1b2c3d4e5f6a7b"
    monkeypatch.setenv("SUPPORT_DESK_TOKEN", key)
    with store.transaction() as db:
        db.execute("update results set output = output || ? where run_id = ?",
                   [f" (desk token {key})", RUN])
    app = app_for(store)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        answer = app.screen.query_one("#label-answer", Static)
        console = Console(width=200, file=io.StringIO(), record=True)
        console.print(getattr(answer.visual, "_renderable", answer.visual))
        shown = console.export_text()
        await pilot.press("escape")
    assert "(desk token ***)" in shown and key not in shown
