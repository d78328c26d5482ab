"""Model's policy, once for all providers: cache, budget, events, cost, concurrency."""

from __future__ import annotations

import asyncio
import time

import pytest

from cycle.errors import BudgetExceededError, RateLimitError, RetriesExhaustedError
from cycle.llm.base import GenerateConfig, ModelOutput
from cycle.llm.budget import Budget
from cycle.llm.cache import ResponseCache
from cycle.llm.model import Model, ModelServices, RetryPolicy, max_concurrency, set_max_concurrency
from cycle.llm.pricing import PriceTable
from cycle.records import Message, ToolDef, Usage
from cycle.records.scope import CallScope
from cycle.testing import Fault, Reply, ScriptedAPI

HI = [Message.user("hi")]


async def test_cache_hit_makes_no_second_request(make_model, server, recorder, tmp_path):
    cache = ResponseCache(tmp_path / "cache.db")
    model = make_model("openai:gpt-4o-mini", cache=cache, bus=recorder.bus)
    server.enqueue(Reply(text="first", input_tokens=1000, output_tokens=100))

    first = await model.generate(HI)
    second = await model.generate(HI)

    assert server.request_count == 1
    assert second.text == "first" and second.cache_hit and second.cost == 0
    assert first.cost > 0 and not first.cache_hit
    hit = recorder.calls[-1]
    assert hit.cache_hit and hit.cost == 0 and not hit.cost_estimated


async def test_cache_is_shared_through_the_file(make_model, server, tmp_path):
    path = tmp_path / "cache.db"
    await make_model("gemini:gemini-2.5-flash", cache=ResponseCache(path)).generate(HI)
    # another cache object on the same file (as another process would open it)
    out = await make_model("gemini:gemini-2.5-flash", cache=ResponseCache(path)).generate(HI)
    assert out.cache_hit and server.request_count == 1


async def test_iterations_are_not_collapsed(make_model, server, tmp_path):
    model = make_model("openai:gpt-4o-mini", cache=ResponseCache(tmp_path / "c.db"))
    server.enqueue("one", "two")
    a = await model.generate(HI, iteration=0)
    b = await model.generate(HI, iteration=1)
    again = await model.generate(HI, iteration=1)
    assert (a.text, b.text, again.text) == ("one", "two", "two")
    assert server.request_count == 2 and again.cache_hit


async def test_a_fresh_sample_is_never_answered_from_another(make_model, server, tmp_path):
    """Each of a cycle's evaluations is its own sample: the same call in another sample is
    asked again; in the same sample (a resume) it is answered from the cache."""
    model = make_model("openai:gpt-4o-mini", cache=ResponseCache(tmp_path / "c.db"))
    server.enqueue("plain", "first sample", "second sample")
    assert (await model.generate(HI)).text == "plain"
    a = await model.generate(HI, scope=CallScope(sample="c-1-r0"))
    b = await model.generate(HI, scope=CallScope(sample="c-2-r0"))
    again = await model.generate(HI, scope=CallScope(sample="c-1-r0"))
    assert (a.text, b.text, again.text) == ("first sample", "second sample", "first sample")
    assert not a.cache_hit and not b.cache_hit and again.cache_hit
    assert server.request_count == 3


async def test_config_and_model_are_part_of_the_key(make_model, server, tmp_path):
    cache = ResponseCache(tmp_path / "c.db")
    await make_model("openai:gpt-4o-mini", cache=cache).generate(HI)
    await make_model("openai:gpt-4o-mini", cache=cache).generate(
        HI, config=GenerateConfig(temperature=0.5))
    await make_model("openai:gpt-4o", cache=cache).generate(HI)
    assert server.request_count == 3


async def test_messages_and_tools_are_part_of_the_key(make_model, server, tmp_path):
    tool = ToolDef(name="lookup", description="Look an order up",
                   parameters={"type": "object", "properties": {"id": {"type": "string"}}})
    model = make_model("gemini:gemini-2.5-flash", cache=ResponseCache(tmp_path / "c.db"))
    server.enqueue("plain", "other question", "with a tool")
    assert (await model.generate(HI)).text == "plain"
    assert (await model.generate([Message.user("bye")])).text == "other question"
    assert (await model.generate(HI, tools=[tool])).text == "with a tool"
    assert server.request_count == 3
    again = await model.generate(HI, tools=[tool])
    assert again.cache_hit and again.text == "with a tool" and server.request_count == 3


