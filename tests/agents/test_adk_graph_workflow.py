"""ADK 2's graph ``Workflow`` as the agent (root or nested): ADK runs its nodes in its
graph's order, every LlmAgent among them calls cycle's model (cost, budget, mocks and
trace for each), a plain function node runs as the workflow's own code, ``prompt_agent``
finds an LlmAgent among the nodes, and the turn's answer is the workflow's last output."""

from __future__ import annotations

import pytest

from cycle.testing.server import Reply
from tests.agents import adk_agents
from tests.agents import test_adk_edges as edges

# test_adk_edges' fixtures (a loopback server, the key set)
server, _fresh = edges.server, edges._fresh

SAID = "[{id: said, check: {type: contains, values: [shipped]}}]"
MOCKS = "{lookup_order: {value: {status: shipped}}, refund: {value: {ok: true}}}"


def test_a_workflow_root_routes_each_agent_node_through_cycle_around_a_function_node(
        tmp_path, server):
    server.enqueue(Reply(tool_calls=[("lookup_order", {"order": "A-1"})]),
                   Reply(text="A-1: shipped."),
                   Reply(tool_calls=[("refund", {"order": "A-1"})]),
                   Reply(text="Your order A-1 has shipped; refunded."))
    r, report = edges.run(tmp_path, server, agent="graph_workflow",
                          agent_extra=", prompt_agent: writer", mocks=MOCKS, criteria=SAID)
    assert r.exit_code == 0, r.output
    assert adk_agents.CALLS == ["note"]  # the function node ran; both tools were the mocks
    result = report["cases"][0]["results"][0]
    assert result["output"] == "Your order A-1 has shipped; refunded."
    models = [e for e in result["trace"] if e["kind"] == "model"]
    assert len(models) == 4 and all(e["cost"] > 0 for e in models)
    assert result["agent_cost"] == pytest.approx(sum(e["cost"] for e in models))
    assert report["summary"]["usage"]["agent"]["calls"] == 4
    assert [(e["tool"], e["result"]) for e in result["trace"] if e["kind"] == "tool_result"] == [
        ("lookup_order", {"status": "shipped"}), ("refund", {"ok": True})]
    # the researcher keeps its instruction; the writer's is the prompt, and what it is told
    # is the function node's output
    assert "Look the order up." in server.requests[0].system
    assert "You are the front desk." in server.requests[2].system
    assert "Answer the customer." not in server.requests[2].system
    assert server.requests[2].messages[-1]["content"] == "Research notes: A-1: shipped."


def test_a_workflow_ending_in_a_function_node_answers_with_its_output(tmp_path, server):
    server.enqueue(Reply(text="A-1 has shipped."))
    r, report = edges.run(tmp_path, server, agent="signed_workflow", criteria=SAID)
    assert r.exit_code == 0, r.output
    result = report["cases"][0]["results"][0]
    assert result["output"] == "A-1 has shipped. -- Acme support", result
    assert "You are the front desk." in server.requests[0].system  # its only LlmAgent


def test_a_nested_workflows_agents_are_routed_and_the_users_object_is_left_alone(
        tmp_path, server):
    server.enqueue(Reply(text="Facts: shipped."), Reply(text="It has shipped."))
    r, report = edges.run(tmp_path, server, agent="nested_workflow",
                          agent_extra=", prompt_agent: checker", criteria=SAID)
    assert r.exit_code == 0, r.output
    result = report["cases"][0]["results"][0]
    assert result["output"] == "It has shipped."
    assert len([e for e in result["trace"] if e["kind"] == "model"]) == 2
    assert "You are the front desk." in server.requests[0].system  # the inner node's agent
    assert "Answer." in server.requests[1].system
    # cycle ran a copy: the module's Workflow keeps its own models and instructions
    from google.adk.agents import LlmAgent

    from cycle.agents.adk import _walk

    agents = [n for n in _walk(adk_agents.nested_workflow) if isinstance(n, LlmAgent)]
    assert [(a.name, a.model, a.instruction) for a in agents] == [
        ("checker", "gemini-2.0-flash", "Check the facts."),
        ("answerer", "gemini-2.0-flash", "Answer.")]


