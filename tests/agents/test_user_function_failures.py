"""What a user's function raises is an error of the iteration naming it (seed 000), not
a tool error the agent sees and talks past; a mock's deliberate ``error:`` stays a tool
error. And a user function that blocks slows only its own case."""

from __future__ import annotations

import asyncio
import json
import textwrap
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.agents import PromptAgent
from cycle.cases import TestCase
from cycle.cli import cli
from cycle.errors import BadRequestError
from cycle.llm.base import ModelOutput
from cycle.llm.registry import get_model
from cycle.mocks import MockSpec
from cycle.records import Prompt, ToolCall, ToolDef
from cycle.testing import clear_scripts, script
from tests.agents import edgefns


def calls_approve(messages, tools, config):
    """Asks ``approve`` once, then says it is approved whatever the tool answered: a case
    whose tool failure the agent talks past (it passes a 'contains approved' check)."""
    if not any(m.role == "tool" for m in messages):
        return ModelOutput(tool_calls=(ToolCall(id="1", name="approve",
                                                arguments={"amount": 20}),))
    return "Your refund is approved."


@pytest.fixture
def project(tmp_path: Path):
    script("agent", calls_approve, repeat=True)
    (tmp_path / "p.yaml").write_text(textwrap.dedent("""\
        id: p
        user_template: '{{ q }}'
        params: {model: 'scripted:agent'}
        tools: [{name: approve, parameters: {type: object, properties: {amount: {type: number}}}}]
        """))
    (tmp_path / "cases.yaml").write_text("- {id: refund, input: {q: refund me}}\n")
    yield tmp_path
    clear_scripts()


def run(tmp_path: Path, tools: str, settings: str = "{iterations: 1}") -> tuple[int, dict]:
    (tmp_path / "cycle.yaml").write_text(textwrap.dedent("""\
        prompt: p.yaml
        criteria: [{id: said, check: {type: contains, values: [approved]}}]
        cases: [cases.yaml]
        run: %s
        """) % settings + tools)
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                 str(tmp_path / "cycle.yaml"), "--json"])
    assert "Traceback" not in r.output
    return r.exit_code, json.loads(r.stdout)


def last_report(tmp_path: Path) -> dict:
    return json.loads(max((tmp_path / "reports").glob("*.json")).read_text())


@pytest.mark.parametrize(("tools", "named"), [
    ("tools: {mocks: {approve: {function: 'tests.agents.edgefns:broken_mock'}}}\n",
     ("mock function tests.agents.edgefns:broken_mock of tool 'approve' (case 'refund') raised "
     "RuntimeError: the mock's database is gone")),
    ("tools: {user_agents: {approve: {function: 'tests.agents.edgefns:broken_user'}}}\n",
     ("user agent function tests.agents.edgefns:broken_user for tool 'approve' (case 'refund') "
     "raised ValueError: the user agent crashed")),
    (("tools: {user_agents: {approve: {script: [yes], "
     "format_prompt: 'tests.agents.edgefns:broken_bridge'}}}\n"),
     ("format_prompt tests.agents.edgefns:broken_bridge of the user agent for tool 'approve' "
     "(case 'refund') raised KeyError")),
    ("tools: {user_agents: {approve: {model: 'scripted:down'}}}\n",
     "the user agent answering tool 'approve' of case 'refund' failed: BadRequestError"),
], ids=["mock-function", "user-agent", "bridge", "user-agent-model-down"])
def test_a_failing_user_function_is_an_error_naming_it_and_the_case_cannot_pass(
        project, tools, named):
    script("down", [BadRequestError("the user model is gone", status=404)], repeat=True)
    code, report = run(project, tools)
    summary = report["summary"]
    assert (summary["errors"], summary["passed"]) == (1, 0), summary
    assert code != 0
    error = last_report(project)["cases"][0]["results"][0]["error"]
    assert named in error, error


def test_a_mocks_deliberate_error_stays_a_tool_error_the_agent_sees(project):
    code, report = run(project, "tools: {mocks: {approve: {error: card declined}}}\n")
    assert code == 0, report
    assert report["summary"]["errors"] == 0 and report["summary"]["passed"] == 1


