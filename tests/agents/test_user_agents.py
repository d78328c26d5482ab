"""Tools that ask the user, answered by user agents (seed 000): a script, a function, a
model; the bridge and its hooks; state changes; one session per case; no agent, an error."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

from cycle.agents import PromptAgent
from cycle.cases import TestCase
from cycle.cli import cli
from cycle.errors import EvalError
from cycle.llm.base import ModelOutput
from cycle.llm.registry import get_model
from cycle.mocks import MockSpec, UserAgentSpec
from cycle.records import Prompt, ToolCall, ToolDef
from cycle.testing import clear_scripts, script

APPROVE = ToolDef(name="approve", description="Ask the user to approve.", parameters={
    "type": "object", "properties": {"amount": {"type": "number"}}})
CONFIRM = ToolDef(name="confirm_address", description="Ask the user to confirm.", parameters={
    "type": "object", "properties": {}})
PROMPT = Prompt(id="p", system="Help.", user_template="{{ q }}", tools=(APPROVE, CONFIRM))
CASE = TestCase(id="c", input={"q": "refund me"})


def asking_agent(messages, tools, config):
    """Asks both tools at once (two pending asks), then reports what it was told."""
    results = [m.content for m in messages if m.role == "tool"]
    if not results:
        return ModelOutput(tool_calls=(
            ToolCall(id="1", name="approve", arguments={"amount": 20}),
            ToolCall(id="2", name="confirm_address", arguments={})))
    return " | ".join(results)


async def run(user_agents: dict, mocks: dict | None = None):
    script("agent", asking_agent)
    try:
        agent = PromptAgent(PROMPT, get_model("scripted:agent"), mocks=mocks or {},
                            user_agents={k: UserAgentSpec.model_validate(v)
                                         for k, v in user_agents.items()})
        result = await agent.run(CASE, iteration=0)
        await agent.aclose()
        return result
    finally:
        clear_scripts()


async def test_script_and_function_user_agents_answer_with_state_and_a_shared_session():
    result = await run({"confirm_address": {"script": ["yes, 1 Main St"]},
                        "approve": {"function": "tests.agents.mockfns:approver"}})
    approve, confirm = [e for e in result.trace if e.kind == "tool_result"]
    assert confirm.result == "yes, 1 Main St"
    assert approve.result["approved"] is True
    assert result.state == {"user": {"approvals": 1}}
    assert any(e.kind == "state" and e.changes == {"user.approvals": 1} for e in result.trace)
    # both pending asks were answered before the agent went on: it saw both results
    assert "approved" in result.output and "1 Main St" in result.output


async def test_the_bridge_hooks_and_a_model_user_agent():
    asked = []

    def user(messages, tools, config):
        asked.append(messages[-1].content)
        return "Yes, go ahead."

    script("asker", user)
    result = await run({"approve": {"model": "scripted:asker",
                                    "format_prompt": "tests.agents.mockfns:say_amount",
                                    "format_response": "tests.agents.mockfns:yes_no"},
                        "confirm_address": {"script": ["ok"]}})
    assert asked == ["The tool approve asks: Do you approve a refund of 20 EUR?"]
    assert next(e for e in result.trace if e.tool == "approve").result == "yes"


async def test_a_tool_that_asks_with_no_user_agent_is_an_error_naming_it():
    with pytest.raises(EvalError) as e:
        await run({"confirm_address": {"script": ["ok"]}},
                  mocks={"approve": MockSpec(ask_user=True)})
    assert "called tool 'approve', which asks the user, but no user agent answers it" in str(e.value)
    assert "user_agents" in (e.value.hint or "")


def test_a_user_agent_for_an_undeclared_tool_is_refused_before_any_call(tmp_path):
    (tmp_path / "p.yaml").write_text(textwrap.dedent("""\
        id: p
        user_template: '{{ q }}'
        params: {model: 'offline:default'}
        tools: [{name: approve, parameters: {type: object, properties: {}}}]
        """))
    (tmp_path / "cases.yaml").write_text("- {id: c, input: {q: hi}}\n")
    (tmp_path / "cycle.yaml").write_text(textwrap.dedent("""\
        prompt: p.yaml
        criteria: [{id: x, check: {type: contains, values: [a]}}]
        cases: [cases.yaml]
        tools:
          user_agents:
            aprove: {script: [yes]}
        """))
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                 str(tmp_path / "cycle.yaml")])
    assert r.exit_code == 2, r.output
    assert "a user agent for 'aprove', which the prompt does not declare" in r.output
    assert "cycle.yaml:6" in r.output
