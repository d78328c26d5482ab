"""`cycle improve` with improve.objective: cost through the real CLI: the agent is the real
openai SDK against the loopback server, priced by the built-in table (gpt-4o at $2.50 a
million input tokens, gpt-4o-mini at $0.15), and both models answer alike, so the cycle
moves the prompt to the cheaper one, says what each version scored and cost, and a
bad setting is refused before anything is called."""

from __future__ import annotations

import json
import textwrap

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import Reply

PROMPT = "id: support\nsystem: You answer customers' questions about their orders.\n"
CASES = "".join(f"- id: c{i}\n  input: question {i}\n" for i in range(1, 9))


def config(improve: str) -> str:
    return textwrap.dedent("""\
        prompt: prompts/support.yaml
        agent: openai:gpt-4o
        improver: offline:default
        criteria:
          - id: answers
            check: {type: contains, values: ["order"]}
        cases: [cases/all.yaml]
        run: {iterations: 2}
        providers:
          openai: {base_url: 'BASE'}
        improve:
        """) + textwrap.indent(textwrap.dedent(improve), "  ")


def answer(request) -> Reply:
    return Reply(text="Your order is on its way.", input_tokens=1000, output_tokens=20)


def test_a_cost_cycle_moves_the_prompt_to_the_cheaper_model_that_answers_as_well(
        loopback_project, server) -> None:
    server.responder = answer
    project = loopback_project(PROMPT, CASES, config("""\
        objective: cost
        margin: 2
        models: [openai:gpt-4o-mini]
        stop: {max_rounds: 1}
        """))
    r = CliRunner().invoke(cli, ["improve", "cycle.yaml", "--headless", "--yes"])
    assert r.exit_code == 0, r.output
    assert {x.model for x in server.requests} == {"gpt-4o", "gpt-4o-mini"}
    out = r.output
    assert "confirmed on fresh samples" in out and "head moved 1.0.0 -> 1.0.1" in out
    assert "objective: cost: the cheapest version not worse by more than 2 points" in out
    assert "a cheaper version as good is shown within the margin 80% of the time when" in out
    assert "score and cost" in out
    # outside the cycle, cycle.yaml's agent would run it on the dear model: said, with the fix
    assert ("1.0.1 runs on openai:gpt-4o-mini (its params.model); cycle.yaml's agent names "
            "openai:gpt-4o, which cycle run and pytest use: set agent: openai:gpt-4o-mini") in out
    (cheap,) = [line for line in out.splitlines() if "openai:gpt-4o-mini" in line
                and "a case" in line]
    assert "[frontier, final]" in cheap
    report = next(project.glob("reports/*.json"))
    costs = json.loads(report.read_text())["costs"]["versions"]
    assert [v["model"] for v in costs] == ["openai:gpt-4o", "openai:gpt-4o-mini"]
    assert costs[1]["cost_per_case"] < costs[0]["cost_per_case"] / 10
    assert costs[0]["score"] == costs[1]["score"] == 100


def test_an_unknown_model_in_improve_models_is_refused_before_any_call(
        loopback_project, server) -> None:
    loopback_project(PROMPT, CASES, config("""\
        objective: cost
        margin: 2
        models: [openai:gpt-4o-mini, nosuch:model]
        """))
    r = CliRunner().invoke(cli, ["improve", "cycle.yaml", "--headless", "--yes"])
    assert r.exit_code != 0
    assert "improve.models[1]" in r.output and "unknown model provider 'nosuch'" in r.output
    assert "Traceback" not in r.output and server.request_count == 0


def test_a_cost_cycle_s_dry_run_calls_nothing(loopback_project, server) -> None:
    loopback_project(PROMPT, CASES, config("""\
        objective: cost
        margin: 2
        models: [openai:gpt-4o-mini]
        stop: {max_rounds: 2}
        """))
    r = CliRunner().invoke(cli, ["improve", "cycle.yaml", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert server.request_count == 0
