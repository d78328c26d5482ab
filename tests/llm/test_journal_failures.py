"""Calls paid for that failed, and the call journal (cycle.llm.journal): through the real
openai and google-genai SDKs on the loopback server, a run is "killed" after a paid call
failed (its iteration's result, and the call rows buffered with it, never written) or
ends normally, then resumed in a new process (a second store connection, whose journal
looks calls up). An answer the provider withheld is replayed as the same error, paying
nothing; one that could not be used is asked again. The run's stored cost is what the
provider was paid, each charge once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cycle.errors import MalformedResponseError
from cycle.events import EventBus, ModelCalled
from cycle.llm.base import GenerateConfig
from cycle.llm.batch import BatchSettings
from cycle.llm.budget import Budget
from cycle.llm.model import RetryPolicy
from cycle.records import Message
from cycle.records.scope import CallScope
from cycle.store import CallRecorder, Store
from cycle.testing import Fault
from tests.llm import test_gemini_hostile as gemini
from tests.llm import test_openai_hostile as openai

HI = [Message.user("hi")]
RUN = "run-1"
SCOPE = CallScope(run_id=RUN, case_id="c", iteration=0)
WITHHELD = {
    "openai:gpt-4o-mini": (openai.WITHHELD["finish_reason content_filter, no text"],
                           "no answer, finish_reason content_filter, no text"),
    "gemini:gemini-2.5-flash": (gemini.WITHHELD["finishReason SAFETY, no text"],
                                "no answer, finishReason SAFETY, no text"),
}
UNREADABLE = {
    "openai:gpt-4o-mini": openai.UNREADABLE["Unterminated string"],
    "gemini:gemini-2.5-flash": gemini.UNREADABLE["Unterminated string"],
}


class Process:
    """One process of the run: its own store connection (so its own journal), a bus whose
    calls a CallRecorder writes when the run flushes, and a budget."""

    def __init__(self, path: Path, make_model, name: str, *, batch: bool = False) -> None:
        self.store = Store.open(path)
        kwargs = ({"batch": BatchSettings(poll=0.02, window=0.05, ledger=self.store.batches)}
                  if batch else {})
        self.bus = EventBus()
        self.calls: list[ModelCalled] = []
        self.bus.subscribe(lambda e: self.calls.append(e) if isinstance(e, ModelCalled) else None)
        self.recorder = CallRecorder(self.store.runs, run_id=RUN)
        self.bus.subscribe(self.recorder)
        self.budget = Budget(1.0)
        self.model = make_model(name, journal=self.store.journal, bus=self.bus,
                                budget=self.budget, config=GenerateConfig(max_tokens=100),
                                **kwargs)
        self.model.api.guard_max_tokens = False  # not streamed: the plain call

    def end(self, *, killed: bool) -> None:
        if not killed:  # a run that ends writes the rows it buffered; a killed one cannot
            self.recorder.flush()
        self.store.close()


def stored_cost(path: Path) -> float:
    with Store.open(path) as store:
        return store.db.execute("SELECT coalesce(sum(cost), 0) FROM calls WHERE run_id = ?",
                                [RUN]).fetchone()[0]


@pytest.mark.parametrize("killed", [True, False], ids=["killed", "ended"])
@pytest.mark.parametrize("name", list(WITHHELD))
async def test_a_withheld_answer_is_replayed_as_its_error_not_paid_again(
        name, killed, make_model, server, tmp_path):
    """Before: not journaled, so the resume sent it again (2 requests, paid twice); and its
    charge was in the store only if the run lived to write it (killed: 0 stored)."""
    path = tmp_path / "s.db"
    reply, says = WITHHELD[name]
    first = Process(path, make_model, name)
    server.enqueue(reply)
    with pytest.raises(MalformedResponseError, match=says) as before:
        await first.model.generate(HI, scope=SCOPE)
    paid = first.budget.spent
    assert paid > 0
    first.end(killed=killed)

    resumed = Process(path, make_model, name)
    with pytest.raises(MalformedResponseError) as again:
        await resumed.model.generate(HI, scope=SCOPE)
    assert str(again.value) == str(before.value)
    assert server.request_count == 1  # the refusal was not bought twice
    assert resumed.budget.spent == 0  # nothing new charged (the resume's cap carries `paid`)
    assert resumed.calls[-1].error and resumed.calls[-1].journaled
    resumed.end(killed=False)
    assert stored_cost(path) == pytest.approx(paid)  # once, killed or not


@pytest.mark.parametrize("name", list(UNREADABLE))
async def test_an_unreadable_answer_keeps_its_charge_through_a_kill_and_is_asked_again(
        name, make_model, server, tmp_path):
    """A cut or unreadable body is worth asking again (it is not the model's decision):
    the resume asks, and the run's cost holds both charges. Before: the first charge was
    lost with the process (the stored cost was the second call's alone)."""
    path = tmp_path / "s.db"
    first = Process(path, make_model, name)
    server.enqueue(UNREADABLE[name])
    with pytest.raises(MalformedResponseError):
        await first.model.generate(HI, scope=SCOPE)
    lost = first.budget.spent
    assert lost > 0
    first.end(killed=True)

    resumed = Process(path, make_model, name)
    server.enqueue("whole")
    out = await resumed.model.generate(HI, scope=SCOPE)
    assert out.text == "whole" and server.request_count == 2
    resumed.end(killed=False)
    assert stored_cost(path) == pytest.approx(lost + resumed.budget.spent)


@pytest.mark.parametrize("killed", [True, False], ids=["killed", "ended"])
@pytest.mark.parametrize("name", list(WITHHELD))
async def test_a_withheld_answer_of_a_batch_job_is_replayed_not_charged_again(
        name, killed, make_model, server, tmp_path):
    """In batch mode the resume found the ended job (cycle.llm.batch's ledger) and read its
    answers again: no new request, but the refusal was charged again (ended: the stored
    cost doubled; killed: the first charge was lost). Now the journal answers first."""
    path = tmp_path / "s.db"
    reply, says = WITHHELD[name]
    asks = [[Message.user(f"q{i}")] for i in range(3)]

    first = Process(path, make_model, name, batch=True)
    server.enqueue(reply)
    got = await asyncio.gather(*(first.model.generate(a, scope=SCOPE) for a in asks),
                               return_exceptions=True)
    assert isinstance(got[0], MalformedResponseError) and says in str(got[0])
    paid = first.budget.spent
    await first.model.aclose()
    first.end(killed=killed)

    resumed = Process(path, make_model, name, batch=True)
    again = await asyncio.gather(*(resumed.model.generate(a, scope=SCOPE) for a in asks),
                                 return_exceptions=True)
    assert isinstance(again[0], MalformedResponseError) and str(again[0]) == str(got[0])
    assert [o.text for o in again[1:]] == ["echo: q1", "echo: q2"]
    assert server.batches.created == 1 and resumed.budget.spent == 0
    resumed.end(killed=False)
    assert stored_cost(path) == pytest.approx(paid)


def quick_retries(process: Process, wait: float = 0.0) -> None:
    """The process's model retries after ``wait`` seconds (no jitter)."""
    process.model.retry = RetryPolicy(initial_wait=wait, jitter=0)


@pytest.mark.parametrize("killed", [True, False], ids=["killed", "ended"])
@pytest.mark.parametrize("name", list(WITHHELD))
async def test_a_retried_call_is_charged_once_for_each_attempt_and_replayed(
        name, killed, make_model, server, tmp_path):
    """An attempt cut on its way (billed) and asked again: the answer's cost carries both
    charges, and the journal keeps each once (the failed attempt's before the wait, the
    answer's own after it), never the failed one twice; a resume replays the answer."""
    path = tmp_path / "s.db"
    first = Process(path, make_model, name)
    quick_retries(first)
    server.enqueue(Fault.cut(), "whole")
    out = await first.model.generate(HI, scope=SCOPE)
    assert out.text == "whole" and server.request_count == 2
    assert first.calls[-1].attempts == 2 and first.calls[-1].journaled
    assert first.budget.spent == pytest.approx(out.cost)
    first.end(killed=killed)
    assert stored_cost(path) == pytest.approx(out.cost)

    resumed = Process(path, make_model, name)
    again = await resumed.model.generate(HI, scope=SCOPE)
    assert again.text == "whole" and server.request_count == 2 and resumed.budget.spent == 0
    resumed.end(killed=False)
    assert stored_cost(path) == pytest.approx(out.cost)


def stored_usage(path: Path):
    with Store.open(path) as store:
        return store.runs.usage_by_role(RUN)["agent"]


@pytest.mark.parametrize("killed", [True, False], ids=["killed", "ended"])
@pytest.mark.parametrize("name", list(WITHHELD))
async def test_a_charge_is_kept_through_a_stop_during_the_backoff(
        name, killed, make_model, server, tmp_path):
    """Stopped while it waits to ask again (a case's timeout here; a SIGKILL in
    tests/cli/test_kill_backoff.py): the failed attempt's charge is in the journal from
    before the wait, once, and the resume's answer adds its own. Before, that charge was
    kept only within the answer's cost: killed during the wait, it was lost."""
    path = tmp_path / "s.db"
    first = Process(path, make_model, name)
    quick_retries(first, wait=60)
    server.enqueue(Fault.cut())
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(first.model.generate(HI, scope=SCOPE), 1.0)
    lost = first.budget.spent
    assert lost > 0 and server.request_count == 1
    first.end(killed=killed)
    assert stored_cost(path) == pytest.approx(lost)
    stopped = stored_usage(path)  # stopped in flight: no call ended yet, its charge kept
    assert (stopped.calls, stopped.retried_charged) == (0, 1)

    resumed = Process(path, make_model, name)
    out = await resumed.model.generate(HI, scope=SCOPE)
    assert out.text.startswith("echo") and server.request_count == 2
    resumed.end(killed=False)
    assert stored_cost(path) == pytest.approx(lost + resumed.budget.spent)
    # the call that finally answered is one call, its earlier charge a retried attempt
    usage = stored_usage(path)
    assert (usage.calls, usage.retried_charged) == (1, 1)


@pytest.mark.parametrize("killed", [True, False], ids=["killed", "ended"])
@pytest.mark.parametrize("name", list(WITHHELD))
async def test_a_retried_charge_is_paid_but_not_a_call_of_its_own(
        name, killed, make_model, server, tmp_path):
    """Three calls, the first's first attempt cut on its way (billed) and asked again: the
    journal holds four rows (the charge kept before the wait, then each call's own), the
    run's usage counts three calls and one retried attempt charged, and its cost holds
    both of the first call's charges."""
    path = tmp_path / "s.db"
    first = Process(path, make_model, name)
    quick_retries(first)
    server.enqueue(Fault.cut(), "whole")
    outs = [await first.model.generate(HI, scope=CallScope(run_id=RUN, case_id=c, iteration=0))
            for c in ("a", "b", "c")]
    assert server.request_count == 4
    first.end(killed=killed)
    usage = stored_usage(path)
    assert (usage.calls, usage.retried_charged) == (3, 1)
    assert usage.cost == pytest.approx(sum(o.cost for o in outs)) == pytest.approx(first.budget.spent)


@pytest.mark.parametrize("name", list(WITHHELD))
async def test_a_call_failing_unbilled_after_a_retried_charge_is_still_a_call(
        name, make_model, server, tmp_path):
    """The first attempt cut (billed, its charge kept before the wait), the retry refused
    (400, nothing billed, not retried): the call failed, and it is one call with one
    retried attempt charged, not none."""
    path = tmp_path / "s.db"
    first = Process(path, make_model, name)
    quick_retries(first)
    server.enqueue(Fault.cut(), Fault.status(400))
    with pytest.raises(Exception):  # noqa: B017 - the provider's 400, whatever its class
        await first.model.generate(HI, scope=SCOPE)
    assert server.request_count == 2
    first.end(killed=False)
    usage = stored_usage(path)
    assert (usage.calls, usage.retried_charged) == (1, 1)
    assert usage.cost == pytest.approx(first.budget.spent) and usage.cost > 0
