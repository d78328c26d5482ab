"""A hostile Gemini endpoint, through the real google-genai SDK on the loopback server: what
Gemini says in its own words (RetryInfo, finish reasons, blocked prompts) reaches cycle."""

from __future__ import annotations

import json
import time

import pytest

from cycle.errors import RateLimitError, RetriesExhaustedError
from cycle.records import Message, Usage
from cycle.testing import Fault
from tests.llm.withheld import (
    answer_withheld,
    judge_withheld,
    replayed_not_paid_again,
    run_withheld,
)

MODEL = "gemini:gemini-2.5-flash"
HI = [Message.user("hi")]


def quota(delay: str) -> Fault:
    """A 429 as Gemini sends it: no Retry-After header, the wait in a RetryInfo detail."""
    return Fault.status(429, body=json.dumps({"error": {
        "code": 429, "status": "RESOURCE_EXHAUSTED",
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay},
        ]}}))


async def test_a_429s_retry_info_is_waited_out(make_model, server):
    model = make_model(MODEL)
    await model.generate(HI)  # the SDK's import and client, outside the time measured
    server.enqueue(quota("0.4s"), "finally")
    started = time.monotonic()
    out = await model.generate(HI)
    assert out.text == "finally"
    assert time.monotonic() - started >= 0.4  # the backoff alone would be ~0.01 s
    assert server.request_count == 3


async def test_a_retry_info_longer_than_the_cap_fails_at_once_with_the_reason(make_model, server):
    model = make_model(MODEL)
    server.enqueue(quota("3600s"), "never reached")
    with pytest.raises(RetriesExhaustedError, match="asked to wait 3600 s .* more than the 120 s") as e:
        await model.generate(HI)
    assert server.request_count == 1
    assert isinstance(e.value.last, RateLimitError) and e.value.last.retry_after == 3600


async def test_under_a_budget_a_call_without_max_tokens_asks_gemini_for_no_more_than_reserved(
        make_model, server):
    """Gemini honours maxOutputTokens (thinking included) but defaults to far more than the
    4,096 tokens a call without max_tokens is reserved: under a cap it is sent that much."""
    from cycle.llm.budget import Budget
    from cycle.llm.model import RESERVED_OUTPUT

    await make_model(MODEL, budget=Budget(1.0)).generate(HI)
    await make_model(MODEL).generate(HI)  # no cap: Gemini's own default, as before
    capped, free = (r.body.get("generationConfig") or {} for r in server.requests)
    assert capped.get("maxOutputTokens") == RESERVED_OUTPUT
    assert "maxOutputTokens" not in free


USAGE = {"promptTokenCount": 1000, "candidatesTokenCount": 500, "totalTokenCount": 1500}


def answer(candidate: dict | None = None, **body: object) -> Fault:
    """A 200 answer with this body, as Gemini may send it."""
    if candidate is not None:
        body["candidates"] = [candidate]
    return Fault.malformed(json.dumps({**body, "usageMetadata": USAGE}))


