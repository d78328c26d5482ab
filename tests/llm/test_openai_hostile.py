"""A hostile OpenAI or OpenAI-compatible endpoint, through the real openai SDK on the
loopback server: an answer withheld is an error naming why, an answer that cannot be read
is charged, and no call is free when the server lies about its usage."""

from __future__ import annotations

import json

import pytest

from cycle.errors import MalformedResponseError
from cycle.llm.base import GenerateConfig
from cycle.llm.budget import Budget
from cycle.records import Message, Usage
from cycle.testing import Fault
from tests.llm.withheld import (
    answer_withheld,
    judge_withheld,
    replayed_not_paid_again,
    run_withheld,
)

MODEL = "openai:gpt-4o-mini"
HI = [Message.user("hi")]
USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}


def completion(message: dict | None = None, finish: str | None = "stop", *,
               usage: object = USAGE, choices: list | None = None) -> Fault:
    body: dict = {"id": "c1", "object": "chat.completion", "model": "gpt-4o-mini"}
    if choices is not None:
        body["choices"] = choices
    else:
        body["choices"] = [{"index": 0, "finish_reason": finish,
                            "message": {"role": "assistant", **(message or {})}}]
    if usage is not None:
        body["usage"] = usage
    return Fault.malformed(json.dumps(body))


WITHHELD = {
    "finish_reason content_filter, no text": completion({"content": None}, "content_filter"),
    "finish_reason content_filter, no text (empty)": completion({"content": ""}, "content_filter"),
    "the chat completion has no choices": completion(choices=[]),
}


@pytest.mark.parametrize("says", list(WITHHELD))
async def test_an_answer_the_server_withheld_is_an_error_naming_why_and_is_charged(
        says, make_model, server, recorder):
    """Before: a filtered answer was an empty answer judged as the model's (a silent 0),
    and no choices was an error charged nothing."""
    await answer_withheld(make_model, MODEL, server, recorder, WITHHELD[says],
                          says.removesuffix(" (empty)"))


ANSWERS = {
    "length": completion({"content": "Dear Ann, your or"}, "length"),
    "length, no text": completion({"content": ""}, "length"),
    "refusal": completion({"content": None, "refusal": "I can't help with that."}, "stop"),
    "content_filter after text": completion({"content": "The first verse is"},
                                            "content_filter"),
}


@pytest.mark.parametrize("says", list(ANSWERS))
async def test_answers_the_model_ended_are_judged_answers(says, make_model, server):
    """A cut by the call's own max_tokens, and the model's own refusal (OpenAI's
    structured-output ``refusal``), are what this version of the prompt produced."""
    model = make_model(MODEL)
    server.enqueue(ANSWERS[says])
    out = await model.generate(HI)
    assert out.finish_reason in ("length", "refusal", "content_filter")


UNREADABLE = {
    "arguments that are not valid JSON": completion({"content": None, "tool_calls": [
        {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]},
        "tool_calls"),
    "Unterminated string": Fault.malformed(
        '{"id": "c1", "choices": [{"message": {"content": "Dear Ann, your or'),
    "Expecting value": Fault.malformed("<html><body>502 Bad Gateway</body></html>"),
    "not a chat completion": Fault.malformed("[1, 2]"),
    "prompt_tokens = -5": completion({"content": "hi"}, usage={
        "prompt_tokens": -5, "completion_tokens": 1}),
}


@pytest.mark.parametrize("says", list(UNREADABLE))
async def test_an_answer_that_cannot_be_read_is_a_one_line_error_charged_to_the_cap(
        says, make_model, server, recorder):
    """Before: charged nothing although it came back (the server may bill it)."""
    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, bus=recorder.bus,
                       config=GenerateConfig(max_tokens=100))
    model.api.guard_max_tokens = False  # not streamed: the plain call
    server.enqueue(UNREADABLE[says])
    with pytest.raises(MalformedResponseError) as e:
        await model.generate(HI)
    assert says in str(e.value) and "\n" not in str(e.value)
    worst = model.pricing.cost(MODEL, Usage(input_tokens=1, output_tokens=100)).usd
    assert budget.spent >= worst and budget.estimated and budget.reserved == 0
    assert recorder.calls[-1].cost == pytest.approx(budget.spent)


async def test_a_streamed_200_without_a_chunk_is_charged(make_model, server, recorder):
    """Streamed under a cap (a compatible server, max_tokens set): an HTML page or JSON
    where the stream should be is an error, and it came back: charged (before: nothing)."""
    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, bus=recorder.bus,
                       config=GenerateConfig(max_tokens=100))
    server.enqueue(Fault.malformed("<html><body>502 Bad Gateway</body></html>"))
    with pytest.raises(MalformedResponseError, match="no chat completion chunk"):
        await model.generate(HI)
    worst = model.pricing.cost(MODEL, Usage(input_tokens=1, output_tokens=100)).usd
    assert budget.spent >= worst and budget.reserved == 0


