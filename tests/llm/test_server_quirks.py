"""What real OpenAI-compatible servers do (OpenRouter, LiteLLM, Ollama, vLLM, llama.cpp),
through the real openai SDK on the loopback server, and cycle's answer to each: an error
of the call saying what the server said, or an answer read as the server meant it."""

from __future__ import annotations

import asyncio
import json

import pytest

from cycle.errors import BadRequestError, RetriesExhaustedError
from cycle.llm.base import GenerateConfig, ProviderOptions
from cycle.llm.budget import Budget
from cycle.llm.model import ModelServices
from cycle.llm.registry import get_model
from cycle.records import Message, ToolDef, Usage
from cycle.testing import Fault

MODEL = "openai:gpt-4o-mini"
HI = [Message.user("hi")]
KEY = "sk-compat-secret-key-1234567890"
TOOLS = [ToolDef(name="f", description="a tool", parameters={"type": "object"})]


def completion(message: dict, finish: str | None = "stop", *,
               usage: object = None) -> Fault:
    body: dict = {"id": "c1", "object": "chat.completion", "model": "gpt-4o-mini",
                  "choices": [{"index": 0, "finish_reason": finish,
                               "message": {"role": "assistant", **message}}]}
    body["usage"] = usage or {"prompt_tokens": 10, "completion_tokens": 5}
    return Fault.malformed(json.dumps(body))


def error_in_200(code: object, message: str) -> Fault:
    return Fault.malformed(json.dumps({"error": {"message": message, "code": code}}))


def error_event(code: object, message: str, *, after: str = "") -> Fault:
    """A stream whose event is the server's error (after a chunk of text, if given)."""
    events = ""
    if after:
        events += "data: " + json.dumps({"id": "c1", "choices": [
            {"index": 0, "delta": {"content": after}, "finish_reason": None}]}) + "\n\n"
    events += "data: " + json.dumps({"error": {"message": message, "code": code}}) + "\n\n"
    return Fault.malformed(events)


def mislabelled(kind: str):
    """``error_in_200``'s body labelled ``kind``: a server answering a stream with JSON."""
    def fault(code: object, message: str) -> Fault:
        return Fault.malformed(error_in_200(code, message).body, content_type=kind)
    return fault


#: how the error comes: a plain call's body, a stream's event, or a streamed call's whole
#: body as plain JSON (``application/json``, no event: a gateway failing before it
#: streams), or as JSON labelled as events or as text
WAYS = {"plain": (False, error_in_200), "streamed": (True, error_event),
        "streamed-json-body": (True, error_in_200),
        "streamed-json-as-events": (True, mislabelled("text/event-stream")),
        "streamed-json-as-text": (True, mislabelled("text/plain; charset=utf-8"))}
#: what a server answering a stream with a JSON body labels it
LABELS = ["application/json", "text/event-stream", "text/event-stream; charset=utf-8",
          "text/plain"]


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("code", [429, 503, "502", None])
async def test_a_transient_error_in_a_200_is_retried_and_not_charged(
        code, way, make_model, server):
    """OpenRouter and gateways answer 200 with ``{"error": {...}}`` (in the body, or as a
    stream's event). Before: the body was "not a chat completion" (never retried, charged
    the worst case), and a stream's error event escaped as the SDK's bare APIError; a
    streamed call answered with the JSON body had "no chat completion chunk" (never
    retried, charged the worst case)."""
    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=100))
    streamed, fault = WAYS[way]
    model.api.guard_max_tokens = streamed
    server.enqueue(fault(code, "Rate limit exceeded upstream"), "whole")
    out = await model.generate(HI)
    assert out.text == "whole" and server.request_count == 2
    assert budget.spent == pytest.approx(out.cost) and not out.cost_estimated


@pytest.mark.parametrize("way", list(WAYS))
async def test_a_lasting_error_in_a_200_says_the_servers_words_key_masked(
        way, make_model, server):
    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, options={"api_key": KEY},
                       config=GenerateConfig(max_tokens=100))
    streamed, fault = WAYS[way]
    model.api.guard_max_tokens = streamed
    server.enqueue(fault(402, f"Insufficient credits for key {KEY}"))
    with pytest.raises(BadRequestError) as e:
        await model.generate(HI)
    said = str(e.value)
    assert said.startswith("openai:gpt-4o-mini answered HTTP 200 with an error (code 402): "
                           "Insufficient credits"), said
    assert KEY not in said and KEY not in (e.value.body or "")
    assert server.request_count == 1 and budget.spent == 0 and budget.reserved == 0


