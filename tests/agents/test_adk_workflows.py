"""An ADK workflow root (SequentialAgent, LoopAgent) through ``cycle run``: every LlmAgent
of its tree calls cycle's model (cost, budget, mocks and trace for each step), the prompt
is the instruction of the LlmAgent the config names (or of the only one), the answer is
the last final response, and a tree cycle cannot place the prompt in is refused."""

from __future__ import annotations

import pytest

from cycle.testing.server import Reply
from tests.agents import adk_agents
from tests.agents import test_adk_edges as edges

# test_adk_edges' fixtures (a loopback server, the key set)
server, _fresh = edges.server, edges._fresh

# the test agents build ADK's workflow agents, which ADK marks deprecated (for Workflow)
pytestmark = pytest.mark.filterwarnings("ignore:.*Agent is deprecated:DeprecationWarning")

SAID = "[{id: said, check: {type: contains, values: [shipped]}}]"
WRITER = ", prompt_agent: writer"
MOCKS = "{lookup_order: {value: {status: shipped}}, refund: {value: {ok: true}}}"


def _pipeline_replies(server) -> None:
    server.enqueue(Reply(tool_calls=[("lookup_order", {"order": "A-1"})]),
                   Reply(text="A-1: shipped."),
                   Reply(tool_calls=[("refund", {"order": "A-1"})]),
                   Reply(text="Your order A-1 has shipped; refunded."))


def test_a_sequential_root_routes_every_step_through_cycle_with_the_prompt_agent_chosen(
        tmp_path, server):
    _pipeline_replies(server)
    r, report = edges.run(tmp_path, server, agent="pipeline", agent_extra=WRITER,
                          mocks=MOCKS, criteria=SAID)
    assert r.exit_code == 0, r.output
    assert adk_agents.CALLS == []  # both steps' tools were the mocks
    result = report["cases"][0]["results"][0]
    assert result["output"] == "Your order A-1 has shipped; refunded."  # the last step's
    trace = result["trace"]
    models = [e for e in trace if e["kind"] == "model"]
    assert len(models) == 4 and all(e["cost"] > 0 for e in models)  # both steps, costed
    assert result["agent_cost"] == pytest.approx(sum(e["cost"] for e in models))
    assert report["summary"]["usage"]["agent"]["calls"] == 4  # the run's account has both
    assert [(e["tool"], e["result"]) for e in trace if e["kind"] == "tool_result"] == [
        ("lookup_order", {"status": "shipped"}), ("refund", {"ok": True})]
    # the researcher keeps its own instruction; the writer's is the versioned prompt
    assert "Look the order up." in server.requests[0].system
    assert "You are the front desk." not in server.requests[0].system
    assert "You are the front desk." in server.requests[2].system
    assert "Answer the customer." not in server.requests[2].system


def test_the_budget_refuses_the_second_steps_call_and_stops_the_run(tmp_path, server):
    """Each call reserves its worst case (4096 tokens of output unless max_tokens says
    less): at $1000 a million output tokens the cap fits the first step's call, whose
    answer spends most of it, and not the second step's."""
    server.enqueue(Reply(text="A-1: shipped.", output_tokens=3000), Reply(text="never sent"))
    r, report = edges.run(
        tmp_path, server, agent="pipeline", agent_extra=WRITER, mocks=MOCKS, criteria=SAID,
        extra="budget: 6.0\npricing: {'gemini:gemini-2.0-flash': {input: 0, output: 1000}}\n")
    assert len(server.requests) == 1, r.output  # the writer's call was never sent
    result = report["cases"][0]["results"][0]
    assert result["status"] == "error" and "budget" in result["error"].lower(), result
    assert "raised" not in result["error"]  # cycle's own refusal, not wrapped as ADK's
    assert report["summary"]["stop_reason"], report["summary"]  # so the run stopped there


def test_a_workflow_root_with_one_llm_agent_gives_it_the_prompt(tmp_path, server):
    server.enqueue(Reply(text="It has shipped."))
    r, _ = edges.run(tmp_path, server, agent="workflow_agent", criteria=SAID)
    assert r.exit_code == 0, r.output
    assert "You are the front desk." in server.requests[0].system
    assert "Step." not in server.requests[0].system


PIPELINE = "the ADK agent tests.agents.adk_agents:pipeline"


@pytest.mark.parametrize("extra, said", [
    ("", (f"{PIPELINE} is a SequentialAgent with 2 LlmAgents ('researcher', 'writer'): cycle"
          " cannot tell which one's instruction is the versioned prompt")),
    (", prompt_agent: editor", f"the prompt agent 'editor' of {PIPELINE} is not in its tree"),
    (", prompt_agent: pipeline",
     f"'pipeline' of {PIPELINE} is a SequentialAgent, which takes no instruction"),
])
def test_a_tree_without_a_clear_prompt_agent_is_refused_naming_the_choices(
        tmp_path, server, extra, said):
    r, _ = edges.run(tmp_path, server, agent="pipeline", agent_extra=extra, criteria=SAID)
    assert r.exit_code == 2, r.output
    flat = " ".join(r.output.split())
    assert said in flat, r.output
    assert "'researcher', 'writer'" in flat or "prompt_agent: researcher" in flat, r.output
    assert "cycle.yaml:2" in r.output
    assert server.requests == []


