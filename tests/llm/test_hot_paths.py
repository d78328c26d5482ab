"""The per-call shortcuts keep behaviour: a shared client, cached schemas, the retry loop."""

from __future__ import annotations

from cycle.llm.registry import get_model
from cycle.llm.structured import schema_of, strict_schema
from cycle.records import Message
from cycle.testing import LoopbackServer


async def test_agent_and_judge_share_one_client_until_the_last_closes(make_model, server):
    agent = make_model("openai:gpt-4o-mini")
    judge = make_model("openai:gpt-4o-mini", role="judge")
    await agent.generate([Message.user("one")])
    await judge.generate([Message.user("two")])
    assert agent.api._client() is judge.api._client()
    await agent.aclose()
    # the judge's calls still work after the agent closed: the pool stays open
    out = await judge.generate([Message.user("three")])
    assert out.text == "echo: three"
    client = judge.api._client()
    await judge.aclose()
    assert client.is_closed()


async def test_models_on_different_servers_do_not_share(make_model, server):
    with LoopbackServer() as other:
        a = make_model("openai:gpt-4o-mini")
        b = get_model("openai:gpt-4o-mini", options=other.openai_options())
        await a.generate([Message.user("x")])
        await b.generate([Message.user("y")])
        assert a.api._client() is not b.api._client()
        assert other.request_count == 1 and server.request_count == 1
        await b.aclose()


def test_a_schema_changed_in_place_is_derived_again():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    first, _ = schema_of(schema)
    assert schema_of(schema)[0] is first  # cached: no copy per call
    assert strict_schema(first) is strict_schema(first)
    schema["properties"]["b"] = {"type": "integer"}
    second, validate2 = schema_of(schema)
    assert "b" in second["properties"] and "b" not in first["properties"]
    assert strict_schema(second) is None  # "b" is not required: cannot be strict
    assert validate2({"a": "x", "b": 1}) == {"a": "x", "b": 1}
