"""Adaptive concurrency (issue 17, item 4): a provider answering 429 gets fewer calls in
flight (halved, once per round trip) and more again as it answers (one per limit's worth of
answers), never above the configured max_connections; shown on the progress line."""

from __future__ import annotations

import asyncio
import io

import pytest

from cycle import events as ev
from cycle.llm.limit import AdaptiveLimit
from cycle.llm.model import Model, ModelServices, RetryPolicy, provider_limit
from cycle.llm.registry import get_api
from cycle.progress import Progress
from cycle.records import Message
from cycle.testing import LoopbackServer
from cycle.testing.server import every, rate_limit


async def test_a_rate_limited_answer_halves_the_limit_once_per_round_trip() -> None:
    limit = AdaptiveLimit(16)
    sent = [await limit.acquire() for _ in range(16)]
    assert limit.in_flight == 16
    assert limit.throttle(sent[0]) and limit.current == 8
    # the other calls sent before the cut are the same overload: no second cut
    assert not any(limit.throttle(t) for t in sent[1:]) and limit.current == 8
    assert limit.throttled == 16 and limit.cuts == 1
    for _ in range(16):
        limit.release()
    later = await limit.acquire()
    assert limit.throttle(later) and limit.current == 4  # sent after the cut: cuts again
    limit.release()
    for _ in range(10):
        limit.throttle(await limit.acquire())
        limit.release()
    assert limit.current == 1  # never below one


async def test_answers_grow_it_back_to_the_ceiling_and_no_further() -> None:
    limit = AdaptiveLimit(8)
    limit.throttle(await limit.acquire())
    limit.release()
    assert limit.current == 4
    grown = [limit.answered() for _ in range(4)]
    assert limit.current == 5 and grown == [False, False, False, True]  # +1 per 4 answers
    for _ in range(100):
        limit.answered()
    assert limit.current == 8 and not limit.answered()


async def test_waiters_get_the_slots_a_grown_limit_opens_and_a_cancelled_one_hands_on() -> None:
    limit = AdaptiveLimit(2)
    limit.throttle(await limit.acquire())  # in flight: 1 of 1
    waiting = [asyncio.ensure_future(limit.acquire()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiting)
    waiting[0].cancel()  # cancelled while waiting: leaves the queue
    await asyncio.sleep(0)
    limit.release()  # the slot goes to the next waiter
    await asyncio.sleep(0)
    assert waiting[1].done() and not waiting[2].done() and limit.in_flight == 1
    limit.answered()  # 1 -> 2: the third waiter gets the new slot
    await asyncio.sleep(0)
    assert waiting[2].done() and limit.in_flight == 2


async def fire(srv: LoopbackServer, calls: int, bus: ev.EventBus, *, ceiling: int = 16) -> None:
    model = Model(get_api("openai:gpt-4o-mini", srv.openai_options(max_connections=ceiling)),
                  ModelServices(bus=bus),
                  retry=RetryPolicy(attempts=30, initial_wait=0.02, max_wait=0.1,
                                             jitter=0.02))
    try:
        await asyncio.gather(*(model.generate([Message.user(str(i))]) for i in range(calls)))
    finally:
        await model.aclose()


def test_a_rate_limited_provider_gets_fewer_429s_through_the_real_sdk(monkeypatch) -> None:
    """A provider taking 10 calls per 0.2 s, 16 in flight asked: the limit comes down, every
    call is answered, and the same calls with the limit fixed at 16 meet more 429s."""

    def run() -> tuple[int, list[ev.ConcurrencyChanged], str]:
        bus = ev.EventBus()
        changes: list[ev.ConcurrencyChanged] = []
        bus.subscribe(lambda e: changes.append(e) if isinstance(e, ev.ConcurrencyChanged) else None)
        progress = Progress(io.StringIO())
        bus.subscribe(progress)
        with LoopbackServer(latency=0.02, responder=rate_limit(10, window=0.2)) as srv:
            asyncio.run(fire(srv, 60, bus))
            refused = srv.request_count - 60
        return refused, changes, progress.line()

    refused, changes, line = run()
    assert changes and min(c.limit for c in changes) < 16
    assert all(c.ceiling == 16 and c.limit <= 16 for c in changes)
    assert changes[-1].rate_limited == refused > 0
    assert f"openai {changes[-1].limit}/16 in flight ({refused} x 429)" in line

    monkeypatch.setattr(AdaptiveLimit, "throttle", lambda self, sent: False)
    fixed, _, _ = run()
    assert refused < fixed


def test_the_limit_is_shared_by_the_models_of_one_provider() -> None:
    """The agent's and the judge's calls to one endpoint share its rate limit: a 429 to
    either cuts what both may send."""

    async def both(srv: LoopbackServer) -> tuple[AdaptiveLimit, AdaptiveLimit]:
        agent = Model(get_api("openai:agent", srv.openai_options(max_connections=8)))
        judge = Model(get_api("openai:judge", srv.openai_options(max_connections=8)))
        a, b = provider_limit(agent.api), provider_limit(judge.api)
        await agent.aclose()
        await judge.aclose()
        return a, b

    with LoopbackServer() as srv:
        a, b = asyncio.run(both(srv))
    assert a is b


@pytest.mark.parametrize("storm", [every(3)])
def test_a_storm_of_429s_still_answers_every_call(storm) -> None:
    bus = ev.EventBus()
    with LoopbackServer(latency=0.005, responder=storm) as srv:
        asyncio.run(fire(srv, 30, bus, ceiling=8))
        assert srv.request_count >= 30 + 10  # every third request refused
