"""ADK agents under test (``agent: {adk: ...}``): ADK's own Runner runs the agent, its
model calls go through cycle's model to the loopback server with the real google-genai
SDK, its instruction is the versioned prompt and its tools answer from cycle's mocks."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing.server import LoopbackServer, Reply
from tests.agents import adk_agents

PROMPT = """\
id: order-support
system: "You are {{ shop }}'s support agent. Look the order up before you answer."
user_template: "{{ question }}"
params: {model: "gemini:gemini-2.0-flash"}
tools:
  - name: lookup_order
    description: Returns an order's status (the versioned description).
"""

CASES = """\
- id: where
  input: {shop: Acme, question: Where is A-1?}
"""


def project(tmp_path: Path, server: LoopbackServer, *, agent: str = "root_agent",
            mocks: str = "lookup_order: {value: {status: delivered}}",
            extra: str = "") -> Path:
    (tmp_path / "prompt.yaml").write_text(PROMPT)
    (tmp_path / "cases.yaml").write_text(CASES)
    (tmp_path / "cycle.yaml").write_text(textwrap.dedent(f"""\
        prompt: prompt.yaml
        agent: {{adk: "tests.agents.adk_agents:{agent}"}}
        criteria:
          - id: looked_up
            check: {{type: tool_called, tool: lookup_order, args: {{order: A-1}}}}
          - id: says_delivered
            check: {{type: contains, values: [delivered]}}
        cases: [cases.yaml]
        run: {{iterations: 1}}
        providers: {{gemini: {{base_url: "{server.gemini_base_url}"}}}}
        tools:
          mocks:
            {mocks}
        """) + textwrap.dedent(extra))
    return tmp_path / "cycle.yaml"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test-0123456789")
    adk_agents.CALLS.clear()
    with LoopbackServer() as srv:
        yield srv


def run(tmp_path: Path, *args: str):
    return CliRunner().invoke(cli, ["--store", str(tmp_path / "store.db"), "run", *args,
                                    "--no-reports", "--json"])


def test_an_adk_agent_runs_with_mocked_tools_the_versioned_instruction_and_cycles_model(
        tmp_path, server):
    server.enqueue(Reply(tool_calls=[("lookup_order", {"order": "A-1"})]),
                   Reply(text="Your order A-1 was delivered."))
    cfg = project(tmp_path, server)
    result = run(tmp_path, str(cfg))
    assert result.exit_code == 0, result.output
    assert adk_agents.CALLS == []  # the real tool never ran
    first, second = server.requests
    assert first.system.startswith("You are Acme's support agent.")  # the prompt, rendered
    assert "agent's own instruction" not in first.system
    assert first.last_user == "Where is A-1?"
    declared = {d["name"]: d for t in first.body["tools"] for d in t["functionDeclarations"]}
    assert declared["lookup_order"]["description"].endswith("(the versioned description).")
    assert "refund" in declared  # the agent's tool the prompt does not redescribe
    # the tool's answer went back to the model as ADK's function response
    assert "delivered" in json.dumps(second.body["contents"][-1])
    report = json.loads(result.stdout)
    case = report["cases"][0]
    assert case["pass_rate"] == 1.0, case
    assert report["summary"]["cost"] > 0


def test_an_unmocked_tool_is_an_error_of_the_iteration_and_the_real_tool_never_runs(
        tmp_path, server):
    server.enqueue(Reply(tool_calls=[("refund", {"order": "A-1"})]), Reply(text="Refunded."))
    cfg = project(tmp_path, server)
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "store.db"), "run", str(cfg),
                                      "--no-reports"])
    assert adk_agents.CALLS == []
    assert "1 error" in result.output, result.output
    assert "called tool 'refund', which has no mock" in result.output, result.output
    assert "Traceback" not in result.output


def test_passthrough_runs_the_agents_real_function_and_mock_state_reaches_the_session(
        tmp_path, server):
    server.enqueue(Reply(tool_calls=[("lookup_order", {"order": "A-1"}), ("refund", {"order": "A-1"})]),
                   Reply(text="It was delivered and I refunded it."))
    cfg = project(tmp_path, server, mocks="""lookup_order: {passthrough: true}
            refund: {value: {ok: true}, state: {user.refunds: 1, session.refunded: A-1}}""",
                  extra="""\
        """)
    (tmp_path / "cycle.yaml").write_text((tmp_path / "cycle.yaml").read_text().replace(
        "check: {type: contains, values: [delivered]}",
        "check: {type: state_value, path: user.refunds, equals: 1}"))
    result = run(tmp_path, str(cfg))
    assert result.exit_code == 0, result.output
    assert adk_agents.CALLS == ["lookup_order A-1"]  # passthrough, and only that
    report = json.loads(result.stdout)
    assert report["cases"][0]["pass_rate"] == 1.0, report["cases"][0]
    # the real function's answer went back to the model
    assert "shipped" in json.dumps(server.requests[-1].body["contents"])


@pytest.mark.parametrize(("agent", "message"), [
    ("not_an_agent", "is a int, not an ADK agent"),
    ("nowhere", "has no 'nowhere'"),
])
def test_an_agent_path_that_is_not_an_adk_agent_is_refused_naming_the_line(
        tmp_path, server, agent, message):
    cfg = project(tmp_path, server, agent=agent)
    result = run(tmp_path, str(cfg))
    assert result.exit_code != 0
    assert message in result.output and "cycle.yaml:2" in result.output, result.output
    assert "Traceback" not in result.output
    assert server.request_count == 0


def test_a_factory_is_called_and_a_mock_for_a_tool_the_agent_lacks_is_refused(tmp_path, server):
    cfg = project(tmp_path, server, agent="make_agent", mocks="cancel_order: {value: ok}")
    result = run(tmp_path, str(cfg))
    assert result.exit_code != 0
    assert "a mock for 'cancel_order'" in result.output
    assert "lookup_order, refund" in result.output, result.output
    assert server.request_count == 0


QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


def test_cycle_improve_improves_an_adk_agents_instruction_and_exports_it_back(
        tmp_path, monkeypatch):
    import shutil

    for name in ("cases", "prompts"):
        shutil.copytree(QUICKSTART / name, tmp_path / name)
    config = (QUICKSTART / "cycle.yaml").read_text().replace(
        "agent: offline:default",
        'agent: {adk: "tests.agents.adk_agents:plain_agent", model: "offline:default"}')
    (tmp_path / "cycle.yaml").write_text(config)
    monkeypatch.chdir(tmp_path)
    adk_agents.CALLS.clear()
    r = CliRunner().invoke(cli, ["improve", "--headless", "--yes"])
    assert r.exit_code == 0, r.output
    report = next(line for line in r.stdout.splitlines() if line.startswith("report: "))
    data = json.loads((tmp_path / report.removeprefix("report: ").strip()).with_suffix(
        ".json").read_text())
    assert data["final"]["score"] > data["initial"]["score"] + 20, data
    assert data["final"]["version"] != data["initial"]["version"]
    exported = CliRunner().invoke(cli, ["prompt", "export", "support-reply", "--system"])
    assert exported.exit_code == 0, exported.output
    original = (QUICKSTART / "prompts" / "support-reply.yaml").read_text()
    assert exported.stdout.strip() and exported.stdout.strip() not in original
    assert data["config"]["agent"] == "adk:tests.agents.adk_agents:plain_agent on offline:default"
    assert adk_agents.CALLS.count("model") >= 5 * 3 * 2  # ADK ran every case iteration
