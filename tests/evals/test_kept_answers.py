"""A huge answer is judged whole, and stored and reported cut with a marker: a 5 MB
answer does not make a store and a report of its size."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cycle.cli import cli
from cycle.evals.runner import KEPT_CHARS
from cycle.testing import clear_scripts, script


def test_a_huge_answer_is_judged_whole_and_kept_cut(tmp_path):
    huge = "start " + "x" * 5_000_000 + " the end"
    script("agent", [huge], repeat=True)
    try:
        (tmp_path / "p.yaml").write_text("id: p\nuser_template: '{{ q }}'\n"
                                         "params: {model: 'scripted:agent'}\n")
        (tmp_path / "cases.yaml").write_text("- {id: c, input: {q: hi}}\n")
        (tmp_path / "cycle.yaml").write_text(
            "prompt: p.yaml\ncases: [cases.yaml]\nrun: {iterations: 1}\n"
            "criteria: [{id: end, check: {type: contains, values: [the end]}}]\n")
        r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                     str(tmp_path / "cycle.yaml")])
    finally:
        clear_scripts()
    assert r.exit_code == 0, r.output  # the check saw the whole answer, its end included
    report = max((tmp_path / "reports").glob("*.json"))
    output = json.loads(report.read_text())["cases"][0]["results"][0]["output"]
    assert len(output) <= KEPT_CHARS + 100 and "characters cut ..." in output
    assert output.startswith("start ") and output.endswith(" the end")
    assert report.stat().st_size < 4 * KEPT_CHARS  # the answer, its turn and the final: cut
    # the store: the cut copies, and the call journal's one whole answer (which a resume
    # replays exactly): not the three whole copies it held before
    assert (tmp_path / "s.db").stat().st_size < len(huge) + 5 * KEPT_CHARS