async def test_an_error_event_after_the_answer_began_is_charged_then_asked_again(
        make_model, server):
    """Streamed, an upstream failing midway: what was generated may be billed."""
    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=100))
    server.enqueue(error_event(500, "upstream died", after="Dear Ann"), "whole")
    out = await model.generate(HI)
    assert out.text == "whole" and server.request_count == 2
    lost = model.pricing.cost(MODEL, Usage(input_tokens=1, output_tokens=100)).usd
    assert out.cost >= lost and budget.spent == pytest.approx(out.cost)


async def labelled_json(payload: bytes, kind: str = "application/json",
                        ) -> tuple[object, list[dict], Budget]:
    """A streamed call (under a cap) to a raw server answering ``payload`` labelled
    ``kind``, as it is: the answer, or the error, what was asked, and the budget."""
    asked: list[dict] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        asked.append(json.loads(await reader.readexactly(length)))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: " + kind.encode() + b"\r\nContent-Length: "
                     + str(len(payload)).encode() + b"\r\nConnection: close\r\n\r\n" + payload)
        await writer.drain()
        writer.close()

    raw = await asyncio.start_server(answer, "127.0.0.1", 0)
    budget = Budget(1.0)
    try:
        port = raw.sockets[0].getsockname()[1]
        model = get_model(MODEL, ModelServices(budget=budget),
                          options=ProviderOptions(base_url=f"http://127.0.0.1:{port}/v1"),
                          config=GenerateConfig(max_tokens=100))
        model.api.guard_max_tokens = True
        try:
            out: object = await model.generate(HI)
        except Exception as e:  # noqa: BLE001 - the test reads it
            out = e
        finally:
            await model.aclose()
    finally:
        raw.close()
    return out, asked, budget


@pytest.mark.parametrize("kind", LABELS)
async def test_a_streamed_call_answered_with_a_whole_completion_takes_it(kind):
    """A server that ignores ``stream`` and answers the JSON completion, whatever it labels
    it: its answer, read once (before: "no chat completion chunk", charged the worst case;
    labelled as JSON, since the fix that read it once; labelled as events or text, since
    the stream's decoder keeps a JSON body, cycle.llm.sse)."""
    out, asked, budget = await labelled_json(completion({"content": "whole"}).body.encode(),
                                             kind)
    assert [a.get("stream") for a in asked] == [True]
    assert out.text == "whole" and out.usage.output_tokens == 5 and not out.cost_estimated
    assert budget.spent == pytest.approx(out.cost)


async def test_events_labelled_as_json_are_read_as_events():
    """A server streaming its events as ``application/json``: the events are the answer
    (cycle reads the body to look for a JSON error; the events it finds are read)."""
    events = "".join("data: " + json.dumps(c) + "\n\n" for c in (
        {"id": "c1", "model": "gpt-4o-mini",
         "choices": [{"index": 0, "delta": {"content": "Dear "}, "finish_reason": None}]},
        {"id": "c1", "choices": [{"index": 0, "delta": {"content": "Ann"},
                                  "finish_reason": "stop"}]},
        {"id": "c1", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
    )) + "data: [DONE]\n\n"
    out, asked, budget = await labelled_json(events.encode())
    assert out.text == "Dear Ann" and out.usage.output_tokens == 2, out
    assert len(asked) == 1 and budget.spent == pytest.approx(out.cost)


@pytest.mark.parametrize("written", ["indented", "after-blank-lines", "long"])
async def test_a_whole_completion_labelled_as_events_is_read_however_written(
        written, make_model, server):
    """A JSON body where the events should be, labelled as them: pretty-printed (lines
    the event decoder reads and drops), after blank lines, or longer than one read."""
    text = "Dear Ann, " * 10_000 if written == "long" else "whole"
    body = json.loads(completion({"content": text}, usage={
        "prompt_tokens": 10, "completion_tokens": 30_000 if written == "long" else 5}).body)
    raw = json.dumps(body, indent=2 if written == "indented" else None)
    if written == "after-blank-lines":
        raw = "\n\n  " + raw
    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=40_000))
    model.api.guard_max_tokens = True
    server.enqueue(Fault.malformed(raw, content_type="text/event-stream"))
    out = await model.generate(HI)
    assert out.text == text and server.request_count == 1 and not out.cost_estimated
    assert budget.spent == pytest.approx(out.cost)


