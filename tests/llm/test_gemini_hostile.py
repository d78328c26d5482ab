"""A hostile Gemini endpoint, through the real google-genai SDK on the loopback server: what
Gemini says in its own words (RetryInfo, finish reasons, blocked prompts) reaches cycle."""

from __future__ import annotations

import json
import time

import pytest

from cycle.errors import RateLimitError, RetriesExhaustedError
from cycle.records import Message
from cycle.testing import Fault

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
