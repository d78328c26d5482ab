"""`--dry-run`: the calls, tokens and cost a run or a cycle will take, as a range, with
cached calls free, before anything is sent or written; and the range holds the real spend.

The agent and judge are the real openai SDK against the loopback server, whose usage is
the texts' length at four characters a token."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import Reply

PROMPT = """\
id: support
system: You are a support agent for Acme. Answer in two sentences.
user_template: "Customer {{ customer }} asks: {{ question }}"
params: {model: openai:gpt-4o-mini, max_tokens: 300}
"""
CASES = "".join(f"- id: c{i}\n  input: {{customer: Ann{i}, question: 'Where is order {i}?'}}\n"
                for i in range(4))
CONFIG = """\
prompt: prompts/support.yaml
agent: openai:gpt-4o-mini
judge: openai:gpt-4o-mini
improver: openai:gpt-4o-mini
criteria:
  - id: short
    check: {type: regex, pattern: '^.{0,4000}$'}
  - id: tone
    rubric: Polite and clear.
cases: [cases/*.yaml]
run: {iterations: 2}
providers:
  openai: {base_url: 'BASE'}
"""


@pytest.fixture
def project(loopback_project):
    return loopback_project(PROMPT, CASES, CONFIG)


def _low_scores_and_an_edit(request):
    wanted = (request.schema or {}).get("properties", {})
    if "verdicts" in wanted:
        block = json.loads(request.last_user.rsplit("```json", 1)[1].rsplit("```", 1)[0])
        score = 90 if "Kindly" in request.last_user else 10
        return Reply(json={"verdicts": {c["id"]: {"score": score, "reasoning": "r"}
                                        for c in block["criteria"]}})
    if "suggestions" in wanted:
        return Reply(json={"suggestions": [{
            "type": "system_prompt", "priority": "high", "current_value": "two sentences.",
            "suggested_value": "two sentences. Be kind.", "reasoning": "r",
            "expected_improvement": "e", "target_cases": ["c0"]}]})
    return Reply(text="Kindly: on its way." if "Be kind." in request.system else "On its way.")


def dry(*args: str) -> dict:
    r = CliRunner().invoke(cli, [*args, "--dry-run", "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def by_role(estimate: dict) -> dict:
    return {line["role"]: line for line in estimate["lines"]}


def test_a_run_dry_run_sends_nothing_writes_nothing_and_holds_the_real_cost(project, server):
    estimate = dry("run")
    assert server.requests == [] and sorted(p.name for p in project.iterdir()) == [
        "cases", "cycle.yaml", "prompts"]
    lines = by_role(estimate)
    assert lines["agent"]["calls"] == [8, 8] and lines["judge"]["calls"] == [8, 8]
    assert lines["agent"]["output_tokens"] == [0, 8 * 300]  # max_tokens bounds an answer
    low, high = estimate["cost"]
    assert 0 < low < high

    ran = CliRunner().invoke(cli, ["run", "--json"])
    spent = json.loads(ran.stdout)["summary"]["cost"]
    assert low <= spent <= high, (low, spent, high)
    assert len(server.requests) == 16


def test_calls_the_cache_answers_are_counted_free(project, server):
    assert CliRunner().invoke(cli, ["run", "-q"]).exit_code in (0, 1)
    estimate = dry("run")
    lines = by_role(estimate)
    assert lines["agent"]["cached"] == 8 and lines["judge"]["cached"] == 8
    assert estimate["calls"] == [0, 0] and estimate["cost"] == [0, 0]
    # --no-cache pays them again, and says so
    fresh = json.loads(CliRunner().invoke(cli, ["run", "--no-cache", "--dry-run", "--json"]).stdout)
    assert fresh["calls"] == [16, 16]
    # another iteration count is another sample: not in the cache
    more = dry("run", "-n", "3")
    assert by_role(more)["agent"]["cached"] == 8 and by_role(more)["agent"]["calls"] == [4, 4]


def test_a_cycle_dry_run_covers_the_rounds_and_the_confirmation(project, server):
    config = project / "cycle.yaml"
    config.write_text(config.read_text() + "improve: {stop: {max_rounds: 2}}\n")
    estimate = dry("improve")
    lines = by_role(estimate)
    # low: the baseline alone; high: baseline, 2 rounds, confirmation (2), and a second look
    # at each of the 3 comparisons (both versions, every case grown by 2 iterations)
    assert lines["agent"]["calls"] == [8, 8 * 5 + 3 * 2 * 8]
    assert lines["improver"]["calls"] == [0, 2]
    assert server.requests == [] and not (project / ".cycle").exists()

    server.responder = _low_scores_and_an_edit  # so that rounds run, and a confirmation
    r = CliRunner().invoke(cli, ["improve", "--headless", "--yes"])
    assert r.exit_code == 0, r.output
    assert "confirm" in r.output, r.output
    agent_calls = sum(1 for q in server.requests if q.schema is None)
    assert lines["agent"]["calls"][0] <= agent_calls <= lines["agent"]["calls"][1]
    report = json.loads(next((project / "reports").glob("c-*.json")).read_text())
    for role, line in lines.items():
        assert line["cost"][0] <= report["cost_by_role"].get(role, 0) <= line["cost"][1], (role, report["cost_by_role"], report["stop_reason"])
    assert estimate["cost"][0] <= report["total_cost"] <= estimate["cost"][1]


def test_tools_widen_the_range_to_the_step_limit_and_the_table_says_what_it_assumes(project):
    prompt = project / "prompts" / "support.yaml"
    prompt.write_text(PROMPT + "tools:\n  - name: track\n    description: Track an order.\n"
                      "    parameters: {type: object, properties: {order: {type: string}}}\n")
    config = project / "cycle.yaml"
    config.write_text(config.read_text() + "tools:\n  max_steps: 5\n  mocks: {track: {value: ok}}\n"
                      "budget: 0.001\n")
    lines = by_role(dry("run"))
    assert lines["agent"]["calls"] == [8, 8 * 5]
    r = CliRunner().invoke(cli, ["run", "--dry-run"])
    assert r.exit_code == 0
    assert "dry run: nothing was sent. A run of 4 cases x 2 iterations" in r.output
    assert "agent" in r.output and "4 bytes a token" in r.output
    assert "passes the hard cap ($0.001)" in r.output


def test_dry_run_with_bad_input_is_the_same_clear_error(project, server):
    config = project / "cycle.yaml"
    config.write_text(config.read_text() + "run: {iterations: 2}\n")
    r = CliRunner().invoke(cli, ["run", "--dry-run"])
    assert r.exit_code == 2 and "duplicate key 'run'" in r.output
    r = CliRunner().invoke(cli, ["run", "--dry-run", "--resume", "x"])
    assert r.exit_code == 2 and "--dry-run" in r.output


def test_an_offline_dry_run_is_free_and_a_dry_run_needs_no_key(quickstart, monkeypatch):
    """Issue 33: the offline model was priced at the fallback rate ($0.02-$9.00 for a free
    cycle), and a dry run refused to run without an API key though it sends nothing."""
    tmp_path = quickstart
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for command in ("run", "improve"):
        out = dry(command)
        assert out["cost"] == [0.0, 0.0], out
        assert not any(line["estimated_price"] for line in out["lines"])
    config = tmp_path / "cycle.yaml"
    config.write_text(config.read_text().replace("offline:default", "openai:gpt-4o-mini"))
    for p in (tmp_path / "prompts").glob("*.yaml"):
        p.write_text(p.read_text().replace("offline:default", "openai:gpt-4o-mini"))
    for command in ("run", "improve"):
        out = dry(command)  # no key in the environment: still priced, nothing refused
        assert out["cost"][1] > 0
    assert not (tmp_path / ".cycle").exists()


def test_a_likely_figure_beside_the_range_learns_from_the_stores_earlier_calls(
        project, server):
    dry = CliRunner().invoke(cli, ["run", "cycle.yaml", "--dry-run", "--json"])
    first = json.loads(dry.output)
    low, high = first["cost"]
    assert low <= first["likely_cost"] <= high and "typical length" in first["likely_basis"]
    text = CliRunner().invoke(cli, ["run", "cycle.yaml", "--dry-run"]).output
    assert "Likely: $" in text and "likely" in text.splitlines()[2]

    server.responder = lambda request: Reply(text="word " * 400) if request.schema is None \
        else None  # long agent answers: 400 words
    done = CliRunner().invoke(cli, ["run", "cycle.yaml", "--no-cache"])
    assert done.exit_code in (0, 1), done.output
    again = json.loads(CliRunner().invoke(cli, ["run", "cycle.yaml", "--dry-run",
                                                "--json"]).output)
    agent = next(x for x in again["lines"] if x["role"] == "agent")
    before = next(x for x in first["lines"] if x["role"] == "agent")
    # the store's agent answers were longer than the default: the likely figure grew
    assert agent["likely_cost"] > before["likely_cost"]
    assert again["likely_cost"] <= again["cost"][1]


def test_a_cycle_dry_run_counts_the_pairwise_comparisons(project, server):
    """tone compared pairwise: each of the 3 comparisons (2 rounds, the confirmation) judges
    4 cases' 2 iterations in both orders, and may look again at 4 iterations: 144 judge
    calls more at the high end; the real cycle's judge cost lies in the range."""
    config = project / "cycle.yaml"
    config.write_text(config.read_text() + "improve: {stop: {max_rounds: 2}}\n")
    scored = by_role(dry("improve"))["judge"]["calls"]
    config.write_text(config.read_text().replace("rubric: Polite and clear.",
                                                 "rubric: Polite and clear.\n    pairwise: true"))
    estimate = dry("improve")
    lines = by_role(estimate)
    assert lines["judge"]["calls"] == [scored[0], scored[1] + 144]
    assert any("pairwise criteria" in n for n in estimate["notes"])

    def kind(request):
        if "winner" in (request.schema or {}).get("properties", {}):
            block = json.loads(request.last_user.rsplit("```json", 1)[1].rsplit("```", 1)[0])
            first, second = ("Kindly" in block[k] for k in ("first", "second"))
            winner = "first" if first > second else "second" if second > first else "tie"
            return Reply(json={"reasoning": "r", "winner": winner})
        return _low_scores_and_an_edit(request)

    server.responder = kind
    r = CliRunner().invoke(cli, ["improve", "--headless", "--yes"])
    assert r.exit_code == 0, r.output
    report = json.loads(next((project / "reports").glob("c-*.json")).read_text())
    judge = report["cost_by_role"]["judge"]
    assert lines["judge"]["cost"][0] <= judge <= lines["judge"]["cost"][1]
    assert estimate["cost"][0] <= report["total_cost"] <= estimate["cost"][1]
    assert any(r["pairwise"] for r in report["rounds"])


@pytest.mark.parametrize("agent", ["{http: 'http://127.0.0.1:9/chat'}",
                                   "{function: 'os.path:basename'}"])
def test_an_agent_that_makes_its_own_calls_is_noted_not_counted(quickstart, agent):
    # found walking docs/cli.md's --dry-run with an HTTP agent (and a Python one): it was
    # refused, "model name '' must have the form provider:model", the agent having none
    config = quickstart / "cycle.yaml"
    config.write_text(config.read_text().replace("agent: offline:default", f"agent: {agent}"))
    out = dry("run")
    assert [line["role"] for line in out["lines"]] == ["judge"]  # the judge is cycle's
    assert out["notes"] and "makes its own calls, which cycle does not see" in out["notes"][0]
    assert not (quickstart / ".cycle").exists()