async def test_a_body_labelled_as_events_that_is_neither_says_so(make_model, server):
    """Not JSON and no event (an HTML page labelled as events): no answer, as before."""
    model = make_model(MODEL, config=GenerateConfig(max_tokens=100))
    model.api.guard_max_tokens = True
    server.enqueue(Fault.malformed("<html>Bad gateway</html>", content_type="text/event-stream"))
    with pytest.raises(Exception, match="no chat completion chunk in its body "
                                        r"\(text/event-stream\)"):
        await model.generate(HI)


async def test_retries_of_an_error_in_a_200_are_bounded(make_model, server):
    model = make_model(MODEL)
    server.enqueue(*[error_in_200(503, "overloaded")] * 3)
    with pytest.raises(RetriesExhaustedError, match="all 3 attempts failed; last: .*overloaded"):
        await model.generate(HI)


def test_a_run_whose_gateway_answers_errors_in_200s_errs_naming_them(tmp_path, monkeypatch):
    """`cycle run` through a gateway that answers each of the agent's calls 200 with an
    error (OpenRouter's out of credits): errors of their iterations with the gateway's
    words, never cases judged on an empty answer, the key nowhere."""
    from tests.llm.withheld import run_withheld

    def broke(request):
        if request.schema is not None:
            return None
        fault = error_event if request.body.get("stream") else error_in_200
        return fault(402, f"Insufficient credits (key {KEY})")

    r, requests = run_withheld(tmp_path, monkeypatch, "openai", f"OPENAI_API_KEY={KEY}", broke)
    assert "0 passed, 0 failed, 3 errored" in r.output, r.output
    assert r.output.count("answered HTTP 200 with an error (code 402): Insufficient") == 3, \
        r.output
    assert KEY not in r.output and all(req.schema is None for req in requests)
    assert len(requests) == 3  # not retried: asking again cannot bring credit


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_tool_arguments_sent_as_an_object_are_taken(streamed, make_model, server):
    """Ollama (some versions) sends ``arguments`` as an object, not a JSON string. Before:
    "arguments that are not valid JSON", and streamed, a bare TypeError."""
    model = make_model(MODEL, config=GenerateConfig(max_tokens=100))
    model.api.guard_max_tokens = streamed
    server.enqueue(completion({"content": None, "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
        "tool_calls"))
    out = await model.generate(HI, tools=TOOLS)
    assert [(c.id, c.name, c.arguments) for c in out.tool_calls] == [("t1", "f", {"a": 1})]


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_tool_calls_without_ids_or_with_one_twice_get_distinct_ids(
        streamed, make_model, server):
    """No ``id`` (Ollama), the same id twice, no ``type``: each call keeps a distinct id,
    so each result goes back under its own call's (before: "" for every call)."""
    model = make_model(MODEL, config=GenerateConfig(max_tokens=100))
    model.api.guard_max_tokens = streamed
    server.enqueue(completion({"content": None, "tool_calls": [
        {"function": {"name": "f", "arguments": "{}"}},
        {"id": "0", "type": "function", "function": {"name": "f", "arguments": '{"b": 2}'}},
        {"id": "0", "type": "function", "function": {"name": "f", "arguments": '{"c": 3}'}}]},
        "tool_calls"))
    out = await model.generate(HI, tools=TOOLS)
    ids = [c.id for c in out.tool_calls]
    assert len(set(ids)) == 3 and "" not in ids and ids[1] == "0"
    assert [c.arguments for c in out.tool_calls] == [{}, {"b": 2}, {"c": 3}]


THOUGHT = "Let me think about this step by step. " * 100  # 3,800 bytes


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_is_never_the_answer_and_is_charged_when_uncounted(
        field, make_model, server):
    """vLLM and DeepSeek send ``reasoning_content``, OpenRouter ``reasoning``, beside the
    answer: the judged answer is the content alone; with no usage, the reasoning's bytes
    count as output up to max_tokens (before: the answer's 3 bytes alone were charged)."""
    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=500))
    model.api.guard_max_tokens = False
    server.enqueue(Fault.malformed(json.dumps({"id": "c1", "model": "gpt-4o-mini", "choices": [
        {"index": 0, "finish_reason": "stop",
         "message": {"role": "assistant", "content": "Yes", field: THOUGHT}}]})))
    out = await model.generate(HI)
    assert out.text == "Yes" and "step by step" not in json.dumps(out.model_dump(
        exclude={"raw_response"}))
    assert out.usage.output_tokens == 500 and out.cost_estimated
    assert budget.spent == pytest.approx(out.cost)


