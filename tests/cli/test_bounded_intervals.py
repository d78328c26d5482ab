"""Issue 33: a 95% interval of [-311.2, 451.2] on a 0-100 score. A score's t interval is cut
to the scale and says so (``clipped``); paired differences keep theirs."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cycle.cli import cli
from cycle.stats import SCORE_SCALE, describe

PROMPT = """\
id: p
system: Answer.
user_template: "{{ question }}"
params: {model: openai:gpt-4o-mini}
"""
CASES = "- id: high\n  input: {question: say PASS}\n- id: low\n  input: {question: say nothing}\n"
CONFIG = """\
prompt: prompts/support.yaml
criteria: [{id: says, check: {type: contains, values: [PASS]}}]
cases: [cases/*.yaml]
run: {iterations: 1}
providers: {openai: {base_url: 'BASE'}}
"""


def test_two_cases_at_0_and_100_have_an_interval_inside_the_scale(loopback_project, server):
    loopback_project(PROMPT, CASES, CONFIG)
    result = CliRunner().invoke(cli, ["run", "cycle.yaml", "--json", "--no-cache"])
    assert result.stdout, result.output
    summary = json.loads(result.stdout)["summary"]
    assert summary["score"] == 50.0
    assert 0.0 <= summary["ci_low"] <= summary["ci_high"] <= 100.0
    shown = CliRunner().invoke(cli, ["run", "cycle.yaml"]).output
    assert "-311" not in shown and "[0.0, 100.0]" in shown


def test_a_clipped_interval_is_flagged_and_differences_are_not_clipped():
    s = describe([0.0, 100.0], scale=SCORE_SCALE)
    assert (s.ci_low, s.ci_high, s.clipped) == (0.0, 100.0, True) and s.half_width is None
    inside = describe([70.0, 72.0, 74.0], scale=SCORE_SCALE)
    assert not inside.clipped and inside.half_width is not None
    diff = describe([-60.0, 90.0])
    assert diff.ci_low < -100 and not diff.clipped


def test_a_run_s_reports_carry_its_times(loopback_project, server):
    """Issue 33: the run reports' started_at and finished_at were empty."""
    project = loopback_project(PROMPT, CASES, CONFIG)
    result = CliRunner().invoke(cli, ["run", "cycle.yaml", "--no-cache"])
    assert result.exit_code in (0, 1), result.output
    (report,) = (project / "reports").glob("*.json")
    data = json.loads(report.read_text())
    assert data["started_at"] and data["finished_at"] >= data["started_at"]
