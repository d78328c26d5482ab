"""Provider batch jobs (issue 17): the real openai and google-genai SDKs submit, poll and
read OpenAI Batch and Gemini batch-mode jobs on the loopback server; a call the job cannot
answer goes live; a job kept in the store is polled again, not resubmitted, after a kill."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cycle.events import BatchProgress, EventBus, ModelCalled
from cycle.llm.batch import BatchSettings
from cycle.records import Message
from cycle.records.scope import CallScope
from cycle.store import Store
from cycle.testing import Fault, Reply

PROVIDERS = ["openai:gpt-4o-mini", "gemini:gemini-2.5-flash"]
FAST = BatchSettings(poll=0.02, window=0.05)


def _asks(n: int) -> list[list[Message]]:
    return [[Message.system("Be brief."), Message.user(f"question {i}")] for i in range(n)]


@pytest.fixture
def bus_events():
    bus, seen = EventBus(), []
    bus.subscribe(seen.append)
    return bus, seen


@pytest.mark.parametrize("name", PROVIDERS)
async def test_calls_made_together_go_in_one_job_at_half_the_price(name, make_model, server,
                                                                   bus_events):
    bus, seen = bus_events
    # long enough that a loaded machine (the SDK's first status call imports more of it)
    # still polls the job before it ends
    server.batches.delay = 0.4
    batched = make_model(name, batch=FAST, bus=bus)
    outs = await asyncio.gather(*[batched.generate(m) for m in _asks(6)])
    assert [o.text for o in outs] == [f"echo: question {i}" for i in range(6)]
    assert server.batches.created == 1 and server.batches.polls >= 2  # it waited for the job
    assert server.request_count == 6  # the job's six calls, none sent alone

    live = make_model(name)
    alone = await live.generate(_asks(6)[0])
    assert alone.usage == outs[0].usage and alone.cost > 0
    assert outs[0].cost == pytest.approx(alone.cost / 2)  # the batch price
    progress = [e for e in seen if isinstance(e, BatchProgress)]
    assert progress[0].state == "submitted" and progress[0].total == 6
    assert progress[-1].done and progress[-1].completed == 6 and progress[-1].failed == 0
    calls = [e for e in seen if isinstance(e, ModelCalled)]
    assert len(calls) == 6 and all(c.error is None for c in calls)


@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_call_the_job_failed_goes_live_at_the_live_price(name, make_model, server,
                                                                 bus_events):
    bus, seen = bus_events
    # the job's first call is answered 500: that one is asked again, live, and succeeds
    server.enqueue(Fault.status(500, message="overloaded"), Reply(text="second"))
    model = make_model(name, batch=FAST, bus=bus)
    outs = await asyncio.gather(*[model.generate(m) for m in _asks(3)])
    assert server.batches.created == 1
    assert server.request_count == 4  # three in the job, one live
    texts = sorted(o.text for o in outs)
    assert "second" in texts and "echo: question 2" in texts
    # the live answer costs the list price, the batched ones half of it
    live = next(o for o in outs if o.text == "echo: question 0")
    batched = next(o for o in outs if o.text == "echo: question 2")
    assert live.usage.input_tokens == batched.usage.input_tokens
    assert batched.cost < live.cost
    [ended] = [e for e in seen if isinstance(e, BatchProgress) and e.done]
    assert ended.failed == 1 and "1 of its calls failed in the job: they go live" in ended.logged


@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_failed_job_sends_its_calls_live(name, make_model, server, bus_events):
    bus, seen = bus_events
    server.batches.fail_next = "the input file is invalid"
    model = make_model(name, batch=FAST, bus=bus)
    outs = await asyncio.gather(*[model.generate(m) for m in _asks(3)])
    assert [o.text for o in outs] == [f"echo: question {i}" for i in range(3)]
    assert server.batches.created == 1 and server.request_count == 3  # all three live
    ended = [e for e in seen if isinstance(e, BatchProgress) and e.done]
    assert ended and "ended" in ended[-1].note


@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_server_without_batch_endpoints_is_asked_live(name, make_model, server,
                                                              bus_events):
    """An OpenAI-compatible server (Ollama, vLLM) has no /batches: the calls go live, it is
    said once, and later calls do not try again."""
    bus, seen = bus_events
    server.batches.enabled = False
    model = make_model(name, batch=FAST, bus=bus)
    first = await asyncio.gather(*[model.generate(m) for m in _asks(3)])
    again = await model.generate(_asks(4)[3])
    assert [o.text for o in first] == [f"echo: question {i}" for i in range(3)]
    assert again.text == "echo: question 3"
    told = [e for e in seen if isinstance(e, BatchProgress)]
    assert len(told) == 1 and told[0].state == "live" and "no batch endpoints" in told[0].note
    # one try at a job, refused; then the four calls live, at the full price
    tries = [r for r in server.requests if r.api is None]
    assert len(tries) == 1 and tries[0].path.endswith(("/files", ":batchGenerateContent"))
    assert server.request_count == 5 and first[0].cost > 0


@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_job_submitted_before_a_kill_is_polled_not_resubmitted(name, make_model, server,
                                                                       tmp_path: Path):
    """The job's id and its calls' keys are in the store the moment it is submitted: the
    run, killed while the job runs, resumes by polling that job."""
    server.batches.delay = 0.5
    store = Store.open(tmp_path / "s.db")
    scope = CallScope(run_id="run-1", case_id="c")
    settings = BatchSettings(poll=0.05, window=0.05, ledger=store.batches)
    first = make_model(name, batch=settings, journal=store.journal)
    calls = [asyncio.ensure_future(first.generate(m, scope=scope)) for m in _asks(4)]
    while not store.batches.jobs():
        await asyncio.sleep(0.01)
    for c in calls:  # the kill: nothing was answered yet
        c.cancel()
    await asyncio.gather(*calls, return_exceptions=True)
    await first.aclose()
    assert server.batches.created == 1 and server.request_count == 0

    resumed = make_model(name, batch=settings, journal=store.journal)
    outs = await asyncio.gather(*[resumed.generate(m, scope=scope) for m in _asks(4)])
    assert [o.text for o in outs] == [f"echo: question {i}" for i in range(4)]
    assert server.batches.created == 1  # not submitted again
    assert server.request_count == 4
    [job] = store.batches.jobs()
    assert job["calls"] == 4 and job["run_id"] == "run-1" and job["ended_at"] is not None

    # once journaled, a third run's calls are replayed: no job, no call
    third = make_model(name, batch=settings, journal=store.journal)
    await asyncio.gather(*[third.generate(m, scope=scope) for m in _asks(4)])
    assert server.batches.created == 1 and server.request_count == 4
    store.close()