WITHHELD = {
    "finishReason SAFETY, no text": answer({"finishReason": "SAFETY"}),
    "finishReason OTHER, no text": answer(
        {"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "OTHER"}),
    "finishReason MALFORMED_FUNCTION_CALL, no text": answer(
        {"finishReason": "MALFORMED_FUNCTION_CALL"}),
    "finishReason RECITATION (Gemini stopped the answer)": answer(
        {"content": {"role": "model", "parts": [{"text": "The first verse is"}]},
         "finishReason": "RECITATION"}),
    "finishReason STOP, only thoughts, no text": answer(
        {"content": {"role": "model", "parts": [{"text": "Let me think.", "thought": True}]},
         "finishReason": "STOP"}),
    "finishReason missing, no text": answer({}),
    "promptFeedback.blockReason PROHIBITED_CONTENT (Gemini blocked the prompt)": answer(
        promptFeedback={"blockReason": "PROHIBITED_CONTENT"}),
    "the response has no candidates": answer(),
}


@pytest.mark.parametrize("says", list(WITHHELD))
async def test_an_answer_gemini_withheld_is_an_error_naming_why_and_is_charged(
        says, make_model, server, recorder):
    """Before: each came back as an empty (or cut) answer, judged as if the model had
    written it (a silent 0), or, for a judge, 'does not follow the schema'. Gemini bills
    the tokens it reported."""
    await answer_withheld(make_model, MODEL, server, recorder, WITHHELD[says], says)


async def test_gemini_withholding_a_judges_answer_is_named_not_a_schema_error(make_model, server):
    await judge_withheld(make_model(MODEL), server, WITHHELD["finishReason SAFETY, no text"], "finishReason SAFETY")


async def test_answers_gemini_ended_as_a_model_does_are_answers(make_model, server):
    """Cut at the call's own max_tokens (even all of it spent thinking: the prompt's own
    params did that, a failure to judge), or empty with STOP: answers, judged as they are."""
    model = make_model(MODEL)
    server.enqueue(
        answer({"content": {"role": "model", "parts": [{"text": "Dear Ann, your par"}]},
                "finishReason": "MAX_TOKENS"}),
        answer({"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}),
        answer({"finishReason": "MAX_TOKENS"}))
    cut = await model.generate(HI)
    empty = await model.generate([Message.user("again")])
    thought_out = await model.generate([Message.user("and again")])
    assert (cut.text, cut.finish_reason) == ("Dear Ann, your par", "length")
    assert (empty.text, empty.finish_reason) == ("", "stop")
    assert (thought_out.text, thought_out.finish_reason) == ("", "length")


def _blocked(request):
    """The agent's answers blocked for SAFETY (the judge's are not asked for)."""
    return WITHHELD["finishReason SAFETY, no text"] if request.schema is None else None


def test_a_run_whose_agent_gemini_blocks_errs_naming_it_never_scores_it(tmp_path, monkeypatch):
    """`cycle run` on the gemini project: the agent's answers blocked for SAFETY are errors
    of their iterations, with Gemini's reason on the case's row, not failed cases."""
    r, requests = run_withheld(tmp_path, monkeypatch, "gemini",
                               "GEMINI_API_KEY=test-key-from-dotenv", _blocked)
    assert "0 passed, 0 failed, 3 errored" in r.output, r.output
    assert r.output.count("no answer, finishReason SAFETY, no text") == 3, r.output
    assert all(req.schema is None for req in requests)  # nothing was judged


def test_a_resumed_run_replays_the_blocked_answers_it_paid_for(tmp_path, monkeypatch):
    """`cycle run`, every agent answer blocked for SAFETY, then `cycle run --resume`: each
    blocked call is answered from the call journal with the same error, not sent to Gemini
    again (before: three more requests, billed, and the run's cost counted both)."""
    runs, requests = run_withheld(tmp_path, monkeypatch, "gemini",
                                  "GEMINI_API_KEY=test-key-from-dotenv", _blocked, resume=True)
    replayed_not_paid_again(tmp_path, runs, requests, "no answer, finishReason SAFETY, no text")


UNREADABLE = {
    "usage_metadata.promptTokenCount: Input should be a valid integer": Fault.malformed(json.dumps({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]},
                        "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": "a thousand", "candidatesTokenCount": 2.5}})),
    "functionCall.args: Input should be a valid dictionary": Fault.malformed(json.dumps({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "lookup", "args": ["A-1042"]}}]}, "finishReason": "STOP"}],
        "usageMetadata": USAGE})),
    "Unterminated string": Fault.malformed(
        '{"candidates": [{"content": {"role": "model", "parts": [{"text": "Dear Ann, your or'),
}