async def test_an_answer_cut_on_its_way_is_charged_then_asked_again(make_model, server):
    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=100))
    model.api.guard_max_tokens = False  # not streamed: the plain call
    server.enqueue(Fault.cut("a long answer " * 20), "whole")
    out = await model.generate(HI)
    assert out.text == "whole" and server.request_count == 2
    lost = model.pricing.cost(MODEL, Usage(input_tokens=1, output_tokens=100)).usd
    assert out.cost >= lost and out.cost_estimated
    assert budget.spent == pytest.approx(out.cost) and budget.reserved == 0


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    {"prompt_tokens": 0, "completion_tokens": 5, "total_tokens": 5},
], ids=["zeros", "prompt zero"])
async def test_a_count_of_zero_tokens_is_not_a_free_call(usage, make_model, server):
    model = make_model(MODEL)
    server.enqueue(completion({"content": "a real answer"}, usage=usage))
    out = await model.generate(HI)
    assert out.cost > 0 and out.cost_estimated


async def test_a_key_echoed_in_an_unreadable_answer_is_masked_whole(make_model, server):
    key = "k" * 250 + "-secret-openai-key-1234567890"
    model = make_model(MODEL, options={"api_key": key})
    server.enqueue(Fault.malformed(json.dumps({"detail": f"bad key {key}"})))
    with pytest.raises(MalformedResponseError) as e:
        await model.generate(HI)
    assert "kkkkkkkkkk" not in str(e.value) and "\n" not in str(e.value)


async def test_a_key_echoed_in_tool_arguments_that_are_not_json_is_masked_whole(
        make_model, server):
    key = "k" * 250 + "-secret-openai-key-1234567890"
    model = make_model(MODEL, options={"api_key": key})
    server.enqueue(completion({"content": None, "tool_calls": [
        {"id": "t", "type": "function", "function": {"name": "f", "arguments": f"{{{key}"}}]},
        "tool_calls"))
    with pytest.raises(MalformedResponseError, match="not valid JSON") as e:
        await model.generate(HI)
    assert "kkkkkkkkkk" not in str(e.value)


@pytest.mark.parametrize("reply", [
    {"text": "", "finish_reason": "content_filter"},
    {"text": "a real answer", "usage": {"prompt_tokens": 0, "completion_tokens": 0,
                                        "total_tokens": 0}},
], ids=["withheld", "zeros"])
async def test_streamed_under_a_cap_the_same_promises_hold(reply, make_model, server):
    """A compatible server is streamed under a cap with max_tokens: the stream's answer goes
    through the same reading (withheld is an error; zero counts are not free)."""
    from cycle.testing import Reply

    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=100))
    server.enqueue(Reply(**reply))
    if reply["text"]:
        out = await model.generate(HI)
        assert out.cost > 0 and out.cost_estimated
    else:
        with pytest.raises(MalformedResponseError, match="no answer, finish_reason content_f"):
            await model.generate(HI)
        assert budget.spent > 0
    assert server.requests[-1].body["stream"] is True and budget.reserved == 0


def _filtered(request):
    """The agent's answers kept back by the content filter (a Reply: streamed or not, as
    the project's settings say); the judge's are not asked for."""
    from cycle.testing import Reply

    return Reply(text="", finish_reason="content_filter") if request.schema is None else None


def test_a_run_whose_agent_is_filtered_errs_naming_it_never_scores_it(tmp_path, monkeypatch):
    """`cycle run` on the openai project: the agent's answers kept back by the server's
    content filter are errors of their iterations, the reason on the case's row, not
    failed cases (before: 3 cases judged on an empty answer)."""
    r, requests = run_withheld(tmp_path, monkeypatch, "openai",
                               "OPENAI_API_KEY=sk-test-key-from-dotenv", _filtered)
    assert "0 passed, 0 failed, 3 errored" in r.output, r.output
    assert r.output.count("no answer, finish_reason content_filter, no text") == 3, r.output
    assert all(req.schema is None for req in requests)  # nothing was judged


def test_a_resumed_run_replays_the_filtered_answers_it_paid_for(tmp_path, monkeypatch):
    """`cycle run`, every agent answer filtered, then `cycle run --resume`: the errored
    iterations are run again, and each filtered call is answered from the call journal with
    the same error. Before: the resume sent the three calls again (6 requests), paid for
    the same refusals twice, and the run's cost counted both."""
    runs, requests = run_withheld(tmp_path, monkeypatch, "openai",
                                  "OPENAI_API_KEY=sk-test-key-from-dotenv", _filtered,
                                  resume=True)
    replayed_not_paid_again(tmp_path, runs, requests,
                            "no answer, finish_reason content_filter, no text")


STREAMED = {
    "arguments that are not valid JSON": UNREADABLE["arguments that are not valid JSON"],
    "prompt_tokens = -5": UNREADABLE["prompt_tokens = -5"],
    "usage as text": completion({"content": "a real answer"}, usage={
        "prompt_tokens": "1000", "completion_tokens": "500"}),
    "usage as fractions": completion({"content": "a real answer"}, usage={
        "prompt_tokens": 0.5, "completion_tokens": 0.5}),
    "no usage": completion({"content": "a real answer"}, usage=None),
}