def test_a_workflow_with_several_agents_and_no_prompt_agent_is_refused_naming_them(
        tmp_path, server):
    r, _ = edges.run(tmp_path, server, agent="nested_workflow", criteria=SAID)
    assert r.exit_code == 2, r.output
    flat = " ".join(r.output.split())
    assert "is a Workflow with 2 LlmAgents ('checker', 'answerer')" in flat, r.output
    assert "prompt_agent: checker" in flat
    assert server.requests == []


def test_the_budget_refuses_a_later_nodes_call_and_stops_the_run(tmp_path, server):
    server.enqueue(Reply(text="A-1: shipped.", output_tokens=3000), Reply(text="never sent"))
    r, report = edges.run(
        tmp_path, server, agent="graph_workflow", agent_extra=", prompt_agent: writer",
        mocks=MOCKS, criteria=SAID,
        extra="budget: 6.0\npricing: {'gemini:gemini-2.0-flash': {input: 0, output: 1000}}\n")
    assert len(server.requests) == 1, r.output  # the writer's call was never sent
    result = report["cases"][0]["results"][0]
    assert result["status"] == "error" and "budget" in result["error"].lower(), result
    assert "raised" not in result["error"]  # cycle's own refusal, not wrapped as ADK's
    assert report["summary"]["stop_reason"], report["summary"]


def test_a_tool_node_answers_from_its_mock_and_without_one_never_runs(tmp_path, server):
    """A tool as a graph node runs with no model asking: cycle's mocks answer it as they
    answer an LlmAgent's call, and an unmocked one is the iteration's error, not a real
    refund."""
    server.enqueue(Reply(text="Refund A-1, please."))
    r, report = edges.run(tmp_path, server, agent="tool_node_workflow",
                          mocks="{refund: {value: {ok: true}}}",
                          criteria="[{id: ok, check: {type: contains, values: [ok]}}]")
    assert r.exit_code == 0, r.output
    result = report["cases"][0]["results"][0]
    assert result["output"] == '{"ok": true}'  # the tool node's answer ends the workflow
    (called,) = [e for e in result["trace"] if e["kind"] == "tool_result"]
    assert called["tool"] == "refund" and called["result"] == {"ok": True}
    assert adk_agents.CALLS == []

    server.reset()
    server.enqueue(Reply(text="Refund A-1, please."))
    # a project of its own: its report is the only one read (two runs' names in one
    # second sort in any order)
    (unmocked := tmp_path / "unmocked").mkdir()
    r, report = edges.run(unmocked, server, agent="tool_node_workflow", criteria=SAID)
    assert r.exit_code == 3, r.output
    result = report["cases"][0]["results"][0]
    assert "called tool 'refund', which has no mock" in result["error"], result
    assert adk_agents.CALLS == []  # the real refund never ran


def test_an_agent_a_function_node_runs_itself_is_refused_before_its_call(tmp_path, server):
    """ctx.run_node(agent) in a function node: an LlmAgent cycle cannot find before the
    run, so its model is not cycle's. Its call is refused (no request leaves for it), and
    the error names it and the fix."""
    server.enqueue(Reply(text="Front: refund A-1."), Reply(text="never sent"))
    r, report = edges.run(tmp_path, server, agent="dynamic_workflow", criteria=SAID)
    assert r.exit_code == 3, r.output
    assert len(server.requests) == 1  # the graph's agent's call only
    error = report["cases"][0]["results"][0]["error"]
    assert "the LlmAgent 'hidden' is not in the ADK agent's tree" in error, error
    assert "Make 'hidden' a node of the Workflow's edges" in error
    assert adk_agents.CALLS == []
