"""Every agent kind gets the same guarantees, through the CLI as a user runs it: a
conversation of 3+ turns with scripted and simulated user turns, a mocked tool, an
unmocked tool (an error, and the real function never ran), a tool that asks the user,
a user agent that fails (an error, not a pass), end conditions and limits, and why
each conversation ended in the report. What a kind cannot do is refused before any
call (exit 2)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import clear_scripts, script
from tests.agents import kinds

PROMPT = """\
id: support
system: You help customers with refunds.
user_template: '{{ q }}'
params: {model: 'scripted:kinds'}
tools:
  - {name: lookup_order, function: 'tests.agents.kinds:lookup_order',
     parameters: {type: object, properties: {order: {type: string}}}}
  - {name: refund, function: 'tests.agents.kinds:refund',
     parameters: {type: object, properties: {order: {type: string}}}}
  - {name: approve, function: 'tests.agents.kinds:approve',
     parameters: {type: object, properties: {question: {type: string}}}}
"""

CASES = """\
- id: talk
  input: {q: I want a refund}
  conversation:
    follow_ups: [It is order A-1.]
    user: {model: 'scripted:user', persona: Dana, goal: a refund for A-1}
    max_turns: 6
  criteria:
    - {id: turns, check: {type: turn_count, min: 3}}
    - {id: looked, check: {type: tool_called, tool: lookup_order}}
    - {id: asked, check: {type: tool_called, tool: approve}}
- {id: unmocked, input: {q: refund-now please}}
- id: ends
  input: {q: I want a refund}
  conversation:
    follow_ups: [more, more, more]
    end_when: {state_matches: {session: {looked: {$exists: true}}}}
- id: limit
  input: {q: I want a refund}
  conversation: {follow_ups: [more, more, more], max_turns: 2}
- id: broken-user
  input: {q: I want a refund}
  conversation: {follow_ups: [It is A-1.]}
  user_agents: {approve: {function: 'tests.agents.edgefns:broken_user'}}
- id: asked
  input: {q: I want a refund}
  conversation:
    follow_ups: [more, more, more]
    end_when: {natural_language: {condition: the refund is under way, model: 'scripted:judge'}}
- id: custom
  input: {q: I want a refund}
  conversation:
    follow_ups: [more, more, more]
    end_when: {custom: 'tests.agents.test_termination:after_two'}
- id: slow
  input: {q: I want a refund}
  conversation: {follow_ups: [more, more, more, more], max_duration: 0.3}
  mocks: {lookup_order: {function: 'tests.agents.test_every_kind:slow_lookup'}}
"""


def slow_lookup(arguments, context):
    import time

    time.sleep(0.5)  # the first turn outlasts max_duration
    return {"status": "shipped"}


def condition(messages, tools, config):
    """The natural-language condition's model: it holds once the agent refunds."""
    return {"met": "; refunding" in messages[-1].content, "reason": "read the transcript"}

TOOLS = """\
tools:
  mocks:
    lookup_order: {value: {status: shipped}, state: {session.looked: true}}
    approve: {ask_user: true}
  user_agents:
    approve: {script: ['yes']}
"""


@pytest.fixture
def project(tmp_path: Path):
    kinds.RAN.clear()
    script("kinds", kinds.model, repeat=True)
    script("user", kinds.user, repeat=True)
    script("judge", condition, repeat=True)
    (tmp_path / "p.yaml").write_text(PROMPT)
    (tmp_path / "cases.yaml").write_text(CASES)
    yield tmp_path
    clear_scripts()


def run(project: Path, agent: str, tools: str = TOOLS) -> tuple[int, str]:
    (project / "cycle.yaml").write_text(textwrap.dedent("""\
        prompt: p.yaml
        %s
        criteria: [{id: clean, check: {type: no_tool_errors}}]
        cases: [cases.yaml]
        run: {iterations: 1, concurrency: 8}
        """) % agent + tools)
    r = CliRunner().invoke(cli, ["--store", str(project / "s.db"), "run",
                                 str(project / "cycle.yaml")])
    assert "Traceback" not in r.output, r.output
    return r.exit_code, r.output


def results(project: Path) -> dict[str, dict]:
    report = json.loads(max((project / "reports").glob("*.json")).read_text())
    return {c["id"]: c["results"][0] for c in report["cases"]}