@pytest.mark.parametrize("says", list(STREAMED))
async def test_streamed_an_answer_whose_counts_or_arguments_lie_is_charged(
        says, make_model, server):
    """The loopback server streams a scripted completion as events, its usage as it is."""
    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=100))
    server.enqueue(STREAMED[says])
    try:
        out = await model.generate(HI)
    except MalformedResponseError as e:
        assert says in str(e) and "\n" not in str(e)
    else:
        assert out.text == "a real answer" and out.cost_estimated
    assert server.requests[-1].body["stream"] is True and server.request_count == 1
    assert budget.spent > 0 and budget.estimated and budget.reserved == 0


@pytest.mark.parametrize("lie", ["negative", "arguments", "html", "filtered", "zeros"])
@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_calls_racing_the_cap_never_pass_it_and_none_is_free(
        lie, streamed, make_model, server, recorder):
    """16 in flight against a small cap, each answered with a lie: the recorded spend never
    passes the cap, and every call that came back is charged something."""
    import asyncio

    from cycle.errors import BudgetExceededError, CycleError

    def bodies(request):
        sent = sum(len(str(m.get("content") or "")) for m in request.messages)
        if lie == "negative":
            return completion({"content": "fine"}, usage={"prompt_tokens": -sent,
                                                          "completion_tokens": 1})
        if lie == "arguments":
            return completion({"content": None, "tool_calls": [{"id": "t", "type": "function",
                               "function": {"name": "f", "arguments": "{oops"}}]}, "tool_calls")
        if lie == "html":
            return Fault.malformed("<html><body>502 Bad Gateway</body></html>")
        if lie == "filtered":
            return completion({"content": ""}, "content_filter", usage={
                "prompt_tokens": sent, "completion_tokens": 0})
        return completion({"content": "fine"}, usage={"prompt_tokens": 0,
                                                      "completion_tokens": 0})

    server.responder = bodies
    cap = 0.0005
    budget = Budget(cap)
    model = make_model(MODEL, budget=budget, bus=recorder.bus,
                       config=GenerateConfig(max_tokens=64), options={"max_connections": 16})
    model.api.guard_max_tokens = streamed

    async def one(i: int) -> bool:
        try:
            await model.generate([Message.user(f"hi {i}")], iteration=i)
        except BudgetExceededError:
            return False
        except CycleError:
            pass
        return True

    came = await asyncio.gather(*(one(i) for i in range(400)))
    assert sum(came) >= 10
    if lie != "filtered":  # an honest count of a few tokens a call never reaches the cap
        assert not all(came)  # real calls reached the cap, and it stopped them
    assert budget.spent <= cap and budget.reserved == 0
    paid = [c for c in recorder.calls if c.attempts]
    assert paid and all(c.cost > 0 for c in recorder.calls if not c.cache_hit), lie


async def test_an_answer_withheld_in_a_batch_job_is_an_error_not_asked_live(make_model, server):
    """In an OpenAI batch job, a filtered answer is that call's error, charged at the batch
    price: not sent again live."""
    import asyncio

    from cycle.llm.batch import BatchSettings

    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, batch=BatchSettings(poll=0.02, window=0.05))
    server.enqueue(WITHHELD["finish_reason content_filter, no text"])
    got = await asyncio.gather(*(model.generate([Message.user(f"q{i}")]) for i in range(3)),
                               return_exceptions=True)
    assert isinstance(got[0], MalformedResponseError), got
    assert "finish_reason content_filter" in str(got[0])
    assert [o.text for o in got[1:]] == ["echo: q1", "echo: q2"]
    assert server.batches.created == 1 and server.request_count == 3  # none live
    filtered = model.pricing.cost(MODEL, Usage(input_tokens=1000, output_tokens=500)).usd
    assert budget.spent >= filtered / 2 and budget.spent < filtered  # at the batch price


async def test_a_page_where_json_should_be_is_named_in_one_line_key_masked(make_model, server):
    """Before: 'Expecting value: line 1 column 1 (char 0)', nothing of what was sent."""
    key = "k" * 150 + "-secret-openai-key-1234567890"
    model = make_model(MODEL, options={"api_key": key})
    server.enqueue(Fault.malformed(f"<html>\n<body>502 Bad Gateway\n{key}</body></html>"))
    with pytest.raises(MalformedResponseError) as e:
        await model.generate(HI)
    said = str(e.value)
    assert "<html> <body>502 Bad Gateway" in said and "\n" not in said
    assert "kkkkkkkkkk" not in said and len(said) < 600


async def test_a_judges_filtered_answer_is_named_not_a_schema_error(make_model, server):
    await judge_withheld(make_model(MODEL), server, WITHHELD["finish_reason content_filter, no text"], "finish_reason content_filter")
