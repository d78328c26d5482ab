"""A prompt's few-shot examples reach the wire as user and assistant turns, before the real
user message, through the real openai and google-genai SDKs against the loopback server
(and OpenAI-compatible servers that differ from OpenAI); a case is not shown its own."""

from __future__ import annotations

import pytest

from cycle.agents import PromptAgent
from cycle.cases import TestCase
from cycle.records import Example, Prompt, ToolDef
from cycle.testing import Reply

PROMPT = Prompt(
    id="support", system="You are a support agent.",
    user_template="Customer: {{ customer }}\nQuestion: {{ question }}",
    examples=(
        Example(input={"customer": "Ann", "question": "Where is my parcel?"},
                output="Hi Ann, it arrives tomorrow.", source="late"),
        Example(input={"customer": "Bo", "question": "Refund?"}, output="Hi Bo, refunded."),
    ),
)
CASE = TestCase(id="cancel", input={"customer": "Chen", "question": "Cancel my order."})

#: the conversation every provider must be sent, in chat form
EXPECTED = [
    ("system", "You are a support agent."),
    ("user", "Customer: Ann\nQuestion: Where is my parcel?"),
    ("assistant", "Hi Ann, it arrives tomorrow."),
    ("user", "Customer: Bo\nQuestion: Refund?"),
    ("assistant", "Hi Bo, refunded."),
    ("user", "Customer: Chen\nQuestion: Cancel my order."),
]


def _openai_turns(body: dict) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in body["messages"]]


def _gemini_turns(body: dict) -> list[tuple[str, str]]:
    system = body["systemInstruction"]["parts"][0]["text"]
    return [("system", system)] + [
        ({"model": "assistant"}.get(c["role"], c["role"]), "".join(p["text"] for p in c["parts"]))
        for c in body["contents"]]


@pytest.mark.parametrize("name, compat", [
    ("openai:gpt-4o-mini", None), ("openai:my-llama", "llamacpp"),
    ("gemini:gemini-2.5-flash", None)])
async def test_examples_are_turns_before_the_user_message(name, compat, make_model, server):
    server.compat = compat
    agent = PromptAgent(PROMPT, make_model(name))
    server.enqueue(Reply(text="Hi Chen, cancelled."))

    result = await agent.run(CASE, iteration=0)

    assert result.output == "Hi Chen, cancelled."
    body = server.requests[-1].body
    turns = _openai_turns(body) if name.startswith("openai") else _gemini_turns(body)
    assert turns == EXPECTED
    if name.startswith("gemini"):  # the assistant's turns are the model's, in Gemini's words
        assert [c["role"] for c in body["contents"]] == ["user", "model", "user", "model", "user"]


async def test_examples_stay_first_when_tool_results_go_as_text(make_model, server):
    """A server that refuses the tool role gets the calls and results as text; the
    examples still open the conversation, as they were."""
    server.compat = "no-tool-role"
    tool = ToolDef(name="cancel_order", description="Cancel an order",
                   parameters={"type": "object", "properties": {}})
    agent = PromptAgent(PROMPT.model_copy(update={"tools": (tool,)}),
                        make_model("openai:my-llama"))
    server.enqueue(Reply(tool_calls=[("cancel_order", {})]), Reply(text="Done."))

    await agent.run(TestCase.model_validate({**CASE.model_dump(exclude_defaults=True),
                                             "mocks": {"cancel_order": {"value": "ok"}}}),
                    iteration=0)

    last = _openai_turns(server.requests[-1].body)
    assert last[:6] == EXPECTED
    assert last[6][0] == "assistant" and "[tool call" in last[6][1]


async def test_a_case_is_not_shown_the_example_drawn_from_it(make_model, server):
    agent = PromptAgent(PROMPT, make_model("openai:gpt-4o-mini"))
    server.enqueue(Reply(text="ok"), Reply(text="ok"))

    await agent.run(TestCase(id="late", input={"customer": "Dee", "question": "Late?"}),
                    iteration=0)
    by_source = _openai_turns(server.requests[-1].body)
    await agent.run(TestCase(id="other", input={"customer": "Bo", "question": "Refund?"}),
                    iteration=0)
    by_input = _openai_turns(server.requests[-1].body)

    assert by_source == [EXPECTED[0], *EXPECTED[3:5], ("user", "Customer: Dee\nQuestion: Late?")]
    assert by_input == [*EXPECTED[:3], ("user", "Customer: Bo\nQuestion: Refund?")]
