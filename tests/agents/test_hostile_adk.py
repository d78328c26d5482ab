"""An ADK agent as a hostile one behaves, through ``cycle run``: one that raises, one
that ends without a final response, a model that calls a mocked tool with the wrong
arguments, an answer with a lone surrogate. Each is one clear error of the iteration
(exit 3) or an answer judged as it is: never an internal error, never a leaked key."""

from __future__ import annotations

import json
from pathlib import Path

from cycle.testing.server import LoopbackServer, Reply
from tests.agents import adk_agents
from tests.agents import test_adk_edges as edges

# test_adk_edges' fixtures (a loopback server, the key set) and key
server, _fresh, KEY = edges.server, edges._fresh, edges.KEY

SAID = "[{id: said, check: {type: contains, values: [delivered]}}]"


def run(tmp_path: Path, server: LoopbackServer, *, agent: str, mocks: str = "{}",
        criteria: str = SAID):
    """test_adk_edges' run of one case; its first result."""
    r, report = edges.run(tmp_path, server, agent=agent, criteria=criteria, mocks=mocks,
                          cases="- {id: c, input: {question: Where is A-1?}}\n")
    assert "Traceback" not in r.output and "internal error" not in r.output.lower(), r.output
    return r, report["cases"][0]["results"][0] if report else None


def test_a_lone_surrogate_in_an_adk_agents_answer_is_kept_as_u_fffd(tmp_path, server):
    server.enqueue(Reply(text="delivered \ud800 today"))
    r, got = run(tmp_path, server, agent="plain_agent")
    assert r.exit_code == 0, r.output
    assert got["status"] == "passed" and got["output"] == "delivered \ufffd today", got


def test_an_adk_agent_that_raises_is_an_error_without_the_key(tmp_path, server):
    r, got = run(tmp_path, server, agent="raising_agent")
    assert r.exit_code == 3, r.output
    assert got["status"] == "error", got
    assert "RuntimeError" in got["error"] and "the agent broke" in got["error"], got
    assert got["error"].endswith("\ufffd"), got  # its lone surrogate, kept as U+FFFD
    written = r.output + "".join(p.read_text() for p in (tmp_path / "reports").glob("*"))
    assert KEY not in written and "\x1b" not in r.output


def test_an_adk_agent_that_ends_without_a_final_response_is_an_error(tmp_path, server):
    server.enqueue(Reply(tool_calls=[("transfer_to_agent", {"agent_name": "silent"})]))
    r, got = run(tmp_path, server, agent="silent_router")
    assert r.exit_code == 3, r.output
    assert got["status"] == "error", got  # not an answer "" judged a failure
    assert "no final response" in got["error"], got


def test_a_custom_root_is_refused_before_any_call_as_cycle_cannot_see_inside_it(
        tmp_path, server):
    """A workflow root runs (test_adk_workflows); a BaseAgent subclass of the user's runs
    whatever its own code says, so cycle cannot promise to route its calls."""
    r, _ = run(tmp_path, server, agent="custom_root")
    assert r.exit_code == 2, r.output
    flat = " ".join(r.output.split())
    assert "is a custom Custom: cycle cannot see what its own _run_async_impl runs" in flat
    assert "SequentialAgent, ParallelAgent, LoopAgent" in flat, r.output
    assert server.requests == []


def test_a_mocked_tool_called_with_the_wrong_arguments_is_a_tool_error_as_for_every_kind(
        tmp_path, server):
    """The model's bad call is the agent's doing, not a breakage: the tool's error goes
    back to the model (as a prompt agent's does) and no_tool_errors fails the case; no
    mock and no real tool ran on arguments they do not take."""
    server.enqueue(Reply(tool_calls=[("lookup_order", {"bogus": 1})]),
                   Reply(text="It was delivered."))
    r, got = run(tmp_path, server, agent="root_agent",
                 mocks="{lookup_order: {function: 'tests.agents.test_hostile_adk:strict_lookup'}}",
                 criteria="[{id: clean, check: {type: no_tool_errors}}]")
    assert adk_agents.CALLS == [] and STRICT == []
    assert r.exit_code == 1, r.output
    assert got["status"] == "failed", got
    (error,) = [e for e in got["trace"] if e["kind"] == "tool_error"]
    assert error["tool"] == "lookup_order" and "schema" in error["error"], error
    told = json.dumps(server.requests[1].body["contents"][-1])
    assert "schema" in told  # the model was told, as a real tool's failure would be


STRICT: list[dict] = []


def strict_lookup(arguments, context):
    """A mock that reads the argument the tool declares."""
    STRICT.append(arguments)
    return {"order": arguments["order"], "status": "delivered"}
