"""`cycle judge pairwise BASE HEAD` (issue 35): two runs' outputs judged against each other
in both orders through the real OpenAI SDK on the loopback server; a judge that prefers
whatever it sees first is caught as order flips, counted as ties, never as a preference."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import LoopbackServer, Reply
from tests.stored import copied, loopback_project, run


def pairwise_judge(request):
    """Answers 'sorry' when the system prompt asks for it; as the judge, prefers the answer
    that apologises, except on case a, where it always picks the first answer shown."""
    if request.schema_name == "cycle_pairwise":
        block = json.loads(request.last_user.rsplit("```json", 1)[1].rsplit("```", 1)[0])
        if block["input"] == {"q": "a"}:
            winner = "first"  # position bias
        else:
            first, second = ("Sorry" in block[k] for k in ("first", "second"))
            winner = "first" if first > second else "second" if second > first else "tie"
        return Reply(json={"reasoning": "compared", "winner": winner})
    if request.schema_name == "cycle_judge":
        block = json.loads(request.last_user.rsplit("```json", 1)[1].rsplit("```", 1)[0])
        return Reply(json={"verdicts": {c["id"]: {"reasoning": "ok", "score": 80}
                                        for c in block["criteria"]}})
    return Reply(text=("Sorry for the wait. " if "sorry" in request.system else "") + "Done.")


def test_a_position_biased_judge_is_caught_and_the_better_run_found(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    runs = []
    with LoopbackServer(responder=pairwise_judge) as srv:
        config = loopback_project(tmp_path / "p", srv.openai_base_url, cases="abcdef",
                                  criteria="[{id: empathy, rubric: Apologises for the trouble.}]",
                                  concurrency=2)
        prompt = config.parent / "prompts" / "p.yaml"
        for system in ("Help.", "Help. Always say sorry."):
            prompt.write_text(f"id: p\nsystem: {system}\nuser_template: '{{{{ q }}}}'\n")
            runs.append(run(store, config, "-n", "2"))
        asked = len(srv.requests)
        r = CliRunner().invoke(cli, ["--store", str(store), "judge", "pairwise", *runs,
                                     "--config", str(config), "--json"])
        assert r.exit_code == 0, r.output
        assert len(srv.requests) - asked == 6 * 2 * 2  # 6 cases x 2 iterations x 2 orders
        swapped = CliRunner().invoke(cli, ["--store", str(store), "judge", "pairwise",
                                           *runs[::-1], "--config", str(config)])
    data = json.loads(r.output)
    empathy = data["criteria"]["empathy"]
    assert empathy["pairs"] == 12
    assert empathy["head_cases"] == 5 and empathy["base_cases"] == 0 and empathy["tied_cases"] == 1
    assert abs(empathy["p_value"] - 2 / 32) < 1e-9     # the sign test of 5 to 0
    assert abs(empathy["order_flips"] - 2 / 12) < 1e-9  # case a's two pairs
    # the runs the other way round: the same verdicts, seen from the other side
    assert "24 judge calls" in swapped.output, swapped.output  # said before they are made
    row = next(line for line in swapped.output.splitlines() if line.startswith("empathy"))
    assert row.split()[1:6] == ["0", "5", "1", "0.062", "17%"]


def test_offline_pairwise_says_so_and_bad_input_is_refused(tmp_path: Path) -> None:
    project = copied("quickstart", tmp_path)
    store = tmp_path / "s.db"
    runs = [run(store, project / "cycle.yaml", "-n", "1") for _ in range(2)]
    config = str(project / "cycle.yaml")
    r = CliRunner().invoke(cli, ["--store", str(store), "judge", "pairwise", *runs,
                                 "--config", config, "--criterion", "tone"])
    assert r.exit_code == 0, r.output
    assert "offline model: these preferences are not a real judge's" in r.output
    assert "tone" in r.output and "1.000" in r.output  # the same outputs: every case a tie
    r = CliRunner().invoke(cli, ["--store", str(store), "judge", "pairwise", *runs,
                                 "--config", config, "--criterion", "cites_order"])
    assert r.exit_code != 0 and "no LLM criterion 'cites_order'" in r.output
    assert "Traceback" not in r.output


def cycle_world(request):
    """A cycle through the loopback server: the agent apologises when its system prompt says
    so; the improver proposes that; the judge scores every answer 50 and, comparing, prefers
    the answer that apologises in either place."""
    if request.schema_name == "cycle_improver":
        return Reply(json={"suggestions": [{
            "type": "system_prompt", "priority": "high", "current_value": "",
            "suggested_value": "Always say sorry.", "reasoning": "apologise",
            "expected_improvement": "+", "target_cases": ["a"]}]})
    if request.schema_name == "cycle_judge":
        block = json.loads(request.last_user.rsplit("```json", 1)[1].rsplit("```", 1)[0])
        return Reply(json={"verdicts": {c["id"]: {"reasoning": "ok", "score": 50}
                                        for c in block["criteria"]}})
    return pairwise_judge(request)


def test_a_cycle_with_a_pairwise_criterion_promotes_what_the_judge_prefers(tmp_path: Path) -> None:
    """cycle improve, through the real OpenAI SDK: the scores see no gain, the pairwise
    comparisons (the judge's role, its cost, the round's) promote the apologising version;
    the console says how each comparison went."""
    store = tmp_path / "s.db"
    with LoopbackServer(responder=cycle_world) as srv:
        config = loopback_project(
            tmp_path / "p", srv.openai_base_url, cases="bcdefghi", concurrency=4,
            criteria="[{id: empathy, rubric: Apologises for the trouble., pairwise: true}]",
            extra="improve: {stop: {max_rounds: 1}}\n")
        r = CliRunner().invoke(cli, ["--store", str(store), "improve", str(config),
                                     "--headless", "--yes",
                                     "--report-dir", str(tmp_path / "reports")])
        compared = [q for q in srv.requests if q.schema_name == "cycle_pairwise"]
    assert r.exit_code == 0, r.output
    assert "p: 1.0.0 (50.0) -> 1.0.1 (50.0)" in r.output, r.output
    # 8 cases x 3 iterations x 2 orders, exploring and again on the confirmation's runs
    assert len(compared) == 2 * 48
    assert ("round 2 (confirm) empathy: 8 wins, 0 losses, 0 ties; 0% order flips over "
            "24 pairs; p 0.00391") in r.output