def test_a_loop_runs_to_max_iterations_and_answers_with_its_last_final_response(
        tmp_path, server):
    server.enqueue(Reply(text="Draft 1: shipped."), Reply(text="Too curt."),
                   Reply(text="Draft 2: it has shipped."), Reply(text="Still curt."))
    r, report = edges.run(tmp_path, server, agent="refining_loop",
                          agent_extra=", prompt_agent: drafter", criteria=SAID)
    result = report["cases"][0]["results"][0]
    assert len(server.requests) == 4, r.output  # two rounds of two steps, then max_iterations
    assert result["output"] == "Still curt.", result
    assert "You are the front desk." in server.requests[2].system  # the drafter, again


def test_a_loop_ended_by_exit_loop_runs_it_unmocked_and_keeps_the_last_text_answer(
        tmp_path, server):
    """exit_loop is ADK's control flow (as transfer_to_agent is), not a tool to mock: it
    runs, the trace names who ended the loop, and its answer (no text) is not the
    workflow's: the drafter's draft is."""
    server.enqueue(Reply(text="Draft 1: shipped."), Reply(tool_calls=[("exit_loop", {})]))
    r, report = edges.run(tmp_path, server, agent="refining_loop",
                          agent_extra=", prompt_agent: drafter", criteria=SAID)
    assert r.exit_code == 0, r.output
    result = report["cases"][0]["results"][0]
    assert result["output"] == "Draft 1: shipped.", result
    assert len(server.requests) == 2
    (ended,) = [e for e in result["trace"] if e["kind"] == "tool_result"]
    assert ended["tool"] == "exit_loop" and ended["result"] == {"from": "critic"}, ended


def test_parallel_branches_each_go_through_cycle_and_the_summary_step_answers(
        tmp_path, server):
    """The branches' calls arrive in ADK's order, so each reply serves either: both are
    costed, each with its own instruction, and the summary (the prompt agent) answers."""
    server.enqueue(Reply(text="Fine."), Reply(text="Fine."),
                   Reply(text="Tone and facts: shipped."))
    r, report = edges.run(tmp_path, server, agent="fan_out", criteria=SAID,
                          agent_extra=", prompt_agent: summary",
                          mocks="{lookup_order: {value: {status: shipped}}}")
    assert r.exit_code == 0, r.output
    result = report["cases"][0]["results"][0]
    assert result["output"] == "Tone and facts: shipped.", result
    models = [e for e in result["trace"] if e["kind"] == "model"]
    assert len(models) == 3 and all(e["cost"] > 0 for e in models)
    assert {"Judge the tone." in q.system for q in server.requests[:2]} == {True, False}
    assert "You are the front desk." in server.requests[2].system


def test_prompt_agent_is_only_for_an_adk_agent():
    from pydantic import ValidationError

    from cycle.assemble.config import AgentConfig

    with pytest.raises(ValidationError, match="prompt_agent is for an adk agent"):
        AgentConfig(model="gemini:gemini-2.0-flash", prompt_agent="writer")


def test_each_model_call_of_a_sequential_run_names_its_agent_in_the_stored_trace_and_report(
        tmp_path, server):
    """Which step made which call: the stored trace names the LlmAgent of each model turn,
    in order, the run's markdown report shows it on the transcript's lines, and an
    OpenTelemetry export names it on each chat span."""
    import json

    from click.testing import CliRunner

    from cycle.store import Store

    _pipeline_replies(server)
    r, _report = edges.run(tmp_path, server, agent="pipeline", agent_extra=WRITER,
                           mocks=MOCKS, criteria=SAID)
    assert r.exit_code == 0, r.output
    with Store.open(tmp_path / "s.db") as store:
        (stored,) = store.runs.load_results(json.loads(r.output)["run_id"])
    assert [e.agent for e in stored.trace if e.kind == "model"] == [
        "researcher", "researcher", "writer", "writer"]
    (markdown,) = (tmp_path / "reports").glob("*.md")
    shown = markdown.read_text()
    assert "assistant [researcher] -> lookup_order(order=A-1)" in shown, shown
    assert "assistant [writer] -> refund(order=A-1)" in shown
    assert "assistant [writer]: Your order A-1 has shipped; refunded." in shown
    # and an OpenTelemetry export's chat spans carry it as gen_ai.agent.name
    from cycle.cli import cli

    out = tmp_path / "otel.json"
    exported = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "export", "otel",
                                        json.loads(r.output)["run_id"], "--out", str(out)])
    assert exported.exit_code == 0, exported.output
    spans = sorted((s for rs in json.loads(out.read_text())["resourceSpans"]
                    for scope in rs["scopeSpans"] for s in scope["spans"]
                    if s["name"].startswith("chat ")), key=lambda s: int(s["startTimeUnixNano"]))
    assert [next(a["value"]["stringValue"] for a in s["attributes"]
                 if a["key"] == "gen_ai.agent.name") for s in spans] == [
        "researcher", "researcher", "writer", "writer"]
