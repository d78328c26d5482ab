"""Issue 32: ``cycle run --resume RUN --budget X`` started a fresh budget (1.37x the cap
over both parts). The spend of the run so far now counts against the same cap."""

from __future__ import annotations

import json
import sqlite3

from click.testing import CliRunner

from cycle.cli import cli

PROMPT = """\
id: support
system: You are a support agent.
user_template: "{{ question }}"
params: {model: openai:gpt-4o-mini, max_tokens: 50}
"""
CASES = "".join(f"- id: c{i}\n  input: {{question: 'Where is order {i}? {'x' * 400}'}}\n"
                for i in range(40))
CONFIG = """\
prompt: prompts/support.yaml
criteria:
  - id: short
    check: {type: regex, pattern: '^.{0,4000}$'}
cases: [cases/*.yaml]
run: {iterations: 1, concurrency: 4}
providers:
  openai: {base_url: 'BASE'}
"""


def _paid(project) -> float:
    with sqlite3.connect(project / ".cycle" / "cycle.db") as conn:
        return conn.execute("SELECT coalesce(sum(cost), 0) FROM calls WHERE "
                            "coalesce(cache_hit, 0) = 0").fetchone()[0]


def test_a_resumed_run_carries_its_spend_against_the_same_cap(loopback_project, server):
    project = loopback_project(PROMPT, CASES, CONFIG)
    runner = CliRunner()
    cap = "0.0012"
    first = runner.invoke(cli, ["run", "cycle.yaml", "--budget", cap, "--json", "--no-cache"])
    run_id = json.loads(first.stdout)["run_id"]
    spent = _paid(project)
    assert 0 < spent <= float(cap), first.output
    asked = server.request_count
    again = runner.invoke(cli, ["run", "cycle.yaml", "--resume", run_id, "--budget", cap,
                                "--json", "--no-cache"])
    assert again.exit_code != 0 or "budget" in again.output
    assert _paid(project) <= float(cap)  # both parts together, by what was billed
    assert server.request_count - asked <= 2  # at most what fit in what was left


def test_a_resumed_run_keeps_its_flags_and_refuses_others(loopback_project, server):
    """Issue 33: the overrides and options of a run are stored with it and reused on
    --resume; a resume that passes different ones is refused, naming them."""
    loopback_project(PROMPT, CASES, CONFIG)
    runner = CliRunner()
    first = runner.invoke(cli, ["run", "cycle.yaml", "--budget", "0.0012", "-c", "2", "--json",
                                "--no-cache"])
    run_id = json.loads(first.stdout)["run_id"]
    refused = runner.invoke(cli, ["run", "cycle.yaml", "--resume", run_id, "--budget", "5"])
    assert refused.exit_code == 2 and "--budget 5.0 (it ran with 0.0012)" in refused.output
    kept = runner.invoke(cli, ["run", "cycle.yaml", "--resume", run_id, "--no-cache"])
    assert "budget: (not set) -> 0.0012 (--budget)" in kept.output, kept.output
