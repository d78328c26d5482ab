"""A Python agent that calls its declared tool directly gets the mock (seed 000's
runtime interception), each concurrent case its own; unmocked, it is an error and the
real tool never runs; outside an iteration the real function is unchanged."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from tests.agents import direct_agents, realtools

TOOLS = """\
tools:
  - name: refund
    function: tests.agents.realtools:refund
    parameters: {type: object, properties: {order: {type: string}, amount: {type: number}},
                 required: [order]}
  - name: lookup
    function: tests.agents.realtools:lookup
    parameters: {type: object, properties: {order: {type: string}}}
"""


@pytest.fixture
def project(tmp_path: Path):
    realtools.RAN.clear()
    (tmp_path / "p.yaml").write_text("id: p\nuser_template: '{{ order }}'\n" + TOOLS)
    cases = "".join(
        f"- {{id: c{i}, input: {{order: A-{i}}}, mocks: {{refund: {{value: {{mocked: A-{i}}}}}}}}}\n"
        for i in range(6))
    (tmp_path / "cases.yaml").write_text(cases)
    return tmp_path


def run(tmp_path: Path, agent: str, mocks: str = "lookup: {value: {mocked: lookup}}",
        criterion: str = "{type: contains, values: [mocked]}") -> tuple[int, dict, str]:
    (tmp_path / "cycle.yaml").write_text(textwrap.dedent(f"""\
        prompt: p.yaml
        agent: {{function: "tests.agents.direct_agents:{agent}"}}
        criteria: [{{id: mocked, check: {criterion}}}]
        cases: [cases.yaml]
        run: {{iterations: 1, concurrency: 6}}
        tools:
          mocks: {{{mocks}}}
        """))
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                 str(tmp_path / "cycle.yaml"), "--json"])
    report = json.loads(max((tmp_path / "reports").glob("*.json")).read_text())
    return r.exit_code, report, r.output


@pytest.mark.parametrize("agent", ["refunds_directly", "refunds_by_attribute"])
def test_a_direct_call_of_a_declared_tool_is_answered_by_each_cases_own_mock(project, agent):
    code, report, output = run(project, agent)
    assert code == 0, output
    assert realtools.RAN == []  # the real refund never ran
    for case in report["cases"]:
        result = case["results"][0]
        # each concurrent case got its own case's mock, not another's
        assert json.loads(result["output"]) == {"mocked": case["id"].replace("c", "A-")}
        called = [e for e in result["trace"] if e["kind"] == "tool_result"]
        assert [e["tool"] for e in called] == ["refund"]  # the call is in the trace
        assert called[0]["arguments"]["order"] == case["id"].replace("c", "A-")
    # outside an iteration the function is the real one again
    assert direct_agents.refund("Z-9") == {"refunded": "Z-9", "real": True}
    assert realtools.RAN == ["refund Z-9"]


def test_an_async_agent_awaiting_an_async_tool_directly_gets_the_mock(project):
    code, report, output = run(project, "looks_up_directly")
    assert code == 0, output
    assert realtools.RAN == []
    assert report["cases"][0]["results"][0]["output"] == '{"mocked": "lookup"}'


def test_an_unmocked_direct_call_is_an_error_and_the_real_tool_never_runs(project):
    (project / "cases.yaml").write_text("- {id: c0, input: {order: A-0}}\n")
    code, report, _output = run(project, "refunds_directly")
    assert realtools.RAN == []
    result = report["cases"][0]["results"][0]
    assert result["status"] == "error"
    assert "called tool 'refund', which has no mock" in result["error"]
    assert code != 0


def test_passthrough_runs_the_real_function_once(project):
    (project / "cases.yaml").write_text("- {id: c0, input: {order: A-0}}\n")
    code, _report, output = run(project, "refunds_directly", mocks="refund: {passthrough: true}",
                               criterion="{type: contains, values: [real]}")
    assert code == 0, output
    assert realtools.RAN == ["refund A-0"]


def test_a_sync_tool_called_from_async_code_is_refused_with_the_fix(project):
    (project / "cases.yaml").write_text("- {id: c0, input: {order: A-0}}\n")
    _code, report, _output = run(project, "refunds_from_async_code",
                                 mocks="refund: {value: ok}")
    assert realtools.RAN == []
    error = report["cases"][0]["results"][0]["error"]
    assert "called tests.agents.realtools:refund (tool 'refund') directly from async code" in error


def test_an_agent_that_catches_an_unmocked_tools_error_is_still_an_error(project):
    (project / "cases.yaml").write_text("- {id: c0, input: {order: A-0}}\n")
    code, report, _output = run(project, "swallows_failures")
    assert realtools.RAN == []
    result = report["cases"][0]["results"][0]
    assert result["status"] == "error", result  # the contains check alone would pass
    assert "called tool 'refund', which has no mock" in result["error"]
    assert code != 0
