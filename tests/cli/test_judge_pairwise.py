"""`cycle judge pairwise BASE HEAD` (issue 35): two runs' outputs judged against each other
in both orders through the real OpenAI SDK on the loopback server; a judge that prefers
whatever it sees first is caught as order flips, counted as ties, never as a preference."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from cycle.store import Store
from cycle.testing import LoopbackServer, Reply

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


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
    project = tmp_path / "p"
    (project / "prompts").mkdir(parents=True)
    (project / "cases").mkdir()
    prompt = project / "prompts" / "p.yaml"
    prompt.write_text("id: p\nsystem: Help.\nuser_template: '{{ q }}'\n")
    (project / "cases" / "c.yaml").write_text(
        "".join(f"- {{id: {c}, input: {{q: {c}}}}}\n" for c in "abcdef"))
    store = tmp_path / "s.db"
    runs = []
    with LoopbackServer(responder=pairwise_judge) as srv:
        (project / "cycle.yaml").write_text(
            "prompt: prompts/p.yaml\nagent: openai:gpt-4o-mini\njudge: openai:gpt-4o-mini\n"
            "criteria: [{id: empathy, rubric: Apologises for the trouble.}]\n"
            "cases: [cases/*.yaml]\nrun: {concurrency: 2}\n"
            f"providers:\n  openai: {{base_url: '{srv.openai_base_url}'}}\n")
        for system in ("Help.", "Help. Always say sorry."):
            prompt.write_text(f"id: p\nsystem: {system}\nuser_template: '{{{{ q }}}}'\n")
            r = CliRunner().invoke(cli, ["--store", str(store), "run", str(project / "cycle.yaml"),
                                         "-n", "2", "--no-reports", "-q"])
            assert r.exit_code in (0, 1), r.output
            with Store.open(store) as s:
                runs.append(s.runs.recent(limit=1)[0].id)
        asked = len(srv.requests)
        r = CliRunner().invoke(cli, ["--store", str(store), "judge", "pairwise", *runs,
                                     "--config", str(project / "cycle.yaml"), "--json"])
        assert r.exit_code == 0, r.output
        assert len(srv.requests) - asked == 6 * 2 * 2  # 6 cases x 2 iterations x 2 orders
        swapped = CliRunner().invoke(cli, ["--store", str(store), "judge", "pairwise",
                                           *runs[::-1], "--config", str(project / "cycle.yaml")])
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
    project = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns(".cycle", "reports"))
    store = tmp_path / "s.db"
    runs = []
    for _ in range(2):
        r = CliRunner().invoke(cli, ["--store", str(store), "run", str(project / "cycle.yaml"),
                                     "-n", "1", "--no-reports", "-q"])
        assert r.exit_code in (0, 1), r.output
        with Store.open(store) as s:
            runs.append(s.runs.recent(limit=1)[0].id)
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
