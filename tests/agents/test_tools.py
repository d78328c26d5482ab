"""A prompt agent with tools: the real SDKs on the loopback server, mocks, traces, limits."""

from __future__ import annotations

import pytest

from cycle.agents import PromptAgent
from cycle.cases import TestCase
from cycle.errors import EvalError
from cycle.evals.results import load_run
from cycle.evals.runner import Runner
from cycle.judge import Judge
from cycle.judge.criteria import CriterionConfig
from cycle.llm.registry import get_model
from cycle.mocks import MockSpec
from cycle.records import Prompt, ToolDef
from cycle.store import Store
from cycle.testing import LoopbackServer, Reply
from tests.agents import mockfns  # the module the import paths below name

ORDER = {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}
LOOKUP = ToolDef(name="lookup_order", description="Find an order.", parameters=ORDER)
REFUND = ToolDef(name="refund", description="Refund an order.", parameters=ORDER)
PROMPT = Prompt(id="support", system="You help customers.", user_template="{{ input }}",
                tools=(LOOKUP, REFUND))
CASE = TestCase(id="late", input="Where is order A-1? Refund it.")
PROVIDERS = ["openai:gpt-4o-mini", "gemini:gemini-2.5-flash"]


@pytest.fixture(scope="module")
def server():
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _fresh(server):
    server.reset()
    server.responder = None
    yield


def model_on(server: LoopbackServer, name: str):
    options = server.openai_options() if name.startswith("openai") else server.gemini_options()
    return get_model(name, options=options)


def mocks(**kw) -> dict[str, MockSpec]:
    return {k: MockSpec.model_validate(v) for k, v in kw.items()}


@pytest.mark.parametrize("name", PROVIDERS)
async def test_parallel_tool_calls_through_mocks_then_an_answer(server, name):
    server.enqueue(
        Reply(tool_calls=[("lookup_order", {"order": "A-1"}), ("refund", {"order": "A-1"})]),
        Reply(tool_calls=[("refund", {"order": "A-1"})]),
        "Your order A-1 was refunded.",
    )
    agent = PromptAgent(PROMPT, model_on(server, name), mocks=mocks(
        lookup_order={"value": {"status": "shipped"}},
        refund={"function": "tests.agents.mockfns:refund"}))
    result = await agent.run(CASE, iteration=0)
    await agent.model.aclose()

    assert result.output == "Your order A-1 was refunded." and result.ending == "completed"
    assert [e.kind for e in result.trace] == [
        "user", "model", "tool_result", "tool_result", "state", "model", "tool_result", "model",
        "final"]
    first, second = [e for e in result.trace if e.kind == "tool_result"][:2]
    assert (first.tool, first.result) == ("lookup_order", {"status": "shipped"})
    assert second.result == {"ok": True, "amount": 20}
    # the state the first refund set is what the second call's mock saw
    assert [e for e in result.trace if e.kind == "tool_result"][2].result == {
        "ok": False, "reason": "already refunded"}
    assert result.state == {"session": {"refunded": "A-1"}, "user": {"refunds": 1}}
    assert [c.name for c in result.tool_calls] == ["lookup_order", "refund", "refund"]
    assert result.usage.input_tokens > 0 and len([e for e in result.trace if e.kind == "model"]) == 3
    # the model saw every tool result, answered in the order it asked, on the real wire
    second_request = server.requests[1].messages
    tool_messages = [m for m in second_request if m["role"] == "tool"]
    assert len(tool_messages) == 2
    assert "shipped" in tool_messages[0]["content"] and '"ok": true' in tool_messages[1]["content"]
    assert server.requests[0].tools == ["lookup_order", "refund"]


async def test_an_unmocked_tool_is_an_error_that_says_how_to_mock_it(server):
    server.enqueue(Reply(tool_calls=[("refund", {"order": "A-1"})]))
    agent = PromptAgent(PROMPT, model_on(server, "openai:gpt-4o-mini"),
                        mocks=mocks(lookup_order={"value": 1}))
    with pytest.raises(EvalError) as e:
        await agent.run(CASE, iteration=0)
    text = str(e.value) + (e.value.hint or "")
    assert "case 'late'" in text and "'refund'" in text and "no mock" in text
    assert "refund: {value: ...}" in e.value.hint and "passthrough" in e.value.hint
    await agent.model.aclose()


async def test_mock_kinds_sequence_match_error_and_bad_arguments(server):
    server.enqueue(
        Reply(tool_calls=[("lookup_order", {"order": "A-1"}), ("lookup_order", {"order": "B-7"}),
                          ("lookup_order", {"order": 42}), ("refund", {"order": "A-1"}),
                          ("nope", {})]),
        "done",
    )
    agent = PromptAgent(PROMPT, model_on(server, "openai:gpt-4o-mini"), mocks=mocks(
        lookup_order={"match": [{"args": {"order": "^A-"}, "match": "regex", "value": "an A order"},
                                {"value": "other"}]},
        refund={"error": "the bank is down"}))
    result = await agent.run(CASE, iteration=0)
    events = [e for e in result.trace if e.kind in ("tool_result", "tool_error")]
    assert [(e.kind, e.result if e.kind == "tool_result" else e.error) for e in events] == [
        ("tool_result", "an A order"),
        ("tool_result", "other"),
        ("tool_error", ("the arguments do not match the tool's schema: order: 42 is not of type "
                        "'string'")),
        ("tool_error", "the bank is down"),  # the mock's words, no class of cycle's
        ("tool_error", "there is no tool named 'nope' (tools: lookup_order, refund)"),
    ]
    shown = [m["content"] for m in server.requests[1].messages if m["role"] == "tool"]
    assert shown[3] == "error: the bank is down"
    await agent.model.aclose()


