"""The scripted model: outputs in order, functions, exceptions, registry names."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from cycle.errors import ModelError, ServerError
from cycle.llm.base import ModelOutput
from cycle.llm.model import Model, RetryPolicy
from cycle.llm.registry import get_model
from cycle.records import Message
from cycle.testing import ScriptedAPI, clear_scripts, script


class Answer(BaseModel):
    value: int


@pytest.fixture(autouse=True)
def _clean():
    yield
    clear_scripts()


async def test_outputs_in_order_and_calls_recorded():
    s = script("agent", ["one", ModelOutput(text="two", finish_reason="length"), {"value": 3}])
    model = get_model("scripted:agent")
    assert (await model.generate([Message.user("a")])).text == "one"
    assert (await model.generate([Message.user("b")])).finish_reason == "length"
    out = await model.generate_structured([Message.user("c")], Answer)
    assert out.parsed == Answer(value=3)
    assert [c.messages[-1].content for c in s.calls] == ["a", "b", "c"]
    assert s.calls[-1].config.response_schema is not None
    assert s.remaining == 0


async def test_running_out_is_a_clear_error():
    script("short", ["only"])
    model = get_model("scripted:short")
    await model.generate([Message.user("a")])
    with pytest.raises(ModelError, match="no output left"):
        await model.generate([Message.user("b")])


async def test_repeat_starts_over():
    script("loop", ["x", "y"], repeat=True)
    model = get_model("scripted:loop")
    texts = [(await model.generate([Message.user(str(i))])).text for i in range(4)]
    assert texts == ["x", "y", "x", "y"]


async def test_function_answers_every_call():
    def answer(messages, tools, config):
        return f"you said {messages[-1].content}"

    model = Model(ScriptedAPI("fn", outputs=answer))
    assert (await model.generate([Message.user("hi")])).text == "you said hi"


async def test_exceptions_are_raised_and_retried_by_model():
    api = ScriptedAPI("flaky", outputs=[ServerError("boom", status=503), "recovered"])
    model = Model(api, retry=RetryPolicy(attempts=2, initial_wait=0.001, max_wait=0.001, jitter=0))
    assert (await model.generate([Message.user("x")])).text == "recovered"
    assert len(api.calls) == 2


async def test_structured_repair_with_scripted_outputs():
    script("judge", ["not json", {"value": 5}])
    out = await get_model("scripted:judge").generate_structured([Message.user("x")], Answer)
    assert out.parsed.value == 5