@pytest.mark.parametrize("says", list(UNREADABLE))
async def test_an_answer_the_sdk_cannot_read_is_a_one_line_error_charged_to_the_cap(
        says, make_model, server, recorder):
    """Before: the error was pydantic's text with its links, and the call was charged
    nothing although it came back (Gemini bills it): under a cap, a provider answering so
    spent past it unseen."""
    from cycle.errors import MalformedResponseError
    from cycle.llm.base import GenerateConfig
    from cycle.llm.budget import Budget

    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, bus=recorder.bus,
                       config=GenerateConfig(max_tokens=100))
    server.enqueue(UNREADABLE[says])
    with pytest.raises(MalformedResponseError, match="could not be understood") as e:
        await model.generate(HI)
    assert says in str(e.value) and "\n" not in str(e.value) and "pydantic.dev" not in str(e.value)
    assert server.request_count == 1
    # charged as the most it may have been: what was sent by the byte bound, and its 100
    # tokens of output, estimated
    worst = model.pricing.cost(MODEL, Usage(
        input_tokens=1, output_tokens=100)).usd
    assert budget.spent >= worst and budget.estimated and budget.reserved == 0
    assert recorder.calls[-1].cost == pytest.approx(budget.spent)


class Thinking:
    """A Gemini that thinks up to the call's maxOutputTokens (thinking counts toward it, and
    is billed as output) and answers a few characters; it bills one token a character of
    what it is sent. ``told``: usageMetadata as Gemini sends it, "zeros" (every count 0), or
    none at all."""

    def __init__(self, told: bool | str) -> None:
        import threading

        self.told = told
        self.billed: list[tuple[int, int]] = []
        self._lock = threading.Lock()

    def __call__(self, request):
        from cycle.testing import Reply

        cap = (request.body.get("generationConfig") or {}).get("maxOutputTokens") or 65536
        answer = "fine"
        sent = sum(len(m["content"] or "") for m in request.messages)
        thoughts = cap - len(answer)
        with self._lock:
            self.billed.append((sent, cap))
        if not self.told:
            return Reply(text=answer, no_usage=True)
        if self.told == "zeros":
            return Reply(text=answer, usage={"promptTokenCount": 0, "candidatesTokenCount": 0,
                                             "totalTokenCount": 0})
        return Reply(text=answer, usage={
            "promptTokenCount": sent, "candidatesTokenCount": len(answer),
            "thoughtsTokenCount": thoughts, "totalTokenCount": sent + cap})


@pytest.mark.parametrize("told", [True, False, "zeros"], ids=["told", "omitted", "zeros"])
async def test_calls_racing_the_cap_with_thinking_never_pass_it(told, make_model, server):
    """16 in flight; Gemini thinks to the call's cap, its thoughts billed as output. When it
    tells no usage, the answer's few bytes are not what was billed: the call is charged as
    if it thought to its cap (before: the visible answer's bytes, and the spend fell short
    of what was billed)."""
    import asyncio

    from cycle.errors import BudgetExceededError
    from cycle.llm.base import GenerateConfig
    from cycle.llm.budget import Budget

    bill = Thinking(told)
    server.responder = bill
    cap = 0.005
    budget = Budget(cap)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=64),
                       options={"max_connections": 16})

    async def one(i: int) -> bool:
        try:
            await model.generate([Message.user(f"hi {i}")], iteration=i)
            return True
        except BudgetExceededError:
            return False

    answered = await asyncio.gather(*(one(i) for i in range(400)))
    billed = sum(model.pricing.cost(MODEL, Usage(input_tokens=i, output_tokens=o)).usd
                 for i, o in bill.billed)
    assert sum(answered) >= 10 and not all(answered)
    assert billed <= cap, f"billed ${billed:.6f} of a ${cap} cap"
    assert billed <= budget.spent <= cap