async def test_streamed_reasoning_counts_toward_the_cut(make_model, server):
    """A server that ignores max_tokens while it reasons, streamed under a cap: its
    reasoning chunks count toward the cut (before: only the content's did, so a model
    reasoning on was read to the end and settled past its reservation)."""
    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, config=GenerateConfig(max_tokens=50))
    chunk = {"id": "c1", "choices": [{"index": 0, "delta": {"reasoning_content": "hmm "},
                                      "finish_reason": None}]}
    events = ("data: " + json.dumps(chunk) + "\n\n") * 2000
    events += "data: " + json.dumps({"id": "c1", "choices": [], "usage": {
        "prompt_tokens": 10, "completion_tokens": 2000}}) + "\n\n"
    server.enqueue(Fault.malformed(events))
    out = await model.generate(HI)
    assert out.finish_reason == "length" and out.text == ""
    assert out.usage.output_tokens <= 50 + 16  # the reservation, CUT_SLACK beyond
    assert budget.spent == pytest.approx(out.cost) and budget.reserved == 0


def _http_date(seconds_from_now: float) -> str:
    import email.utils
    import time

    return email.utils.formatdate(time.time() + seconds_from_now, usegmt=True)


@pytest.mark.parametrize("retry_after", ["1e9", "hour"], ids=["1e9 s", "an HTTP date"])
async def test_a_retry_after_too_long_fails_at_once_saying_how_long(
        retry_after, make_model, server):
    """An absurd wait (1e9 s) or an HTTP date an hour ahead: the call fails at once with
    the wait asked and cycle's bound, never sleeps on it."""
    model = make_model(MODEL)
    said = _http_date(3600) if retry_after == "hour" else retry_after
    server.enqueue(Fault.status(503, retry_after=said), "never reached")
    with pytest.raises(RetriesExhaustedError, match=r"asked to wait \d+(\.\d+)?(e\+\d+)? s"):
        await model.generate(HI)
    assert server.request_count == 1


async def test_a_retry_after_date_in_the_past_is_retried_at_once(make_model, server):
    model = make_model(MODEL)
    server.enqueue(Fault.status(503, retry_after=_http_date(-60)), "whole")
    out = await model.generate(HI)
    assert out.text == "whole" and server.request_count == 2


async def test_a_503_then_an_answer_on_fresh_connections_is_charged_once(
        make_model, server, recorder):
    """A server that closes its connection after every answer (Connection: close), and
    answers 503 first: one call, 2 attempts, charged the answer alone."""
    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget, bus=recorder.bus,
                       options={"extra": {"headers": {"Connection": "close"}}})
    model.api.guard_max_tokens = False
    server.enqueue(Fault.status(503), completion({"content": "whole"}), "again")
    assert (await model.generate(HI)).text == "whole"
    assert (await model.generate(HI)).text == "again"
    first = recorder.calls[0]
    assert first.attempts == 2 and server.request_count == 3
    price = model.pricing.cost(MODEL, Usage(input_tokens=10, output_tokens=5)).usd
    assert first.cost == pytest.approx(price) and not first.cost_estimated
    assert budget.spent == pytest.approx(sum(c.cost for c in recorder.calls))


