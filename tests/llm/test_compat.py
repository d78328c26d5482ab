"""Compatible servers as they really are (issue 39): the openai SDK against the loopback
server behaving as llama.cpp's server, a text-only server and one that refuses the tool
role. cycle learns what each accepts, once, and the answers are what they would be."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from cycle.errors import BadRequestError, ServerError
from cycle.llm import compat
from cycle.llm.base import GenerateConfig
from cycle.records import Message, ToolCall, ToolDef
from cycle.testing import Fault, Reply

NAME = "openai:local-model"
LOOKUP = ToolDef(name="lookup", description="Look an order up.",
                 parameters={"type": "object", "properties": {"order": {"type": "string"}}})


class Verdict(BaseModel):
    score: int
    reasoning: str


def formats(server) -> list[str | None]:
    return [(r.body.get("response_format") or {}).get("type") if r.body else None
            for r in server.requests]


async def test_llamacpp_json_schema_refused_then_json_object_with_the_schema(make_model, server):
    server.compat = "llamacpp"
    model = make_model(NAME)
    first = await model.generate_structured([Message.user("Judge")], Verdict, name="verdict")
    again = await model.generate_structured([Message.user("Judge again")], Verdict)
    assert isinstance(first.parsed, Verdict) and isinstance(again.parsed, Verdict)
    # one refused call (a 500 naming response_format, as llama-cpp-python 0.3.36 answers),
    # then json_object carrying the schema, learned
    assert formats(server) == ["json_schema", "json_object", "json_object"]
    assert server.requests[1].body["response_format"]["schema"]["required"] == [
        "score", "reasoning"]
    assert compat.accepted(server.openai_base_url, "local-model").structured == "json_object_schema"


async def test_a_text_only_server_gets_the_schema_in_the_prompt_and_the_waste_is_counted(
        make_model, server):
    server.compat = "text-only"
    model = make_model(NAME)
    out = await model.generate_structured([Message.system("You judge."), Message.user("Judge")],
                                           Verdict, name="verdict")
    assert isinstance(out.parsed, Verdict)
    first, second = server.requests
    assert "verdict" not in first.system  # asked with a format the server ignored: echoed text
    assert "follows the JSON schema verdict" in second.system  # then the schema in the prompt
    assert second.body.get("response_format") is None
    assert second.body["messages"][0]["content"].startswith("You judge.")  # one system message
    wasted = len(first.body["messages"][-1]["content"]) // 4  # the echo's usage, estimated
    assert out.usage.output_tokens >= wasted  # the ignored answer was paid: it is counted
    await model.generate_structured([Message.user("Judge again")], Verdict, name="verdict")
    assert server.request_count == 3  # learned: the third call goes straight to the prompt
    assert "follows the JSON schema verdict" in server.requests[2].system


async def test_first_calls_in_flight_learn_once(make_model, server):
    server.compat = "llamacpp"
    server.latency = 0.05
    model = make_model(NAME)
    outs = await asyncio.gather(*(model.generate_structured([Message.user(f"q{i}")], Verdict)
                                  for i in range(8)))
    assert all(isinstance(o.parsed, Verdict) for o in outs)
    assert server.request_count == 9  # eight answers and one refused call, not eight


async def test_calls_waiting_for_the_learning_hold_no_connection(make_model, server):
    """With two connections, a structured call waiting for the first one's learning does
    not sit on the second: a plain call (nothing to learn) takes it meanwhile."""
    server.latency = 0.1
    model = make_model(NAME, options={"max_connections": 2})
    judged = [asyncio.create_task(model.generate_structured([Message.user(f"q{i}")], Verdict))
              for i in range(3)]
    await asyncio.sleep(0.02)  # the three structured calls are at the gate: one learning
    plain = asyncio.create_task(model.generate([Message.user("Plain")]))
    await asyncio.gather(plain, *judged)
    assert formats(server) == ["json_schema", None, "json_schema", "json_schema"]


async def test_a_call_waiting_for_the_learning_is_not_timed_out_by_it(make_model, server,
                                                                      recorder):
    """The call's timeout is its own: the wait for another call's learning is not in it,
    so the call is neither cut off nor sent twice."""
    server.latency = 0.2
    model = make_model(NAME, bus=recorder.bus)
    config = GenerateConfig(timeout=0.3)
    outs = await asyncio.gather(*(model.generate_structured([Message.user(f"q{i}")], Verdict,
                                                            config=config) for i in range(2)))
    assert all(isinstance(o.parsed, Verdict) for o in outs)
    assert server.request_count == 2
    assert [c.attempts for c in recorder.calls] == [1, 1]


@pytest.mark.parametrize("setting, sent", [("json_schema", "json_schema"),
                                           ("json_object", "json_object"), ("prompt", None)])
async def test_the_setting_fixes_the_form(make_model, server, setting, sent):
    model = make_model(NAME, options={"extra": {"structured": setting}})
    out = await model.generate_structured([Message.user("Judge")], Verdict, name="verdict")
    assert isinstance(out.parsed, Verdict)
    assert formats(server) == [sent]
    assert ("follows the JSON schema verdict" in server.requests[0].system) == (
        setting in ("json_object", "prompt"))


async def test_a_fixed_form_the_server_refuses_is_an_error_not_a_silent_step(make_model, server):
    server.compat = "llamacpp"
    model = make_model(NAME, options={"extra": {"structured": "json_schema"}})
    with pytest.raises(ServerError, match="(?s)HTTP 500.*Input should be 'text' or 'json_object'"):
        await model.generate_structured([Message.user("Judge")], Verdict)
    assert server.request_count == 1  # a refusal is not retried


async def test_an_unrelated_refusal_is_raised_and_nothing_is_learned(make_model, server):
    server.enqueue(*[Fault.status(400, message="context length exceeded")] * 4)
    model = make_model(NAME)
    with pytest.raises(BadRequestError, match="context length exceeded"):
        await model.generate_structured([Message.user("Judge")], Verdict)
    assert formats(server) == ["json_schema", "json_object", "json_object", None]
    assert compat.accepted(server.openai_base_url, "local-model").structured is None


async def test_llamacpp_tools_need_tool_choice_and_no_null_content(make_model, server):
    server.compat = "llamacpp"
    server.enqueue(Reply(tool_calls=[("lookup", {"order": "A-1"})]), "It shipped.")
    model = make_model(NAME)
    first = await model.generate([Message.user("Where is A-1?")], tools=[LOOKUP])
    assert first.tool_calls[0].name == "lookup"  # seen: tool_choice was sent
    call = first.tool_calls[0]
    out = await model.generate([Message.user("Where is A-1?"),
                                Message.assistant("", tool_calls=(call,)),
                                Message.tool('{"status": "shipped"}', tool_call_id=call.id,
                                             name="lookup")], tools=[LOOKUP])
    assert out.text == "It shipped."  # no 500: the assistant's content is "" not null
    assert server.requests[0].body["tool_choice"] == "auto"
    assert server.requests[1].body["messages"][1]["content"] == ""


async def test_a_server_refusing_the_tool_role_gets_tool_results_as_text(make_model, server):
    server.compat = "no-tool-role"
    model = make_model(NAME)
    call = ToolCall(id="c1", name="lookup", arguments={"order": "A-1"})
    conversation = [Message.user("Where is A-1?"), Message.assistant("", tool_calls=(call,)),
                    Message.tool('{"status": "shipped"}', tool_call_id="c1", name="lookup")]
    await model.generate(conversation, tools=[LOOKUP])
    await model.generate(conversation, tools=[LOOKUP], config=GenerateConfig(temperature=0.5))
    assert server.request_count == 3  # one refusal, then learned
    sent = server.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == '[tool call c1] lookup({"order": "A-1"})'
    assert sent[2]["content"] == '[tool result c1] lookup: {"status": "shipped"}'


@pytest.mark.parametrize("refused, then", [("max_tokens", "max_completion_tokens"),
                                           ("max_completion_tokens", "max_tokens")])
async def test_the_output_cap_field_a_server_refuses_is_swapped_once(make_model, server,
                                                                     refused, then):
    server.enqueue(Fault.status(400, message=f"Unsupported parameter: '{refused}' is not "
                                f"supported with this model. Use '{then}' instead."))
    model = make_model(NAME, options={"extra": {"max_tokens_field": refused}}
                       if refused == "max_completion_tokens" else None)
    if refused == "max_completion_tokens":  # a configured field is the user's: never swapped
        with pytest.raises(BadRequestError):
            await model.generate([Message.user("hi")], config=GenerateConfig(max_tokens=20))
        return
    await model.generate([Message.user("hi")], config=GenerateConfig(max_tokens=20))
    await model.generate([Message.user("again")], config=GenerateConfig(max_tokens=20))
    assert [refused in r.body for r in server.requests] == [True, False, False]
    assert all(r.body.get(then) == 20 for r in server.requests[1:])


def refused(server) -> int:
    """Requests the server refused (llama.cpp's answer to json_schema)."""
    return sum(1 for f in formats(server) if f == "json_schema")


async def test_what_was_learned_is_kept_in_the_store_for_the_next_process(make_model, server,
                                                                          tmp_path):
    """No response cache at all: the store keeps the form learned, by endpoint, without a
    credential; the next process asks in it at once."""
    from cycle.store import Store

    server.compat = "llamacpp"
    with Store.open(tmp_path / "s.db") as store:
        first = make_model(NAME, forms=store.servers, options={"api_key": "sk-secret-1"})
        await first.generate_structured([Message.user("Judge")], Verdict)
        rows = store.db.execute("SELECT endpoint, accepted FROM servers").fetchall()
    assert formats(server) == ["json_schema", "json_object"]
    ((endpoint, accepted),) = rows
    assert endpoint.endswith("|local-model") and "json_object_schema" in accepted
    assert "sk-secret" not in endpoint + accepted
    compat.forget()  # a new process: nothing learned in memory
    with Store.open(tmp_path / "s.db") as store:
        later = make_model(NAME, forms=store.servers)
        await later.generate_structured([Message.user("Judge this too")], Verdict)
    assert formats(server) == ["json_schema", "json_object", "json_object"]  # no refusal


async def test_a_server_that_changed_its_mind_is_learned_again_and_kept(make_model, server,
                                                                        tmp_path):
    """The store says json_schema works; the server now refuses it (replaced by llama.cpp's):
    one refusal, the form learned again replaces the stored one, and the next process pays
    none."""
    from cycle.store import Store

    with Store.open(tmp_path / "s.db") as store:
        await make_model(NAME, forms=store.servers).generate_structured(
            [Message.user("Judge")], Verdict)
        assert '"json_schema"' in store.servers.server(store.db.execute(
            "SELECT endpoint FROM servers").fetchone()[0])
    server.compat = "llamacpp"
    for process in range(2):
        compat.forget()
        with Store.open(tmp_path / "s.db") as store:
            await make_model(NAME, forms=store.servers).generate_structured(
                [Message.user(f"Judge {process}")], Verdict)
    assert formats(server) == ["json_schema", "json_schema", "json_object", "json_object"]


async def test_a_form_an_older_release_kept_in_the_cache_moves_to_the_store(
        make_model, server, tmp_path):
    """A cache written by an earlier release holds the form (its ``servers`` table): the
    first model reads it, the store keeps it and the cache no longer does."""
    import sqlite3

    from cycle.llm.cache import ResponseCache
    from cycle.store import Store

    server.compat = "llamacpp"
    endpoint = f"{server.openai_base_url}|local-model"
    with sqlite3.connect(tmp_path / "cache.db") as old:
        old.execute("create table servers (endpoint text primary key, accepted text not null, "
                    "learned_at real not null)")
        old.execute("insert into servers values (?, ?, 0)",
                    [endpoint, '{"structured":"json_object_schema","probed":true}'])
    old.close()
    with Store.open(tmp_path / "s.db") as store, ResponseCache(tmp_path / "cache.db") as cache:
        model = make_model(NAME, forms=store.servers, cache=cache)
        await model.generate_structured([Message.user("Judge")], Verdict)
        assert formats(server) == ["json_object"]  # no refusal: the old form was used
        assert store.servers.server(endpoint) is not None
        assert cache.take_server(endpoint) is None  # moved, not copied


async def test_the_budget_reserves_for_the_call_asked_again(make_model, server):
    """A text answer to a format is asked again with the schema in the prompt: both
    answers are paid, so the budget reserves for both before the first is sent."""
    from cycle.llm.budget import Budget

    held: list[float] = []

    class Watched(Budget):
        async def reserve(self, amount: float) -> float:
            held.append(amount)
            return await super().reserve(amount)

    server.compat = "text-only"
    budget = Watched(1.0)
    model = make_model(NAME, budget=budget)
    for _ in range(2):
        await model.generate_structured([Message.user("Judge")], Verdict)
    first, second = held
    assert first == pytest.approx(2 * second)  # the first may be asked twice: reserved twice
    assert server.request_count == 3 and 0 < budget.spent <= 1.0
    # calls in flight with the learning one reserve once it is done, for the form learned
    held.clear()
    compat.forget()
    server.latency = 0.05
    await asyncio.gather(*(model.generate_structured([Message.user("Judge")], Verdict)
                           for _ in range(3)))
    assert held == pytest.approx([first, second, second])


async def test_a_server_refusing_tool_choice_is_asked_without_it(make_model, server):
    """vLLM without --enable-auto-tool-choice refuses tool_choice "auto" (400)."""
    server.enqueue(Fault.status(400, message='"auto" tool choice requires '
                                '--enable-auto-tool-choice and --tool-call-parser to be set'),
                   Reply(tool_calls=[("lookup", {"order": "A-1"})]), "again")
    model = make_model(NAME)
    out = await model.generate([Message.user("Where is A-1?")], tools=[LOOKUP])
    assert out.tool_calls[0].name == "lookup"
    await model.generate([Message.user("Again?")], tools=[LOOKUP])
    assert ["tool_choice" in r.body for r in server.requests] == [True, False, False]


async def test_a_server_keeping_to_the_format_is_settled_by_its_first_json_answer(make_model,
                                                                                  server):
    """Once a JSON answer came back in the format sent, later answers are not parsed a
    second time to probe the server, and the budget reserves for one answer, not two; a
    later text answer is the model's fault, repaired as for OpenAI (not asked again with
    the schema in the prompt)."""
    model = make_model(NAME)
    config = GenerateConfig(response_schema=Verdict.model_json_schema(), response_schema_name="v")
    assert model.api.paid_calls(config) == 2  # not known yet: it may be asked twice
    await model.generate_structured([Message.user("Judge")], Verdict)
    assert compat.accepted(server.openai_base_url, "local-model").probed
    assert model.api.paid_calls(config) == 1
    server.enqueue("not JSON at all", '{"score": 3, "reasoning": "r"}')
    out = await model.generate_structured([Message.user("Judge again")], Verdict)
    assert out.parsed == Verdict(score=3, reasoning="r")
    assert formats(server) == ["json_schema"] * 3  # the repair, in the same form
    assert "follows the JSON schema" not in server.requests[-1].system