async def test_a_key_echoed_in_an_unreadable_answer_is_masked_whole(make_model, server):
    """The value pydantic quotes is shortened for the message: masked before, or a key cut
    in two would leak its first half."""
    from cycle.errors import MalformedResponseError

    key = "k" * 50 + "-secret-gemini-key-1234567890"
    model = make_model(MODEL, options={"api_key": key})
    server.enqueue(Fault.malformed(json.dumps({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}}],
        "usageMetadata": {"promptTokenCount": f"echo {key}"}})))
    with pytest.raises(MalformedResponseError) as e:
        await model.generate(HI)
    assert "kkkkkkkkkk" not in str(e.value) and "***" in str(e.value)


async def test_an_answer_cut_on_its_way_is_charged_then_asked_again(make_model, server, recorder):
    """Gemini generated (and bills) an answer that a network or a proxy cut halfway: the
    attempt is a connection error, asked again, and charged as the most it may have cost
    (before: charged nothing, so under a cap the spend fell short of the bill)."""
    from cycle.llm.base import GenerateConfig
    from cycle.llm.budget import Budget

    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, bus=recorder.bus,
                       config=GenerateConfig(max_tokens=100))
    server.enqueue(Fault.cut("a long answer " * 20), "whole")
    out = await model.generate(HI)
    assert out.text == "whole" and server.request_count == 2
    lost = model.pricing.cost(MODEL, Usage(input_tokens=1, output_tokens=100)).usd
    assert out.cost >= lost and out.cost_estimated  # the answer's cost carries the lost one
    assert budget.spent == pytest.approx(out.cost) and budget.reserved == 0


async def test_an_answer_gemini_withheld_in_a_batch_job_is_an_error_not_asked_live(
        make_model, server):
    """In a job, a withheld answer is that call's error, charged at the batch price: not
    sent again live (at the full price, to be withheld again)."""
    import asyncio

    from cycle.errors import MalformedResponseError
    from cycle.llm.batch import BatchSettings
    from cycle.llm.budget import Budget

    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, batch=BatchSettings(poll=0.02, window=0.05))
    server.enqueue(WITHHELD["finishReason SAFETY, no text"])
    got = await asyncio.gather(*(model.generate([Message.user(f"q{i}")]) for i in range(3)),
                               return_exceptions=True)
    assert isinstance(got[0], MalformedResponseError) and "finishReason SAFETY" in str(got[0])
    assert [o.text for o in got[1:]] == ["echo: q1", "echo: q2"]
    assert server.batches.created == 1 and server.request_count == 3  # none live
    blocked = model.pricing.cost(MODEL, Usage(input_tokens=1000, output_tokens=500)).usd
    assert budget.spent >= blocked / 2 and budget.spent < blocked  # at the batch price


async def test_a_batch_answer_without_usage_is_charged_its_max_tokens_of_thinking(
        make_model, server):
    import asyncio

    from cycle.llm.base import GenerateConfig
    from cycle.llm.batch import BatchSettings

    server.responder = Thinking(told=False)
    model = make_model(MODEL, batch=BatchSettings(poll=0.02, window=0.05),
                       config=GenerateConfig(max_tokens=300))
    outs = await asyncio.gather(*(model.generate([Message.user(f"q{i}")]) for i in range(2)))
    assert server.batches.created == 1
    assert all(o.usage.output_tokens == 300 and o.cost_estimated for o in outs)


async def test_a_negative_count_is_an_error_charged_as_its_worst_case(make_model, server):
    """The lie never lowers the spend, and the answer came back: charged as the most it may
    have cost, estimated (before: charged nothing)."""
    from cycle.errors import MalformedResponseError
    from cycle.llm.base import GenerateConfig
    from cycle.llm.budget import Budget

    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=100))
    server.enqueue(Fault.malformed(json.dumps({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]},
                        "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": -1000000, "candidatesTokenCount": 5}})))
    with pytest.raises(MalformedResponseError, match="cannot be negative"):
        await model.generate(HI)
    worst = model.pricing.cost(MODEL, Usage(input_tokens=1, output_tokens=100)).usd
    assert budget.spent >= worst and budget.estimated and budget.reserved == 0
    assert server.request_count == 1
