"""The Review screen, as the loop sees it: await reviewer.review(request)."""

from __future__ import annotations

from pathlib import Path

from cycle.events import EventBus
from cycle.improve.apply import apply_suggestions
from cycle.loop.review import Reviewer, request_prompt
from cycle.records import Prompt, ReviewRequest, Suggestion
from cycle.tui.app import CycleApp
from cycle.tui.screens.confirm import ConfirmScreen
from cycle.tui.screens.review import UNDECIDED_REASON, ReviewScreen
from cycle.tui.widgets.diff_view import DiffView
from tests.tui.conftest import review_request


def reviewing_app(tmp_path: Path, request: ReviewRequest | None = None) -> CycleApp:
    """An app whose 'cycle' asks for one review (``request``, by default conftest's) and
    returns the answer."""

    async def cycle(bus: EventBus, reviewer: Reviewer) -> list[Suggestion]:
        return await reviewer.review(request or review_request())

    return CycleApp(cycle=cycle, store_path=tmp_path / "cycle.db")


def decided(app: CycleApp) -> list[list[Suggestion]]:
    """The decisions the cycle received (it returns them as it ends)."""
    return [] if app.outcome is None else [app.outcome.result]


async def _until_decided(pilot) -> None:  # type: ignore[no-untyped-def]
    """Until the cycle has the decisions (the app sets its outcome), a second at most."""
    for _ in range(50):
        if pilot.app.outcome is not None:
            return
        await pilot.pause(0.02)


async def _approved(pilot, request: ReviewRequest) -> Prompt:  # type: ignore[no-untyped-def]
    """The prompt of ``request`` with its one suggestion approved at the keyboard (a, s)."""
    await pilot.press("a")
    await pilot.press("s")
    await _until_decided(pilot)
    assert pilot.app.outcome is not None
    (approved,) = pilot.app.outcome.result
    return apply_suggestions(request_prompt(request), [approved]).prompt


async def _wait_for_review(pilot) -> ReviewScreen:  # type: ignore[no-untyped-def]
    for _ in range(100):
        if isinstance(pilot.app.screen, ReviewScreen):
            await pilot.pause()  # let it mount
            return pilot.app.screen
        await pilot.pause(0.02)
    raise AssertionError("the Review screen did not open")


async def test_approve_reject_edit_then_submit(tmp_path: Path) -> None:
    app = reviewing_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _wait_for_review(pilot)
        # listed by priority; the diff shows the highlighted (high) suggestion
        table = screen.query_one("#suggestions")
        assert [str(table.get_row_at(i)[1]) for i in range(3)] == ["high", "medium", "low"]
        diff = str(screen.query_one("#diff", DiffView).render())
        assert "-Answer politely." in diff and "+Answer politely and cite the order number." in diff

        await pilot.press("a")  # approve "high", cursor moves on to "medium"
        await pilot.press("r")
        await pilot.pause()
        await pilot.press(*"promises are the lawyers' job", "enter")
        await pilot.pause()
        await pilot.press("e")  # edit "low"
        await pilot.pause()
        editor = app.screen.query_one("#editor")
        editor.text = '{"temperature": 0.1}'
        await pilot.press("ctrl+s")
        await pilot.pause()
        # the edit previews the edited value
        assert '+  "temperature": 0.1' in str(screen.query_one("#diff", DiffView).render())
        assert decided(app) == []  # nothing goes back to the loop before submit
        await pilot.press("s")
        await _until_decided(pilot)
    assert app.outcome is not None and app.outcome.status == "finished"
    by_id = {s.id: s for s in decided(app)[0]}
    assert [s.id for s in decided(app)[0]] == ["s-low", "s-high", "s-mid"]  # the request's order
    assert by_id["s-high"].decision == "approved"
    assert (by_id["s-mid"].decision, by_id["s-mid"].reason) == ("rejected", "promises are the lawyers' job")
    assert (by_id["s-low"].decision, by_id["s-low"].edited_value) == ("edited", '{"temperature": 0.1}')
    assert by_id["s-low"].value == '{"temperature": 0.1}'