async def test_an_answer_from_another_model_is_recorded_and_priced_as_asked(
        make_model, server):
    """A gateway routing elsewhere: the model it names is kept on the answer (the
    transcript and the call journal show it); the call is priced as the model asked for,
    whose price the budget reserved (a server's claim never lowers a charge)."""
    model = make_model(MODEL)
    server.enqueue(Fault.malformed(json.dumps({"id": "c1", "model": "gpt-3.5-turbo", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "x"}}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 1000}})))
    out = await model.generate(HI)
    assert out.model == "openai:gpt-3.5-turbo"
    asked = model.pricing.cost(MODEL, Usage(input_tokens=1000, output_tokens=1000)).usd
    assert out.cost == pytest.approx(asked)


async def test_a_router_without_a_price_is_priced_as_the_model_it_routed_to(make_model, server):
    """OpenRouter's `openrouter/auto` has no price of its own: the answer names the model
    it routed to, whose price is known. Before, the call was priced by the fallback's
    guess, marked estimated."""
    model = make_model("openai:openrouter/auto")
    server.enqueue(Fault.malformed(json.dumps({"id": "c1", "model": "gpt-4o", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "x"}}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 1000}})))
    out = await model.generate(HI)
    routed = model.pricing.cost("openai:gpt-4o", Usage(input_tokens=1000, output_tokens=1000))
    assert not routed.estimated and out.cost == pytest.approx(routed.usd)
    assert not out.cost_estimated


SCORE = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
JUDGED = {
    "prose": "The answer is good, I'd give it 4.",
    "JSON then text": '{"score": 4}\n\nI hope this helps!',
    "cut mid-JSON": completion({"content": '{"score": '}, "length"),
}


@pytest.mark.parametrize("says", list(JUDGED))
async def test_a_judges_answer_that_ignores_the_format_is_an_error_never_a_score(
        says, make_model, server):
    """A server ignoring ``response_format`` (prose), JSON followed by prose (a small model
    without a grammar), JSON cut by max_tokens: asked again with the schema in the prompt,
    repaired once, then an error of the judge naming why; never a parsed score."""
    from cycle.errors import StructuredOutputError

    model = make_model(MODEL)
    server.enqueue(*[JUDGED[says]] * 3)
    with pytest.raises(StructuredOutputError, match="does not follow the schema"):
        await model.generate_structured(HI, SCORE)
    assert server.request_count == 3


async def test_a_judges_json_in_a_fence_is_parsed_exactly(make_model, server):
    model = make_model(MODEL)
    server.enqueue('```json\n{"score": 4}\n```')
    out = await model.generate_structured(HI, SCORE)
    assert out.parsed == {"score": 4} and server.request_count == 1


@pytest.mark.parametrize("code", [502, None])
async def test_an_answer_ending_with_finish_reason_error_is_charged_and_asked_again(
        code, make_model, server):
    """OpenRouter, its upstream failing mid-answer and not streamed: a 200 whose choice
    ends with finish_reason "error", the error beside it, and the part that came before.
    Before, that part was the answer, judged as a whole one."""
    budget = Budget(1.0)
    model = make_model(MODEL, budget=budget)
    failed = json.loads(completion({"content": "Dear Ann, your ord"}, "error").body)
    if code is not None:
        failed["choices"][0]["error"] = {"code": code, "message": "Upstream provider failed"}
    server.enqueue(Fault.malformed(json.dumps(failed)), "whole")
    out = await model.generate(HI)
    assert out.text == "whole" and server.request_count == 2
    first = model.pricing.cost(MODEL, Usage(input_tokens=10, output_tokens=5)).usd
    assert out.cost > first and budget.spent == pytest.approx(out.cost)  # the part is paid


async def test_an_answer_ending_with_a_lasting_error_is_an_error_naming_it(make_model, server):
    model = make_model(MODEL)
    failed = json.loads(completion({"content": "Dear Ann"}, "error").body)
    failed["error"] = {"code": 400, "message": "Context length exceeded upstream"}
    server.enqueue(Fault.malformed(json.dumps(failed)))
    with pytest.raises(Exception, match="answer ended with the server's error: .*Context length"):
        await model.generate(HI)
    assert server.request_count == 1