def ended(result: dict) -> str:
    final = result["trace"][-1]
    assert final["kind"] == "final"
    return final.get("reason") or ""


@pytest.fixture(params=["prompt", "python", "http", "adk"])
def agent(request):
    if request.param == "http":
        with kinds.Endpoint() as endpoint:
            yield f"agent: {{http: '{endpoint.url}', protocol: tools}}"
        return
    yield {"prompt": "agent: 'scripted:kinds'",
           "python": "agent: {function: 'tests.agents.kinds:python_agent'}",
           "adk": "agent: {adk: 'tests.agents.kinds:adk_agent'}"}[request.param]


def test_every_kind_holds_the_same_promises(project, agent):
    code, output = run(project, agent)
    assert code == 3, output  # some cases err (exit 3) or fail, by design
    got = results(project)

    talk = got["talk"]
    assert talk["status"] == "passed", talk
    said = [e["text"] for e in talk["trace"] if e["kind"] == "user"]
    assert "I want a refund" in said[0]  # a Python agent's input is its JSON
    assert said[1:] == ["It is order A-1.", "Yes, order A-1, go ahead."]  # script, then user
    assert talk["output"] == "Refund done."
    asked = [e for e in talk["trace"] if e["kind"] == "tool_result" and e["tool"] == "approve"]
    assert asked and asked[0]["result"] == "yes"  # the user agent answered the ask
    assert ended(talk) == "the simulated user was done after turn 3"

    unmocked = got["unmocked"]
    assert unmocked["status"] == "error" and "refund" in unmocked["error"]
    assert "mock" in unmocked["error"]

    ends = got["ends"]
    assert ends["status"] == "passed"
    assert ended(ends).startswith("the end condition held after turn 1")

    limit = got["limit"]
    assert limit["status"] == "failed"  # seed 003: max_turns reached means fail
    assert ended(limit).startswith("max_turns reached: 2 user turns")

    broken = got["broken-user"]
    assert broken["status"] == "error"
    assert "user agent function tests.agents.edgefns:broken_user" in broken["error"]

    asked = got["asked"]  # natural_language: a model read the transcript after each turn
    assert asked["status"] == "passed"
    assert ended(asked).startswith("the end condition held after turn 2")

    custom = got["custom"]
    assert ended(custom).startswith("the end condition held after turn 2")

    slow = got["slow"]  # max_duration: ended during turn 1, its trace kept, not judged
    assert slow["status"] == "terminated"
    assert ended(slow).startswith("max_duration reached: 0.3 s, during turn 1")
    assert any(e["kind"] == "user" for e in slow["trace"])

    assert kinds.RAN == []  # no real tool ran, whatever the kind


def test_a_markdown_transcript_says_why_a_conversation_ended(project):
    run(project, "agent: 'scripted:kinds'")
    markdown = max((project / "reports").glob("*.md")).read_text()
    assert "ended: max_turns reached: 2 user turns, with turns still to say" in markdown


def test_an_http_agent_that_runs_its_own_tools_is_refused_mocks(project):
    with kinds.Endpoint(speaks_protocol=False) as endpoint:
        code, output = run(project, f"agent: {{http: '{endpoint.url}'}}")
        assert code == 2, output
        assert "cycle.yaml" in output and "tools.mocks" in output
        assert "protocol: tools" in output
        # the hint says how (a wheel has no docs/ folder to point to)
        assert "docs/" not in output and '"tool_calls"' in output
        assert endpoint.requests == []  # refused before any call


def test_an_http_agent_gets_the_conversation_and_the_tools(project):
    with kinds.Endpoint() as endpoint:
        run(project, f"agent: {{http: '{endpoint.url}', protocol: tools}}")
        bodies = endpoint.requests
    assert all(b["tools"][0]["function"]["name"] == "lookup_order" for b in bodies)
    last = max(bodies, key=lambda b: len(b["messages"]))
    roles = [m["role"] for m in last["messages"]]
    assert roles.count("user") >= 3 and "tool" in roles
    assert last["message"] == last["messages"][max(
        i for i, m in enumerate(last["messages"]) if m["role"] == "user")]["content"]


def test_a_python_agent_not_given_the_conversation_is_refused_a_conversation(project):
    code, output = run(project, "agent: {function: "
                       "'tests.agents.kinds:python_agent_without_messages'}")
    assert code == 2, output
    assert "case talk is a conversation" in output and "messages parameter" in output
