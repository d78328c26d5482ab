"""`cycle simulate` refuses what would lose a session before one starts: export files that
cannot be written or are not what they should be, a missing config, no agent at all, a
tool to pass through that no agent has, an ADK path that is not an agent."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli

PROMPT = """\
id: shop
system: You run a shop.
user_template: "{{ input }}"
params: {model: offline:default}
tools:
  - name: lookup_order
    parameters: {type: object, properties: {order: {type: string}}}
"""
CONFIG = """\
prompt: prompt.yaml
criteria: [{id: any, check: {type: regex, pattern: "."}}]
tools: {mocks: {lookup_order: {value: shipped}}}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompt.yaml").write_text(PROMPT)
    (tmp_path / "cycle.yaml").write_text(CONFIG)
    return tmp_path


def simulate(*args: str):
    return CliRunner().invoke(cli, ["simulate", *args])


@pytest.mark.parametrize(("setup", "args", "message"), [
    (lambda p: (p / "bad.json").write_text("{ nope"), ["--evalset", "bad.json"],
     "bad.json:1: not valid JSON"),
    (lambda p: (p / "set.json").write_text('{"eval_cases": []}'), ["--evalset", "set.json"],
     "not an ADK EvalSet: eval_set_id"),
    (lambda p: (p / "folder.json").mkdir(), ["--evalset", "folder.json"], "is a directory"),
    (lambda p: (p / "cases.yaml").write_text("id: not-a-list\n"), ["--cases", "cases.yaml"],
     "cases.yaml"),
    (lambda p: None, ["missing.yaml"], "missing.yaml not found"),
    (lambda p: None, ["--passthrough", "nothing"], "no agent has a tool 'nothing'"),
    (lambda p: None, ["--adk", "tests.agents.adk_agents:not_an_agent"],
     "is a int, not an ADK agent"),
])
def test_bad_input_is_refused_before_the_screen_opens(project, setup, args, message):
    setup(project)
    before = {p.name: p.read_bytes() for p in project.iterdir() if p.is_file()}
    r = simulate(*args)
    assert r.exit_code == 2, r.output
    assert message in r.output, r.output
    assert "Traceback" not in r.output
    assert {p.name: p.read_bytes() for p in project.iterdir() if p.is_file()} == before


def test_an_export_path_that_cannot_be_created_is_refused(project):
    # under a file: no folder can be made there (a read-only folder would not stop root)
    r = simulate("--evalset", "cycle.yaml/set.json")
    assert r.exit_code == 2 and "not a writable folder" in r.output, r.output


def test_no_config_and_no_adk_agent_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = simulate()
    assert r.exit_code == 2 and "no agent to simulate" in r.output
    assert "--adk" in r.output


def test_without_a_terminal_it_says_so_instead_of_waiting(project):
    """Run from a script (stdin not a terminal), the screen was written into the pipe and
    waited for keys that never came: the command hung."""
    r = simulate()
    assert r.exit_code == 2 and "no terminal for the simulation" in r.output, r.output
    assert not list(project.glob("*.json"))  # nothing begun