async def test_errors_are_never_cached(make_model, server, tmp_path):
    model = make_model("openai:gpt-4o-mini", cache=ResponseCache(tmp_path / "c.db"),
                       retry=RetryPolicy(attempts=1))
    server.enqueue(Fault.status(429))
    with pytest.raises(RateLimitError):
        await model.generate(HI)
    out = await model.generate(HI)
    assert not out.cache_hit and server.request_count == 2


async def test_cache_entries_expire(make_model, server, tmp_path):
    model = make_model("openai:gpt-4o-mini", cache=ResponseCache(tmp_path / "c.db", ttl=0.05))
    await model.generate(HI)
    await asyncio.sleep(0.1)
    assert not (await model.generate(HI)).cache_hit
    assert server.request_count == 2


async def test_budget_blocks_the_call_before_it_is_made(make_model, server):
    budget = Budget(limit=0.02)
    model = make_model("openai:gpt-4o", budget=budget, config=GenerateConfig(max_tokens=1000))
    server.enqueue(Reply(text="pricey", input_tokens=1000, output_tokens=1000))

    await model.generate(HI)  # reserved ~$0.01 (1000 output tokens at $10/M); cost $0.0125
    assert budget.spent == pytest.approx(0.0125) and budget.reserved == 0
    assert budget.by_role == {"agent": pytest.approx(0.0125)}

    # the next call's worst case ($0.01) does not fit the $0.0075 left: never sent
    with pytest.raises(BudgetExceededError, match="could cost up to"):
        await model.generate([Message.user("more")])
    assert server.request_count == 1  # the second call never reached the server


@pytest.mark.parametrize("attempt", range(20))
async def test_calls_racing_the_budget_never_spend_past_it(make_model, server, attempt):
    """64 calls at once, each worth about $0.004, against caps that fall mid-way: the
    spend never exceeds the cap, calls refused are never sent, and no reservation is
    left behind."""
    cap = 0.02 + 0.008 * attempt  # all 64 answered would cost about $0.21
    budget = Budget(limit=cap)
    model = make_model("openai:gpt-4o", budget=budget, config=GenerateConfig(max_tokens=400))
    server.reset()
    server.enqueue([Reply(text="x" * 1200)] * 64)  # 300 output tokens: below the 400 reserved
    results = await asyncio.gather(*(model.generate([Message.user(f"call {i} " + "y" * 400)])
                                     for i in range(64)), return_exceptions=True)
    refused = [r for r in results if isinstance(r, BudgetExceededError)]
    answered = [r for r in results if isinstance(r, ModelOutput)]
    assert len(refused) + len(answered) == 64 and refused and answered
    assert budget.spent <= cap and budget.reserved == pytest.approx(0)
    assert budget.spent == pytest.approx(sum(r.cost for r in answered))
    assert server.request_count == len(answered)


def test_a_budget_that_is_not_a_finite_amount_is_refused():
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="finite number >= 0"):
            Budget(limit=bad)


async def test_budget_is_charged_per_role(make_model, server):
    budget = Budget(limit=None)
    judge = make_model("openai:gpt-4o-mini", budget=budget, role="judge")
    server.enqueue(Reply(text="", input_tokens=1_000_000, output_tokens=0))
    await judge.generate(HI)
    await judge.generate([Message.user("b")], role="improver")
    assert budget.by_role["judge"] == pytest.approx(0.15)
    assert set(budget.by_role) == {"judge", "improver"}


