"""The budget against providers that do not play fair (issue 32): text in scripts near one
token a character, usage left out or sent as text, negative usage. 64 calls race the cap
through the real openai SDK; what the server *billed* (its own token count, whatever it
told cycle) never passes the cap."""

from __future__ import annotations

import asyncio

import pytest

from cycle.errors import BudgetExceededError, CycleError
from cycle.llm.base import GenerateConfig
from cycle.llm.budget import Budget
from cycle.records import Message
from cycle.testing import Reply
from cycle.testing.billing import Billing

MODEL = "openai:gpt-4o-mini"
#: a case in Japanese: about one token a character for real tokenizers
CJK = "注文番号の返金はいつ届きますか。配送状況を詳しく教えてください。" * 4


@pytest.mark.parametrize("mode", ["told", "omitted", "strings", "zeros", "fractions",
                                  "ignores_max_tokens"])
async def test_sixty_four_calls_racing_the_cap_never_pass_it(mode, make_model, server):
    bill = Billing(mode)
    server.responder = bill
    # a model streams a token (here a character) at a time; a server that ignores
    # max_tokens goes on until the client stops reading
    server.stream_chars, server.stream_delay = 1, 0.01  # a model at 100 tokens a second
    cap = 0.002
    budget = Budget(cap)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=64),
                       options={"max_connections": 64})

    async def one(i: int) -> bool:
        try:
            await model.generate([Message.user(f"{i} {CJK}")], iteration=i)
            return True
        except BudgetExceededError:
            return False

    answered = await asyncio.gather(*(one(i) for i in range(600)))
    billed = bill.billed(model.pricing, MODEL)
    assert sum(answered) >= 10  # the cap was reached by real calls, not refused at once
    assert not all(answered)  # and it did stop them
    assert billed <= cap, f"{mode}: billed ${billed:.6f} of a ${cap} cap"
    assert budget.spent <= cap and budget.spent >= billed  # never under what was billed
    if mode != "told":
        assert budget.estimated  # the spend says it was estimated


async def test_negative_usage_is_an_error_of_the_call_charged_as_its_worst_case(
        make_model, server):
    """The lie never lowers the spend; the answer came back (the server may bill it), so it
    is charged as the most it may have cost, estimated (before: charged nothing)."""
    server.responder = lambda request: Reply(
        text="ok", usage={"prompt_tokens": -1_000_000_000, "completion_tokens": 5})
    budget = Budget(0.01)
    model = make_model(MODEL, budget=budget)
    with pytest.raises(CycleError, match="cannot be negative"):
        await model.generate([Message.user("hi")])
    assert 0 < budget.spent <= budget.limit and budget.estimated and budget.reserved == 0
    assert server.request_count == 1  # not asked again: retrying pays for the same lie


async def test_under_a_budget_a_compatible_servers_answer_is_streamed_whole(make_model, server):
    """Streamed (a cap is set, the server is not OpenAI's own), an answer within max_tokens
    comes back whole, its tool calls and the server's usage with it."""
    from cycle.records import ToolDef

    server.responder = lambda request: Reply(
        text="Your parcel is on its way.", tool_calls=[("lookup", {"order": "A-1"})])
    model = make_model(MODEL, budget=Budget(1.0), config=GenerateConfig(max_tokens=200))
    out = await model.generate([Message.user("where?")],
                               tools=[ToolDef(name="lookup")], iteration=0)
    assert server.requests[-1].body["stream"] is True
    assert out.text == "Your parcel is on its way." and out.finish_reason != "length"
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("lookup", {"order": "A-1"})]
    assert not out.usage_estimated and out.usage.output_tokens > 0  # the server's own count
    unbudgeted = make_model(MODEL, config=GenerateConfig(max_tokens=200))
    await unbudgeted.generate([Message.user("where?")], iteration=1)
    assert "stream" not in server.requests[-1].body  # no cap, nothing to guard: not streamed


class _Held(Budget):
    """A budget that keeps what each call reserved."""

    def __init__(self, limit: float) -> None:
        super().__init__(limit)
        self.held: list[float] = []

    async def reserve(self, worst: float) -> float:
        held = await super().reserve(worst)
        self.held.append(held)
        return held


async def test_a_call_cut_off_by_its_timeout_is_charged_its_reservation(make_model, server,
                                                                         recorder):
    """The provider may bill what it generated after cycle stopped waiting: under a cap a
    timed-out call was handed its reservation back, and the spend could pass the cap."""
    from cycle.errors import RetriesExhaustedError

    server.latency = 0.5
    budget = _Held(1.0)
    model = make_model(MODEL, budget=budget, bus=recorder.bus,
                       config=GenerateConfig(max_tokens=64, timeout=0.05))
    with pytest.raises(RetriesExhaustedError, match="did not answer within 0.05 s"):
        await model.generate([Message.user("Where is my order?")])
    assert len(budget.held) == 3 and budget.spent == pytest.approx(sum(budget.held))
    assert budget.estimated and budget.reserved == 0
    failed = recorder.calls[-1]
    assert failed.error and failed.cost == pytest.approx(budget.spent) and failed.cost_estimated


async def test_a_call_cancelled_once_sent_is_charged_its_reservation(make_model, server):
    """A case's timeout or a Ctrl-C cancels the calls in flight: the same holds."""
    server.latency = 0.5
    budget = _Held(1.0)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=64))
    call = asyncio.create_task(model.generate([Message.user("Where is my order?")]))
    while server.request_count == 0:  # sent
        await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert budget.spent == pytest.approx(budget.held[0]) and budget.reserved == 0


async def test_a_count_above_the_calls_reservation_is_settled_as_told_then_nothing_is_sent(
        make_model, server):
    """What docs/real-models.md and docs/limits.md state as the cap's limit: a provider
    claiming more output tokens than the call's max_tokens is charged its claim (cycle cannot
    tell a real bill from a lie), so the spend passes the cap; the next call is refused
    before it is sent."""
    server.responder = lambda request: Reply(
        text="ok", usage={"prompt_tokens": 10, "completion_tokens": 10**15})
    budget = Budget(0.01)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=16))
    await model.generate([Message.user("hi")])
    assert budget.spent > budget.limit  # the claim, as told
    with pytest.raises(BudgetExceededError):
        await model.generate([Message.user("again")])
    assert server.request_count == 1  # refused before it was sent