async def test_approve_all_and_undecided_are_rejected_on_submit(tmp_path: Path) -> None:
    app = reviewing_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await _wait_for_review(pilot)
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("enter")  # no reason given: a default one goes to the improver
        await pilot.pause()
        await pilot.press("s")  # two undecided: asks first
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        await pilot.press("A", "s")  # approve the rest, submit
        await _until_decided(pilot)
    decisions = {s.id: (s.decision, s.reason) for s in decided(app)[0]}
    assert decisions == {
        "s-high": ("rejected", "rejected by the reviewer"),
        "s-mid": ("approved", ""),
        "s-low": ("approved", ""),
    }


async def test_submit_with_undecided_rejects_them(tmp_path: Path) -> None:
    app = reviewing_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await _wait_for_review(pilot)
        await pilot.press("a", "s")
        await pilot.pause()
        await pilot.press("y")
        await _until_decided(pilot)
    decisions = {s.id: (s.decision, s.reason) for s in decided(app)[0]}
    assert decisions["s-high"] == ("approved", "")
    assert decisions["s-mid"] == decisions["s-low"] == ("rejected", UNDECIDED_REASON)


async def test_the_text_a_suggestion_replaces_can_be_edited(tmp_path: Path) -> None:
    """The improver quoted the prompt inexactly ("Answer politely." where the prompt says
    something else): the reviewer points the edit at the right text, the diff shows it."""
    app = reviewing_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _wait_for_review(pilot)
        await pilot.press("t")  # on "high": the text it replaces
        await pilot.pause()
        editor = app.screen.query_one("#editor")
        assert editor.text == "Answer politely."
        editor.text = "You are a support agent"
        await pilot.press("ctrl+s")
        await pilot.pause()
        diff = str(screen.query_one("#diff", DiffView).render())
        assert "-You are a support agent" in diff
        await pilot.press("A", "s")
        await _until_decided(pilot)
    high = next(s for s in decided(app)[0] if s.id == "s-high")
    assert (high.decision, high.current_value) == ("edited", "You are a support agent")
    assert high.value == "Answer politely and cite the order number."


async def test_the_whole_candidate_can_be_rewritten(tmp_path: Path) -> None:
    """w opens the candidate as the decisions leave it; the rewrite becomes a row whose diff
    is the whole candidate, follows later decisions, and reaches the loop applied last."""
    app = reviewing_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _wait_for_review(pilot)
        await pilot.press("a")  # approve "high": the candidate cites the order number
        await pilot.press("w")
        await pilot.pause()
        editor = app.screen.query_one("#editor")
        assert editor.text == "You are a support agent.\nAnswer politely and cite the order number."
        editor.text = "You are Acme's support agent.\nAnswer politely and cite the order number."
        await pilot.press("ctrl+s")
        await pilot.pause()
        table = screen.query_one("#suggestions")
        assert table.row_count == 4
        assert screen.selected is not None and screen.selected.id.startswith("rewrite-")
        diff = str(screen.query_one("#diff", DiffView).render())
        assert "+You are Acme's support agent." in diff and "-Answer politely." in diff
        # a later decision: the rewrite is laid over the new candidate
        table.move_cursor(row=1)  # "medium": append "Never promise a refund."
        await pilot.press("a")
        rewrite = next(s for s in screen.suggestions if s.id.startswith("rewrite-"))
        assert rewrite.current_value.endswith("Never promise a refund.")
        await pilot.press("r")  # on "low"
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("s")
        await _until_decided(pilot)
    out = decided(app)[0]
    assert out[-1].id.startswith("rewrite-") and out[-1].decision == "edited"
    final = apply_suggestions(request_prompt(review_request()), out).prompt
    assert final.system == "You are Acme's support agent.\nAnswer politely and cite the order number."