async def test_sequence_then_the_last_value_repeats(server):
    server.enqueue(*[Reply(tool_calls=[("lookup_order", {"order": "A-1"})])] * 3, "ok")
    agent = PromptAgent(PROMPT, model_on(server, "openai:gpt-4o-mini"),
                        mocks=mocks(lookup_order={"sequence": ["pending", "shipped"]}))
    result = await agent.run(CASE, iteration=0)
    assert [e.result for e in result.trace if e.kind == "tool_result"] == [
        "pending", "shipped", "shipped"]
    await agent.model.aclose()


async def test_passthrough_runs_the_real_function_and_nothing_else_does(server):
    mockfns.CALLS.clear()
    real = ToolDef(name="lookup_order", description="", parameters=ORDER,
                   function="tests.agents.mockfns:real_lookup")
    prompt = PROMPT.model_copy(update={"tools": (real, REFUND)})
    server.enqueue(Reply(tool_calls=[("lookup_order", {"order": "A-9"})]), "fine")
    agent = PromptAgent(prompt, model_on(server, "openai:gpt-4o-mini"),
                        mocks=mocks(lookup_order={"value": "mocked"}))
    result = await agent.run(CASE, iteration=0)
    assert mockfns.CALLS == [] and result.trace[2].result == "mocked"
    server.enqueue(Reply(tool_calls=[("lookup_order", {"order": "A-9"})]), "fine")
    agent.mocks = mocks(lookup_order={"passthrough": True})
    result = await agent.run(CASE, iteration=1)
    assert mockfns.CALLS == ["A-9"]
    assert result.trace[2].result == {"order": "A-9", "status": "shipped"}
    await agent.model.aclose()


async def test_an_unserialisable_tool_result_is_a_clear_error(server):
    server.enqueue(Reply(tool_calls=[("refund", {"order": "A-1"})]))
    agent = PromptAgent(PROMPT, model_on(server, "openai:gpt-4o-mini"),
                        mocks=mocks(refund={"function": "tests.agents.mockfns:unserialisable"}))
    with pytest.raises(EvalError, match="cannot be serialised to JSON"):
        await agent.run(CASE, iteration=0)
    await agent.model.aclose()


async def test_the_step_limit_ends_the_case_as_terminated_apart_from_failures(server, tmp_path):
    server.responder = lambda request: Reply(tool_calls=[("lookup_order", {"order": "A-1"})])
    agent = PromptAgent(PROMPT, model_on(server, "openai:gpt-4o-mini"),
                        mocks=mocks(lookup_order={"value": "still looking"}), max_steps=3)
    check = CriterionConfig(id="answered", check={"type": "contains", "values": ["A-1"]})
    store = Store.open(tmp_path / "cycle.db")
    runner = Runner(agent=agent, judge=Judge([check]), cases=[CASE], iterations=2, store=store)
    result = await runner.run(run_id="run-steps")
    assert server.request_count == 6  # 3 model turns per iteration, then stop
    case = result.cases["late"]
    assert case.status == "terminated" and case.terminated == 2 and case.errors == 0
    assert result.suite.terminated == 2 and result.suite.errors == 0 and result.suite.failed == 0
    assert result.exit_code == 1 and result.score is None
    assert "step limit" in result.results[0].error
    # stored, trace included, and read back the same
    again = load_run(store.runs, "run-steps")
    assert again.results[0].status == "terminated"
    assert again.results[0].trace == result.results[0].trace
    assert len([e for e in again.results[0].trace if e.kind == "model"]) == 3
    store.close()
    await agent.model.aclose()


async def test_resume_of_a_tool_using_run_pays_nothing_again(server, tmp_path):
    server.enqueue(Reply(tool_calls=[("refund", {"order": "A-1"})]), "Refunded A-1.")
    server.responder = None
    agent = PromptAgent(PROMPT, model_on(server, "openai:gpt-4o-mini"),
                        mocks=mocks(refund={"function": "tests.agents.mockfns:refund"}))
    check = CriterionConfig(id="refunded", check={"type": "state_value", "path": "session.refunded",
                                                  "equals": "A-1"})
    store = Store.open(tmp_path / "cycle.db")
    first = await Runner(agent=agent, judge=Judge([check]), cases=[CASE], store=store).run(
        run_id="run-r")
    assert first.results[0].passed and server.request_count == 2
    again = await Runner(agent=agent, judge=Judge([check]), cases=[CASE], store=store).run(
        run_id="run-r")
    assert server.request_count == 2  # the stored iteration is kept, not played again
    assert again.results[0].state == {"session": {"refunded": "A-1"}, "user": {"refunds": 1}}
    store.close()
    await agent.model.aclose()
