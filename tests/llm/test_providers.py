"""The openai and google-genai SDKs, through Model, against the loopback server."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from cycle.errors import StructuredOutputError
from cycle.llm.base import GenerateConfig
from cycle.records import Message, ToolDef
from cycle.testing import Reply

PROVIDERS = ["openai:gpt-4o-mini", "gemini:gemini-2.5-flash"]

WEATHER = ToolDef(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


class Verdict(BaseModel):
    score: int = Field(ge=0, le=100)
    reasoning: str


VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["good", "bad"]}, "n": {"type": "integer"}},
    "required": ["label", "n"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("name", PROVIDERS)
async def test_text_with_system_prompt_and_usage(name, make_model, server):
    model = make_model(name)
    server.enqueue(Reply(text="Bonjour!", input_tokens=120, cached_tokens=100, output_tokens=7))

    out = await model.generate([Message.system("Answer in French."), Message.user("Hello")])

    assert out.text == "Bonjour!"
    assert out.finish_reason == "stop"
    assert (out.usage.input_tokens, out.usage.cached_input_tokens, out.usage.output_tokens) == (
        120, 100, 7)
    assert out.cost > 0 and not out.cost_estimated and not out.cache_hit
    assert out.raw_request is not None and out.raw_response is not None
    sent = server.requests[-1]
    assert sent.system == "Answer in French."
    assert sent.last_user == "Hello"
    await model.aclose()


@pytest.mark.parametrize("name", PROVIDERS)
async def test_generation_config_reaches_the_wire(name, make_model, server):
    model = make_model(name)
    await model.generate([Message.user("hi")],
                         config=GenerateConfig(temperature=0.2, max_tokens=50, seed=7))
    body = server.requests[-1].body
    if name.startswith("openai"):
        assert body["temperature"] == 0.2 and body["seed"] == 7
        # a compatible server (not api.openai.com) gets the widely supported max_tokens
        assert body["max_tokens"] == 50
    else:
        gen = body["generationConfig"]
        assert gen["temperature"] == 0.2 and gen["maxOutputTokens"] == 50 and gen["seed"] == 7


@pytest.mark.parametrize("name", PROVIDERS)
async def test_tool_call_round_trip(name, make_model, server):
    model = make_model(name)
    server.enqueue(Reply(tool_calls=[("get_weather", {"city": "Paris"})]), "It is sunny in Paris.")

    first = await model.generate([Message.user("Weather in Paris?")], tools=[WEATHER])
    assert first.finish_reason == "tool_calls"
    [call] = first.tool_calls
    assert (call.name, call.arguments) == ("get_weather", {"city": "Paris"})
    assert call.id
    assert server.requests[-1].tools == ["get_weather"]

    history = [
        Message.user("Weather in Paris?"),
        Message.assistant("", first.tool_calls),
        Message.tool('{"sky": "sunny"}', tool_call_id=call.id, name="get_weather"),
    ]
    second = await model.generate(history, tools=[WEATHER])
    assert second.text == "It is sunny in Paris."
    received = server.requests[-1].messages
    assert received[1]["tool_calls"] == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert received[2]["role"] == "tool" and "sunny" in received[2]["content"]


@pytest.mark.parametrize("name", PROVIDERS)
async def test_structured_output_with_pydantic_model(name, make_model, server):
    model = make_model(name)
    server.enqueue({"score": 85, "reasoning": "clear and correct"})

    out = await model.generate_structured([Message.user("Judge this")], Verdict, name="cycle_judge")

    assert out.parsed == Verdict(score=85, reasoning="clear and correct")
    schema = server.requests[-1].schema
    assert schema["properties"]["score"]["maximum"] == 100
    if name.startswith("openai"):
        fmt = server.requests[-1].body["response_format"]
        assert fmt["json_schema"]["name"] == "cycle_judge"
        assert fmt["json_schema"]["strict"] is True
    else:
        gen = server.requests[-1].body["generationConfig"]
        assert gen["responseMimeType"] == "application/json"
        # the schema travels as Gemini's response schema, not only as words in the prompt
        assert gen["responseJsonSchema"]["required"] == ["score", "reasoning"]


@pytest.mark.parametrize("name", PROVIDERS)
async def test_structured_output_with_dict_schema_default_answer(name, make_model, server):
    model = make_model(name)
    # nothing scripted: the server answers something valid for the schema
    out = await model.generate_structured([Message.user("label it")], VERDICT_SCHEMA)
    assert out.parsed == {"label": "good", "n": 1}


@pytest.mark.parametrize("name", PROVIDERS)
async def test_invalid_json_is_repaired_once(name, make_model, server, recorder):
    """A server that takes the schema (OpenAI's json_schema; the setting says so for a
    compatible one: in auto mode, cycle.llm.compat) and still answers badly."""
    fixed = {"options": {"extra": {"structured": "json_schema"}}} if "openai" in name else {}
    model = make_model(name, bus=recorder.bus, **fixed)
    server.enqueue("Sure! here it is: {score: 70}", {"score": 70, "reasoning": "fixed"})

    out = await model.generate_structured([Message.user("Judge")], Verdict)

    assert out.parsed.score == 70
    assert server.request_count == 2
    repair = server.requests[1].messages
    assert repair[-2]["role"] == "assistant" and repair[-2]["content"].startswith("Sure!")
    assert "does not follow the required JSON schema" in repair[-1]["content"]
    # both calls are reported and their usage is summed
    assert len(recorder.calls) == 2
    assert recorder.calls[0].error and "StructuredOutputError" in recorder.calls[0].error
    assert out.usage.output_tokens == sum(c.output_tokens for c in recorder.calls)


@pytest.mark.parametrize("name", PROVIDERS)
async def test_invalid_twice_is_a_structured_output_error(name, make_model, server):
    model = make_model(name)
    server.enqueue({"score": 150, "reasoning": "too high"}, {"score": -1, "reasoning": "too low"})

    with pytest.raises(StructuredOutputError) as info:
        await model.generate_structured([Message.user("Judge")], Verdict, name="verdict")

    assert "verdict" in str(info.value) and "score" in str(info.value)
    assert server.request_count == 2


@pytest.mark.parametrize("name", PROVIDERS)
def test_sync_facade(name, make_model, server):
    model = make_model(name)
    server.enqueue(Reply(text="from sync", input_tokens=50, cached_tokens=20, output_tokens=3))
    out = model.generate_sync([Message.user("hi")])
    assert out.text == "from sync"
    assert (out.usage.input_tokens, out.usage.cached_input_tokens, out.usage.output_tokens) == (50, 20, 3)
    server.enqueue({"score": 1, "reasoning": "r"})
    assert model.generate_structured_sync([Message.user("j")], Verdict).parsed.score == 1
    server.enqueue(Reply(tool_calls=[("get_weather", {"city": "Oslo"})]))
    [call] = model.generate_sync([Message.user("Weather in Oslo?")], tools=[WEATHER]).tool_calls
    assert (call.name, call.arguments) == ("get_weather", {"city": "Oslo"})
    # a second event loop gets its own client and semaphores
    assert model.generate_sync([Message.user("again")]).text == "echo: again"


@pytest.mark.parametrize("name", PROVIDERS)
async def test_models_on_one_endpoint_share_one_sdk_client(name, make_model, server):
    """The agent and the judge on one server use one SDK client (one connection pool);
    other settings get their own; the last model closed closes it."""
    agent, judge = make_model(name, role="agent"), make_model(name, role="judge")
    other = make_model(name, options={"timeout": 7.0})
    for m in (agent, judge, other):
        await m.generate([Message.user("hi")])
    assert agent.api._client() is judge.api._client()
    assert other.api._client() is not agent.api._client()
    shared = agent.api._client()
    await agent.aclose()
    assert judge.api._client() is shared  # still held by the judge
    await judge.aclose()
    await judge.generate([Message.user("again")])  # a new client, made on use
    assert judge.api._client() is not shared
    assert len(server.requests) == 4