async def test_a_rewrite_can_be_dropped(tmp_path: Path) -> None:
    app = reviewing_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _wait_for_review(pilot)
        await pilot.press("w")
        await pilot.pause()
        app.screen.query_one("#editor").text = "Something else."
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert screen.query_one("#suggestions").row_count == 4
        await pilot.press("r")  # on the rewrite's row: drops it
        await pilot.pause()
        assert screen.query_one("#suggestions").row_count == 3
        assert not [s for s in screen.suggestions if s.id.startswith("rewrite-")]


async def test_at_80_columns_the_footer_shows_how_to_finish_and_help_the_rest(
        tmp_path: Path) -> None:
    from textual.widgets import Footer

    from cycle.tui.screens.help import HelpScreen

    app = reviewing_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _wait_for_review(pilot)
        keys = [k for k in screen.query_one(Footer).query("FooterKey") if k.region.width > 0]
        shown = " ".join(str(k.render()) for k in keys if k.region.right <= 80)
        for word in ("Submit", "Approve", "Reject", "Quit"):
            assert word in shown, shown
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        listed = str(app.screen._keys().columns[1]._cells)  # the rarer keys are in the help
        assert "Rewrite whole" in listed and "Edit replaced text" in listed


async def test_an_example_is_reviewed_with_its_source_case_and_its_turns(tmp_path: Path) -> None:
    """A proposed few-shot example shows the case it was drawn from, and its diff shows the
    example's input and output as the prompt would hold them; approved, it is applied."""
    import json

    from cycle.records import Example

    had = Example(input="Where is my parcel?", output="It arrives tomorrow.", source="late-3")
    request = review_request().model_copy(update={
        "current": {**review_request().current,
                    "examples": json.dumps([had.canonical()])},
        "suggestions": [Suggestion(
            id="s-example", type="example", priority="high", suggested_value="Hi Ann, sorry.",
            source_case="refund-1", example_input="Where is my refund?",
            reasoning="Its reference answer greets and apologises.")]})

    app = reviewing_app(tmp_path, request)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _wait_for_review(pilot)
        detail = str(screen.query_one("#detail").render())
        assert "example drawn from case refund-1" in detail
        diff = str(screen.query_one("#diff", DiffView).render())
        assert "+example 2  (from case refund-1)" in diff
        assert "+  input: Where is my refund?" in diff and "+  output: Hi Ann, sorry." in diff
        assert "-example 1" not in diff and "+example 1" not in diff  # the kept one is context
        prompt = await _approved(pilot, request)
    assert prompt.examples == (had, Example(input="Where is my refund?", output="Hi Ann, sorry.",
                                            source="refund-1"))


async def test_a_rubric_edit_is_reviewed_naming_its_criterion_with_the_rubric_diff(
        tmp_path: Path) -> None:
    """The judge prompt's rubric edit (cycle judge improve) names the criterion it edits,
    its diff shows the rubric before and after, and approved it is applied to that rubric."""
    import json

    rubric = "The reply ends with one concrete next step."
    rule = "A reply without the order number fails."
    request = review_request().model_copy(update={
        "prompt_id": "cycle-judge",
        "current": {**review_request().current,
                    "rubrics": json.dumps({"helpful": rubric, "tone": "Polite."})},
        "suggestions": [Suggestion(
            id="s-rubric", type="rubric", criterion="helpful", priority="high",
            suggested_value=rule, reasoning="People fail replies without it.")]})

    app = reviewing_app(tmp_path, request)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _wait_for_review(pilot)
        assert "high priority · rubric of 'helpful'" in str(screen.query_one("#detail").render())
        diff = str(screen.query_one("#diff", DiffView).render())
        assert f"-  {rubric}" in diff and f"+  {rubric} {rule}" in diff
        assert "-  Polite." not in diff and "+  Polite." not in diff  # context only
        prompt = await _approved(pilot, request)
    assert prompt.rubrics == {"helpful": f"{rubric} {rule}", "tone": "Polite."}
