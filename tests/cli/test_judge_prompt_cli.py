"""The judge can be shaped: a judge prompt a person imports (id cycle-judge) is the one
runs use, and the report says which; the agent's description reaches the judge; a
judge prompt that would not show the judge the case is refused before any call."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cycle.cli import cli

PROMPT = """\
id: support
system: You are a support agent.
user_template: "{{ question }}"
params: {model: 'openai:gpt-4o-mini'}
"""
CASES = "- id: late\n  input: {question: Where is my parcel?}\n"
CONFIG = """\
prompt: prompts/support.yaml
judge: openai:gpt-4o-mini
agent: {model: 'openai:gpt-4o-mini', description: Answers parcel questions for ShipCo.}
criteria: [{id: tone, rubric: Polite.}]
cases: [cases/*.yaml]
run: {iterations: 1}
providers:
  openai: {base_url: 'BASE'}
"""
JUDGE = """\
id: cycle-judge
system: You are a strict grader of ShipCo's support answers.
user_template: |
  Score each criterion 0-100.
  {{ criteria }}
  ```json
  {{ payload }}
  ```
params: {temperature: 0}
"""


@pytest.fixture
def project(loopback_project):
    return loopback_project(PROMPT, CASES, CONFIG)


def _judge_requests(server):
    return [r for r in server.requests if "tone" in json.dumps(r.messages)]


def test_an_imported_judge_prompt_is_the_one_runs_use(project, server):
    (project / "judge.yaml").write_text(JUDGE)
    imported = CliRunner().invoke(cli, ["prompt", "import", "judge.yaml"])
    assert imported.exit_code == 0, imported.output
    r = CliRunner().invoke(cli, ["run", "cycle.yaml", "--no-cache"])
    assert r.exit_code in (0, 1), r.output
    (judged,) = _judge_requests(server)
    assert judged.messages[0]["content"] == "You are a strict grader of ShipCo's support answers."
    payload = judged.messages[1]["content"]
    assert "Answers parcel questions for ShipCo." in payload  # the agent's description
    report = json.loads(max((project / "reports").glob("*.json")).read_text())
    assert report["models"]["judge_version"] == "1.0.0"
    history = CliRunner().invoke(cli, ["prompt", "history", "cycle-judge"])
    assert "built-in" not in history.output  # the person's prompt, not cycle's


def test_without_an_imported_one_the_built_in_judge_prompt_is_used(project, server):
    r = CliRunner().invoke(cli, ["run", "cycle.yaml", "--no-cache"])
    assert r.exit_code in (0, 1), r.output
    (judged,) = _judge_requests(server)
    assert judged.messages[0]["content"].startswith("You are a strict, fair evaluator")


def test_a_judge_prompt_without_the_payload_is_refused_before_any_call(project, server):
    (project / "judge.yaml").write_text(JUDGE.replace("{{ payload }}", "nothing"))
    assert CliRunner().invoke(cli, ["prompt", "import", "judge.yaml"]).exit_code == 0
    r = CliRunner().invoke(cli, ["run", "cycle.yaml", "--no-cache"])
    assert r.exit_code == 2, r.output
    assert "cycle-judge@1.0.0" in r.output and "{{ payload }}" in r.output
    assert _judge_requests(server) == []
    assert "rollback" not in r.output  # nothing of cycle's own to go back to here


def test_a_judge_prompt_without_the_payload_names_the_rollback_that_exists(project, server):
    # found walking docs/configuration.md: the hint said `cycle prompt rollback
    # cycle-judge`, a command that does not exist
    assert CliRunner().invoke(cli, ["run", "cycle.yaml"]).exit_code in (0, 1)  # built-in
    (project / "judge.yaml").write_text(JUDGE.replace("{{ payload }}", "nothing"))
    assert CliRunner().invoke(cli, ["prompt", "import", "judge.yaml"]).exit_code == 0
    r = CliRunner().invoke(cli, ["run", "cycle.yaml", "--no-cache"])
    assert r.exit_code == 2, r.output
    command = r.output.split("go back to cycle's own: ")[1].split("\n")[0].rstrip(".")
    assert command == "cycle rollback cycle-judge --to 1.0.0"
    assert CliRunner().invoke(cli, command.split()[1:]).exit_code == 0
    assert CliRunner().invoke(cli, ["run", "cycle.yaml", "--no-cache"]).exit_code in (0, 1)