async def test_cost_from_usage_with_cached_tokens(make_model, server, recorder):
    model = make_model("openai:gpt-4o-mini-2024-07-18", bus=recorder.bus, role="judge")
    server.enqueue(Reply(text="x", input_tokens=1_000_000, cached_tokens=400_000,
                         output_tokens=500_000))
    out = await model.generate(HI, scope=CallScope(run_id="r1", case_id="c", iteration=0))
    # gpt-4o-mini: 0.15 in, 0.075 cached, 0.60 out per 1M
    expected = 0.6 * 0.15 + 0.4 * 0.075 + 0.5 * 0.60
    assert out.cost == pytest.approx(expected)
    event = recorder.calls[-1]
    assert event.cost == pytest.approx(expected)
    assert (event.input_tokens, event.cached_input_tokens, event.output_tokens) == (
        1_000_000, 400_000, 500_000)
    assert event.role == "judge" and event.scope.run_id == "r1"
    assert event.model == "openai:gpt-4o-mini-2024-07-18" and event.latency > 0


async def test_unknown_model_is_priced_as_estimated(make_model, server, recorder):
    budget = Budget(limit=None)
    model = make_model("openai:llama3.1:8b", bus=recorder.bus, budget=budget)
    server.enqueue(Reply(text="x", input_tokens=1000, output_tokens=1000))
    out = await model.generate(HI)
    assert out.cost > 0 and out.cost_estimated
    assert recorder.calls[-1].cost_estimated
    assert budget.estimated


async def test_price_overrides_apply(make_model, server):
    table = PriceTable().with_overrides({"llama3.1:8b": {"input": 1.0, "output": 2.0}})
    model = make_model("openai:llama3.1:8b", pricing=table)
    server.enqueue(Reply(text="x", input_tokens=1_000_000, output_tokens=1_000_000))
    out = await model.generate(HI)
    assert out.cost == pytest.approx(3.0) and not out.cost_estimated


async def test_per_model_concurrency_limit():
    in_flight = peak = 0

    async def slow(messages, tools, config):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return "ok"

    api = ScriptedAPI("slow", outputs=slow)
    api.options = api.options.__class__(max_connections=3)
    model = Model(api)
    await asyncio.gather(*(model.generate([Message.user(str(i))]) for i in range(12)))
    assert peak == 3


async def test_process_concurrency_limit_is_settable():
    in_flight = peak = 0

    async def slow(messages, tools, config):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return "ok"

    a, b = Model(ScriptedAPI("a", outputs=slow)), Model(ScriptedAPI("b", outputs=slow))
    before = max_concurrency()
    set_max_concurrency(2)
    try:
        await asyncio.gather(*(m.generate([Message.user(str(i))]) for i in range(6)
                               for m in (a, b)))
    finally:
        set_max_concurrency(before)
    assert peak == 2


async def test_failure_after_retries_is_reported_once_with_attempts(recorder):
    api = ScriptedAPI("flaky", outputs=[RateLimitError("slow down", status=429)] * 3)
    model = Model(api, ModelServices(bus=recorder.bus), retry=RetryPolicy(attempts=3, initial_wait=0.001,
                                                            max_wait=0.001, jitter=0))
    with pytest.raises(RetriesExhaustedError, match="429"):
        await model.generate(HI, role="judge", scope=CallScope(case_id="c9"))
    [event] = recorder.calls
    assert event.attempts == 3 and "RateLimitError" in event.error
    assert event.role == "judge" and event.scope == CallScope(case_id="c9")


async def test_scripted_models_are_offline_and_free(recorder):
    model = Model(ScriptedAPI("s", outputs=[ModelOutput(text="x", usage=Usage(input_tokens=10**6))]),
                  ModelServices(bus=recorder.bus))
    out = await model.generate(HI)
    assert model.offline and out.cost == 0 and not out.cost_estimated
    assert recorder.calls[-1].cost == 0


async def test_timeout_applies_to_any_provider():
    async def hang(messages, tools, config):
        await asyncio.sleep(5)

    model = Model(ScriptedAPI("hang", outputs=hang),
                  retry=RetryPolicy(attempts=2, initial_wait=0.001, max_wait=0.001, jitter=0))
    started = time.monotonic()
    with pytest.raises(RetriesExhaustedError, match="did not answer within 0.05"):
        await model.generate(HI, config=GenerateConfig(timeout=0.05))
    assert time.monotonic() - started < 1
