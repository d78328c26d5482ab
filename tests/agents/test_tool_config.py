"""Tools in prompt files and mocks in cycle.yaml, through the real CLI: what works end to
end, and every bad input refused with file:line before any model call."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.errors import ConfigError
from cycle.llm.base import ModelOutput
from cycle.prompts import diff_prompts, dump_prompt
from cycle.prompts.files import parse_prompt
from cycle.records import Prompt, ToolCall
from cycle.testing import clear_scripts, script

PROMPT = """\
id: shop
system: You run a shop's support desk.
user_template: "{{ input }}"
params: {model: "scripted:agent"}
tools:
  - name: lookup_order
    description: Find an order by its number.
    parameters:
      type: object
      properties: {order: {type: string}}
      required: [order]
  - function: tests.agents.mockfns:real_lookup
    name: history
"""


def write(tmp_path: Path, prompt: str = PROMPT, config: str = "", cases: str = "") -> str:
    (tmp_path / "prompt.yaml").write_text(prompt)
    (tmp_path / "cases.yaml").write_text(cases or textwrap.dedent("""\
        - id: a1
          input: Where is A-1?
        """))
    (tmp_path / "cycle.yaml").write_text(textwrap.dedent("""\
        prompt: prompt.yaml
        criteria:
          - id: looked_up
            check: {type: tool_called, tool: lookup_order, args: {order: A-1}}
          - id: answered
            check: {type: contains, values: [shipped]}
        cases: [cases.yaml]
        run: {iterations: 1}
        """) + textwrap.dedent(config))
    return str(tmp_path / "cycle.yaml")


def run(tmp_path: Path, *args: str):
    return CliRunner().invoke(cli, ["--store", str(tmp_path / "store.db"), "run", *args])


@pytest.fixture(autouse=True)
def _scripts():
    yield
    clear_scripts()


def agent(messages, tools, config):
    """Looks the order up, then answers with what the tool said."""
    results = [m for m in messages if m.role == "tool"]
    if not results:
        return ModelOutput(tool_calls=(ToolCall(id="c1", name="lookup_order",
                                                arguments={"order": "A-1"}),))
    return f"Your order is {json.loads(results[-1].content)['status']}."


def test_a_tool_using_run_end_to_end_through_the_cli(tmp_path):
    script("agent", agent)
    cfg = write(tmp_path, config="""\
        tools:
          mocks:
            lookup_order: {value: {status: shipped}}
        """)
    r = run(tmp_path, cfg, "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)["summary"]
    assert summary["passed"] == 1 and summary["terminated"] == 0
    report = json.loads(next((tmp_path / "reports").glob("*.json")).read_text())
    events = report["cases"][0]["results"][0]["trace"]
    assert [e["kind"] for e in events] == ["user", "model", "tool_result", "model", "final"]
    md = next((tmp_path / "reports").glob("*.md")).read_text()
    assert "<details>" in md and "lookup_order" in md and "shipped" in md


def test_the_function_tool_takes_its_schema_from_the_signature_and_docstring():
    tool = parse_prompt(PROMPT, "p.yaml").prompt.tool("history")
    assert tool is not None and tool.function == "tests.agents.mockfns:real_lookup"
    assert tool.description == "Look an order up in the real system."
    assert tool.parameters["required"] == ["order"]
    assert tool.parameters["properties"]["order"] == {
        "type": "string", "description": "the order number, e.g. A-1"}
    assert tool.parameters["properties"]["verbose"]["default"] is False


def test_tools_are_versioned_diffed_and_round_trip_through_files():
    a = parse_prompt(PROMPT, "p.yaml").prompt
    edited = PROMPT.replace("Find an order by its number.", "Find an order; call it first.")
    b = parse_prompt(edited, "p.yaml").prompt
    assert a.content_hash != b.content_hash
    d = diff_prompts(a, b, a="1.0.0", b="1.0.1")
    assert d.field("tools").changed and not d.field("system").changed
    assert "+  description: Find an order; call it first." in d.field("tools").text
    assert parse_prompt(dump_prompt(a), "p.yaml").prompt == a
    # a prompt without tools keeps the hash it had before tools existed
    plain = Prompt(id="p", system="s")
    assert "tools" not in plain.canonical()
    assert [f.field for f in diff_prompts(plain, plain, a="x", b="y").fields] == [
        "system", "user_template", "params"]


@pytest.mark.parametrize(("tools", "message", "line"), [
    ("  - name: bad\n    parameters: {type: object, properties: {n: {type: nonsense}}}\n",
     "parameters are not a valid JSON schema", 5),
    ("  - name: bad\n    parameters: {type: string}\n", "must describe an object", 5),
    ("  - function: nowhere.at_all:fn\n", "cannot import module 'nowhere.at_all'", 5),
    ("  - name: has space\n", "tools[0].name", 5),
    ("  - name: a\n  - name: a\n", "two tools are named 'a'", 6),
])
def test_bad_tool_declarations_name_the_file_and_line(tools, message, line):
    text = "id: p\nsystem: s\nuser_template: x\ntools:\n" + tools
    with pytest.raises(ConfigError) as e:
        parse_prompt(text, "p.yaml")
    assert message in str(e.value)
    assert e.value.file == "p.yaml" and e.value.line == line


@pytest.mark.parametrize(("config", "cases", "message"), [
    ("tools:\n  mocks:\n    lookp_order: {value: 1}\n", "",
     "a mock for 'lookp_order', which the prompt does not declare"),
    ("tools:\n  mocks:\n    lookup_order: {passthrough: true}\n", "",
     "passthrough for 'lookup_order', which has no Python function"),
    ("tools:\n  mocks:\n    lookup_order: {function: 'nowhere:fn'}\n", "", "cannot import module"),
    ("tools:\n  mocks:\n    lookup_order: {value: 1, error: x}\n", "", "exactly one of"),
    ("", "- id: a1\n  input: x\n  mocks: {refnd: {value: 1}}\n",
     "a mock for 'refnd', which the prompt does not declare"),
])
def test_bad_mocks_are_refused_before_any_model_call(tmp_path, config, cases, message):
    calls = []
    script("agent", lambda m, t, c: calls.append(1) or "x")
    r = run(tmp_path, write(tmp_path, config=config, cases=cases))
    assert r.exit_code == 2, r.output
    assert message in r.output
    assert "cycle.yaml:" in r.output or "cases.yaml:" in r.output
    assert calls == [] and not (tmp_path / "store.db").exists()


def test_an_unmocked_tool_is_an_error_of_the_iteration_with_the_yaml_to_fix_it(tmp_path):
    script("agent", agent)
    r = run(tmp_path, write(tmp_path), "--json")
    assert r.exit_code == 3, r.output
    report = json.loads(next((tmp_path / "reports").glob("*.json")).read_text())
    error = report["cases"][0]["results"][0]["error"]
    assert "called tool 'lookup_order', which has no mock" in error
