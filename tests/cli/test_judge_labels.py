"""`cycle judge sample | labels import/export | agreement` through the real CLI (issue 35)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.store import Store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> tuple[Path, str]:
    """A stored offline run of the quickstart: its store and run id."""
    project = tmp_path_factory.mktemp("judge") / "quickstart"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".cycle", "reports"))
    store = project / "s.db"
    r = CliRunner().invoke(cli, ["--store", str(store), "run", str(project / "cycle.yaml"),
                                 "--no-reports", "-q"])
    assert r.exit_code in (0, 1), r.output
    with Store.open(store) as s:
        run_id = s.runs.recent(limit=1)[0].id
    return store, run_id


def invoke(store: Path, *args: str):
    return CliRunner().invoke(cli, ["--store", str(store), "judge", *args])


def test_sample_label_import_and_agreement(judged, tmp_path):
    store, run_id = judged
    shown = CliRunner().invoke(cli, ["--store", str(store), "report", run_id, "--no-write"])
    assert (f"Judge offline:default cycle-judge@1.0.0: uncalibrated, no human labels yet (to "
            f"measure it: cycle judge sample {run_id})") in shown.output, shown.output
    out = tmp_path / "to-label.jsonl"
    r = invoke(store, "sample", run_id, "--n", "8", "--out", str(out), "--labeler", "ann")
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert {x["criterion"] for x in lines} == {"accuracy", "tone", "actionable"}  # LLM ones
    assert len({(x["case"], x["iteration"]) for x in lines}) == 8
    assert len({x["case"] for x in lines}) == 5  # spread over every case
    assert all(x["score"] is None and "judge" not in json.dumps(x) for x in lines)  # hidden
    # the person scores each output: 10 points under the judge (read from the store)
    with Store.open(store) as s:
        verdicts = {(o["case"], o["iteration"], c): v["score"]
                    for o in s.human_labels.outputs(run_id) for c, v in o["verdicts"].items()}
    for x in lines:
        x["score"] = max(0.0, verdicts[(x["case"], x["iteration"], x["criterion"])] - 10)
    lines[0]["score"] = None  # one not labelled yet
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = invoke(store, "labels", "import", str(out))
    assert r.exit_code == 0, r.output
    assert f"{len(lines) - 1} labels stored from {out}; 1 lines not labelled yet" in r.output
    r = invoke(store, "agreement", run_id, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["judge"].startswith("offline:default cycle-judge@")
    tone = data["criteria"]["tone"]
    assert set(tone) >= {"n", "agreement", "kappa", "kappa_ci", "alpha", "alpha_ci", "bias",
                         "bias_ci"}
    assert 0 < tone["bias"] <= 10 and tone["n"] >= 7  # the judge is up to 10 points high
    r = invoke(store, "agreement", run_id)
    assert "judge offline:default cycle-judge@" in r.output and "bias, points" in r.output
    # the run (and any later run of the same judge) now shows its agreement
    reports = tmp_path / "reports"
    shown = CliRunner().invoke(cli, ["--store", str(store), "report", run_id, "--report-dir",
                                     str(reports)])
    assert "Judge offline:default cycle-judge@1.0.0, against" in shown.output
    assert "tone kappa" in shown.output and "bias -" not in shown.output
    markdown = (reports / f"{run_id}.md").read_text()
    assert "| Judge's agreement | Judge offline:default cycle-judge@1.0.0, against" in markdown
    report = json.loads((reports / f"{run_id}.json").read_text())
    assert "tone kappa" in report["judge_agreement"]
    assert "tone kappa" in (reports / f"{run_id}.html").read_text()
    # export gives back what was imported
    r = invoke(store, "labels", "export", run_id)
    exported = [json.loads(x) for x in r.output.splitlines()]
    assert len(exported) == len(lines) - 1 and all(x["labeler"] == "ann" for x in exported)


def test_a_bad_label_file_names_the_line_and_stores_nothing(judged, tmp_path):
    store, run_id = judged
    bad = tmp_path / "bad.jsonl"
    good = {"run": run_id, "case": "late-delivery", "iteration": 0, "criterion": "tone",
            "score": 60, "labeler": "bo"}
    bad.write_text(json.dumps(good) + "\n" + json.dumps({**good, "scroe": 50}) + "\n")
    r = invoke(store, "labels", "import", str(bad))
    assert r.exit_code == 2, r.output
    assert "bad.jsonl:2 (scroe): unknown key 'scroe'" in r.output
    bad.write_text(json.dumps({**good, "score": 150}) + "\n")
    r = invoke(store, "labels", "import", str(bad))
    assert r.exit_code == 2 and "bad.jsonl:1 (score): score must be a number from 0 to 100" in r.output
    bad.write_text(json.dumps(good) + "\n" + json.dumps({**good, "case": "no-such-case"}) + "\n")
    r = invoke(store, "labels", "import", str(bad))
    assert r.exit_code == 2 and "no stored output for run" in r.output
    with Store.open(store) as s:  # all or none: the good first line was not kept either
        assert not [x for x in s.human_labels.of_run(run_id) if x.label.labeler == "bo"]
