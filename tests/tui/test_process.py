"""The cycle's child (cycle.tui.process): events, reviews, results and errors cross
the pipe; cancelling, the app dying and the child dying each end it cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from cycle import events as ev
from cycle.assemble import build_loop
from cycle.assemble.config import LoadedConfig
from cycle.errors import ConfigError, CycleError, RetriesExhaustedError
from cycle.events import EventBus
from cycle.loop.review import Reviewer
from cycle.records import ReviewRequest, Suggestion
from cycle.store import Store
from cycle.tui.process import CycleOutcome, CycleProcess
from tests.tui.conftest import review_request

HOSTS = ["process", "thread"] if sys.platform.startswith("linux") else ["thread"]


def never_asked(request: ReviewRequest, answer) -> None:  # type: ignore[no-untyped-def]
    raise AssertionError("no review was expected")


def run(cycle, host: str, emit=lambda e: None, ask=never_asked) -> CycleOutcome:  # type: ignore[no-untyped-def]
    """Start ``cycle`` in a child on ``host`` and relay it to the end, as the app does."""
    process = CycleProcess(cycle, host=host)
    process.start()
    return process.relay(emit, ask)


@pytest.mark.parametrize("host", HOSTS)
def test_events_and_the_result_cross_in_order(host: str) -> None:
    async def cycle(bus: EventBus, reviewer: Reviewer) -> tuple[int, int]:
        bus.emit(ev.RunStarted(run_id="r", cases=500))
        for i in range(500):
            bus.emit(ev.CaseFinished(run_id="r", case_id=f"c{i}", iteration=0, score=float(i % 100), passed=True))
            if i % 250 == 0:
                await asyncio.sleep(0.15)  # some batches go out while the cycle runs
        return os.getpid(), 500

    seen: list[ev.Event] = []
    outcome = run(cycle, host, emit=seen.append)

    assert outcome.status == "finished", outcome
    pid, n = outcome.result
    assert n == 500
    assert (pid != os.getpid()) == (host == "process")  # the cycle ran in its own process
    assert isinstance(seen[0], ev.RunStarted)
    assert [e.case_id for e in seen[1:]] == [f"c{i}" for i in range(500)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("host", HOSTS)
def test_a_review_is_asked_and_the_decisions_come_back(host: str) -> None:
    async def cycle(bus: EventBus, reviewer: Reviewer) -> list[Suggestion]:
        return await reviewer.review(review_request())

    asked: list[ReviewRequest] = []

    def ask(request: ReviewRequest, answer) -> None:  # type: ignore[no-untyped-def]
        asked.append(request)
        answer([s.model_copy(update={"decision": "approved"}) for s in request.suggestions])

    outcome = run(cycle, host, ask=ask)

    assert [r.cycle_id for r in asked] == ["c-test"]
    assert outcome.status == "finished"
    assert [(s.id, s.decision) for s in outcome.result] == [
        ("s-low", "approved"), ("s-high", "approved"), ("s-mid", "approved")]


@pytest.mark.parametrize("host", HOSTS)
def test_cancel_interrupts_a_waiting_cycle(host: str) -> None:
    async def cycle(bus: EventBus, reviewer: Reviewer) -> None:
        bus.emit(ev.RunStarted(run_id="r"))
        await asyncio.Event().wait()

    process = CycleProcess(cycle, host=host)
    process.start()

    def cancel_on_first(event: ev.Event) -> None:
        process.cancel()

    assert process.relay(cancel_on_first, never_asked).status == "interrupted"


@pytest.mark.parametrize("host", HOSTS)
def test_an_error_comes_back_with_its_class_details_and_where_it_was_raised(host: str) -> None:
    async def cycle(bus: EventBus, reviewer: Reviewer) -> None:
        raise RetriesExhaustedError("the judge failed 3 times", attempts=3)

    outcome = run(cycle, host)

    error = outcome.error
    assert outcome.status == "failed" and isinstance(error, RetriesExhaustedError)
    assert (str(error), error.attempts, error.exit_code) == ("the judge failed 3 times", 3, 3)
    assert "raised in the cycle's child" in error.__notes__[0]  # for --debug
    assert 'raise RetriesExhaustedError("the judge failed 3 times"' in error.__notes__[0]


def test_cycle_errors_survive_pickling_with_their_keyword_details() -> None:
    import pickle

    error = ConfigError("unknown key 'iteratons'", file="cycle.yaml", line=7, field="run.iteratons",
                        hint="Did you mean 'iterations'?")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is ConfigError
    assert (str(copy), copy.line, copy.field, copy.exit_code) == (str(error), 7, "run.iteratons", 2)


def test_an_error_that_cannot_be_pickled_still_comes_back_described() -> None:
    class Unpicklable(CycleError):
        exit_code = 3

    async def cycle(bus: EventBus, reviewer: Reviewer) -> None:
        error = Unpicklable("the provider went away")
        error.callback = lambda: None  # type: ignore[attr-defined]
        raise error

    outcome = run(cycle, HOSTS[0])

    assert outcome.status == "failed" and isinstance(outcome.error, CycleError)
    assert str(outcome.error) == "Unpicklable: the provider went away"
    assert outcome.error.exit_code == 3


@pytest.mark.skipif("process" not in HOSTS, reason="the cycle runs in a thread here")
def test_a_child_that_dies_is_reported_not_waited_for() -> None:
    async def cycle(bus: EventBus, reviewer: Reviewer) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    outcome = run(cycle, "process")

    assert outcome.status == "failed"
    assert "the cycle's process ended without a word (exit code -9)" in str(outcome.error)
    assert "--resume" in str(outcome.error)


@pytest.mark.skipif("process" not in HOSTS, reason="the cycle runs in a thread here")
def test_the_child_keeps_off_the_apps_terminal(capfd: pytest.CaptureFixture[str]) -> None:
    async def cycle(bus: EventBus, reviewer: Reviewer) -> None:
        print("stray output")
        print("a stray warning", file=sys.stderr)

    assert run(cycle, "process").status == "finished"
    out, err = capfd.readouterr()
    assert "stray" not in out + err


@pytest.mark.skipif("process" not in HOSTS, reason="the cycle runs in a thread here")
@pytest.mark.parametrize(("ending", "the_app_sees"), [
    ("the app dies", "failed"),  # the pipe closes: the child stops itself; nobody is left to tell
    ("the child is terminated", "interrupted"),  # a SIGTERM: what the app's exit does to its child
])
def test_a_real_cycle_ended_from_outside_is_left_interrupted_and_resumable(
        loaded: LoadedConfig, tmp_path: Path, ending: str, the_app_sees: str) -> None:
    db = tmp_path / ".cycle" / "cycle.db"

    async def cycle(bus: EventBus, reviewer: Reviewer):  # type: ignore[no-untyped-def]
        with Store.open(db) as store:
            return await build_loop(loaded, store=store, bus=bus, reviewer=reviewer).run()

    process = CycleProcess(cycle, host="process")
    process.start()
    started: list[str] = []

    def end_it_at_the_review(request: ReviewRequest, answer) -> None:  # type: ignore[no-untyped-def]
        started.append(request.cycle_id)
        assert process._process is not None
        if ending == "the app dies":
            process._conn.close()  # what the kernel does when the app's process dies
        else:
            process._process.terminate()

    outcome = process.relay(lambda e: None, end_it_at_the_review)
    process.join()

    assert outcome.status == the_app_sees
    assert process._process is not None and process._process.exitcode == 0  # the child ended cleanly
    with Store.open(db) as store:
        assert store.cycles.get(started[0]).status == "interrupted"
        assert store.labels("support")["head"] == "1.0.0"


@pytest.mark.parametrize("host", HOSTS)
def test_a_cycle_cancelled_before_it_began_never_starts(host: str) -> None:
    async def cycle(bus: EventBus, reviewer: Reviewer) -> None:
        raise AssertionError("the cycle ran")

    process = CycleProcess(cycle, host=host)
    process.cancel()  # the app closed before its first frame
    process.start()
    assert not process.started
    assert process.relay(lambda e: None, never_asked).status == "interrupted"
