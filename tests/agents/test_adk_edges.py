"""ADK's edges under evaluation: a passed-through tool gets ADK's ToolContext (its state
writes land in the case's state and trace), a hand-off to a sub-agent runs and is in the
trace, and an agent with a code executor is refused unless the config passes it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing.server import LoopbackServer, Reply
from tests.agents import adk_agents

KEY = "gm-test-0123456789"
PROMPT = """\
id: front
system: "You are the front desk."
user_template: "{{ question }}"
params: {model: "gemini:gemini-2.0-flash"}
"""


@pytest.fixture(scope="module")
def server():
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _fresh(server, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    server.reset()
    adk_agents.CALLS.clear()


def run(tmp_path: Path, server: LoopbackServer, *, agent: str, criteria: str, mocks: str = "{}",
        cases: str = "- {id: c, input: {question: Refund A-1}}\n", agent_extra: str = "",
        settings: str = "{iterations: 1}", extra: str = ""):
    """``cycle run --json`` of a project on the ADK agent; ``extra``: more of cycle.yaml."""
    (tmp_path / "prompt.yaml").write_text(PROMPT)
    (tmp_path / "cases.yaml").write_text(cases)
    (tmp_path / "cycle.yaml").write_text(textwrap.dedent(f"""\
        prompt: prompt.yaml
        agent: {{adk: "tests.agents.adk_agents:{agent}"{agent_extra}}}
        criteria: {criteria}
        cases: [cases.yaml]
        run: {settings}
        providers: {{gemini: {{base_url: "{server.gemini_base_url}"}}}}
        tools: {{mocks: {mocks}}}
        """) + extra)
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                 str(tmp_path / "cycle.yaml"), "--json"])
    reports = sorted((tmp_path / "reports").glob("*.json")) if (tmp_path / "reports").exists() else []
    return r, (json.loads(reports[-1].read_text()) if reports else None)


def test_a_passed_through_tool_gets_adks_tool_context_and_its_state_writes_are_kept(
        tmp_path, server):
    server.enqueue(Reply(tool_calls=[("remember_order", {"order": "A-1"})]),
                   Reply(text="Noted A-1."))
    r, report = run(
        tmp_path, server, agent="handing_off_agent",
        cases="- {id: c, input: {question: Refund A-1}, state: {user: {orders_seen: 2}}}\n",
        mocks="{remember_order: {passthrough: true}}",
        criteria="[{id: kept, check: {type: state_value, path: user.orders_seen, equals: 3}}]")
    assert r.exit_code == 0, r.output
    result = report["cases"][0]["results"][0]
    called = next(e for e in result["trace"] if e["kind"] == "tool_result")
    assert called["result"] == {"remembered": "A-1", "seen_before": 2}  # read the case's state
    written = [e["changes"] for e in result["trace"] if e["kind"] == "state"]
    assert written == [{"session.last_order": "A-1", "user.orders_seen": 3}]
    assert result["state"] == {"session": {"last_order": "A-1"}, "user": {"orders_seen": 3}}


def test_a_hand_off_to_a_sub_agent_runs_without_a_mock_and_is_in_the_trace(tmp_path, server):
    server.enqueue(Reply(tool_calls=[("transfer_to_agent", {"agent_name": "refunds"})]),
                   Reply(tool_calls=[("refund", {"order": "A-1"})]),
                   Reply(text="Refunded A-1."))
    r, report = run(tmp_path, server, agent="handing_off_agent",
                    mocks="{refund: {value: {ok: true}}}",
                    criteria="[{id: handed, check: {type: tool_called, tool: transfer_to_agent}},"
                             " {id: said, check: {type: contains, values: [Refunded]}}]")
    assert r.exit_code == 0, r.output
    assert adk_agents.CALLS == []  # the sub-agent's refund was the mock
    trace = report["cases"][0]["results"][0]["trace"]
    handoff = next(e for e in trace if e.get("tool") == "transfer_to_agent")
    assert handoff["result"] == {"from": "front_desk", "to": "refunds"}
    assert [e["tool"] for e in trace if e["kind"] == "tool_result"] == ["transfer_to_agent",
                                                                         "refund"]
    # the sub-agent answered, with its own instruction
    assert "You handle refunds." in server.requests[1].system


def test_a_timeout_in_an_adk_agent_names_it_and_its_models_latency(tmp_path, server):
    """Before: "the case took longer than 1 s (agent)", not saying which agent."""
    from cycle.testing import Fault

    server.enqueue(Fault.slow(5, "late"))
    r, report = run(tmp_path, server, agent="plain_agent", settings="{iterations: 1, timeout: 1}",
                    criteria="[{id: said, check: {type: contains, values: [x]}}]")
    error = report["cases"][0]["results"][0]["error"]
    assert error.startswith("timeout: the case took longer than 1 s (agent: the ADK agent "
                            "tests.agents.adk_agents:plain_agent on its model "
                            "gemini:gemini-2.0-flash); no model call of this run had been "
                            "answered yet"), (error, r.output)


def test_an_agent_with_a_code_executor_is_refused_before_any_call(tmp_path, server):
    r, _ = run(tmp_path, server, agent="coding_agent",
               criteria="[{id: x, check: {type: contains, values: [a]}}]")
    assert r.exit_code == 2, r.output
    assert ("runs model-written code during evaluation (a code executor: "
            "UnsafeLocalCodeExecutor on 'analyst')") in r.output
    assert "allow_code_execution: true" in r.output
    assert "cycle.yaml:2" in r.output
    assert server.requests == []


def test_code_execution_passed_through_explicitly_runs(tmp_path, server):
    server.enqueue(Reply(text="a reply"))
    r, _ = run(tmp_path, server, agent="coding_agent", agent_extra=", allow_code_execution: true",
               criteria="[{id: x, check: {type: contains, values: [reply]}}]")
    assert r.exit_code == 0, r.output
    assert len(server.requests) == 1


def test_adk_telemetry_is_light_when_nothing_records_and_adks_own_when_the_user_records(
        monkeypatch):
    """Unrecorded, ADK's experimental GenAI attributes (each request's whole history turned
    into span attributes) are work for nothing, so an evaluation takes ADK's stable path;
    a user who set a tracer provider keeps ADK's own defaults, the spans they expect."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    from cycle.agents.adk import _telemetry

    monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    assert not _telemetry().should_use_experimental_genai_semconv
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: TracerProvider())
    assert _telemetry().should_use_experimental_genai_semconv