ORDER = ToolDef(name="lookup_order", description="Find an order.", parameters={
    "type": "object", "properties": {"order": {"type": "string"}}})
PROMPT = Prompt(id="p", system="Help.", user_template="{{ input }}", tools=(ORDER,))


def looks_up(messages, tools, config):
    if not any(m.role == "tool" for m in messages):
        return ModelOutput(tool_calls=(ToolCall(id="1", name="lookup_order",
                                                arguments={"order": "A-1"}),))
    return "done: " + messages[-1].content


async def test_a_blocking_mock_slows_only_its_own_case():
    script("agent", looks_up, repeat=True)
    edgefns.RELEASE.clear()
    edgefns.THREADS.clear()
    agent = PromptAgent(PROMPT, get_model("scripted:agent"))
    slow = TestCase(id="slow", input="A-1?", mocks={
        "lookup_order": MockSpec(function="tests.agents.edgefns:slow_mock")})
    fast = [TestCase(id=f"fast{i}", input="A-1?", mocks={
        "lookup_order": MockSpec(function="tests.agents.edgefns:fast_mock")}) for i in range(3)]
    try:
        slow_task = asyncio.create_task(agent.run(slow, iteration=0))
        # were the slow mock on the event loop, nothing else could run until it is released
        done = await asyncio.wait_for(asyncio.gather(
            *(agent.run(c, iteration=0) for c in fast)), timeout=10)
        assert not slow_task.done()  # still waiting on its mock while the others finished
        assert all(r.output == 'done: {"status": "shipped"}' for r in done)
        assert max(r.duration for r in done) < 2.0
        edgefns.RELEASE.set()
        slowed = await asyncio.wait_for(slow_task, timeout=10)
        assert slowed.output == 'done: {"status": "slow but fine"}'
        assert slowed.duration > max(r.duration for r in done)
        assert threading.main_thread().name not in edgefns.THREADS
    finally:
        edgefns.RELEASE.set()
        clear_scripts()
        await agent.aclose()


def test_sync_end_conditions_and_checks_run_off_the_event_loop(project):
    edgefns.THREADS.clear()
    (project / "cases.yaml").write_text(textwrap.dedent("""\
        - id: refund
          input: {q: refund me}
          conversation:
            follow_ups: [thanks]
            end_when: {custom: 'tests.agents.edgefns:condition_in_a_thread'}
        """))
    _code, report = run(project, "tools: {mocks: {approve: {value: ok}}}\n")
    assert report["summary"]["errors"] == 0, report
    (project / "cycle.yaml").write_text((project / "cycle.yaml").read_text().replace(
        "{type: contains, values: [approved]}",
        "{type: python, function: 'tests.agents.edgefns:check_in_a_thread'}"))
    r = CliRunner().invoke(cli, ["--store", str(project / "s.db"), "run",
                                 str(project / "cycle.yaml"), "--json", "--no-reports"])
    assert json.loads(r.stdout)["summary"]["passed"] == 1, r.output
    assert len(edgefns.THREADS) >= 2
    assert threading.main_thread().name not in edgefns.THREADS


def test_a_mock_blocking_past_the_timeout_errs_its_own_case_only(project):
    edgefns.RELEASE.clear()
    (project / "cases.yaml").write_text(
        "- {id: stuck, input: {q: refund me}, "
        "mocks: {approve: {function: 'tests.agents.edgefns:slow_mock'}}}\n"
        + "".join(f"- {{id: quick{i}, input: {{q: refund me}}}}\n" for i in range(3)))
    try:
        _code, report = run(project, "tools: {mocks: {approve: {value: ok}}}\n",
                            settings="{iterations: 1, timeout: 0.5, concurrency: 4}")
    finally:
        edgefns.RELEASE.set()  # the stuck thread ends (a thread cannot be killed)
    by_id = {c["id"]: c for c in last_report(project)["cases"]}
    stuck = by_id["stuck"]["results"][0]
    assert stuck["status"] == "error" and stuck["error"].startswith("timeout"), stuck
    assert all(by_id[f"quick{i}"]["results"][0]["status"] == "passed" for i in range(3))
    assert report["summary"]["passed"] == 3
