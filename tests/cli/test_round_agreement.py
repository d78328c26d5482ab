"""Each round of a cycle shows, beside its score, its judge's agreement with people (issue
35): Cohen's kappa over the labels of the runs that judge (its model and prompt version)
judged, with its 95% interval and the number of labels, or "uncalibrated (no labels)".
Through the real CLI on the offline quickstart: the progress lines and summary of
``cycle improve``, ``cycle cycles CYCLE_ID`` (and its --json), and the Markdown, HTML and
JSON reports."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.store import Store
from cycle.store.human_labels import Label

ROOT = Path(__file__).resolve().parents[2]
#: a round's judge figure once people labelled: "kappa 0.43 [0.12, 0.70], n 45"
KAPPA = re.compile(r"kappa (-?\d\.\d\d) \[(-?\d\.\d\d), (-?\d\.\d\d)\], n (\d+)")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    src = ROOT / "examples" / "quickstart"
    for name in ("cases", "prompts", "cycle.yaml"):
        (shutil.copytree if (src / name).is_dir() else shutil.copy)(src / name, tmp_path / name)
    return tmp_path


def improve(project: Path, *args: str, store: object = None) -> str:
    r = CliRunner().invoke(cli, ["improve", str(project / "cycle.yaml"), "--headless", "--yes",
                                 "--store", str(store or project / "s.db"), *args])
    assert r.exit_code == 0, r.output
    return r.output


def cycles(project: Path, *args: str, store: object = None) -> str:
    r = CliRunner().invoke(cli, ["--store", str(store or project / "s.db"), "cycles", *args])
    assert r.exit_code == 0, r.output
    return r.output


def latest_cycle(project: Path, where: object = None) -> str:
    with Store.open(where or project / "s.db") as store:  # type: ignore[arg-type]
        return store.cycles.recent(None, limit=1)[0].id


def label_baseline(project: Path, cycle_id: str, where: object = None) -> int:
    """A person labels every LLM-judged output of the cycle's baseline run: they agree with
    the judge's verdict but on every fourth label (so the judge agrees with them on most,
    and not on all)."""
    with Store.open(where or project / "s.db") as store:  # type: ignore[arg-type]
        [run] = [r for r in store.runs.recent(cycle_id=cycle_id, limit=None) if r.round == 0]
        judged = [(o, c, v) for o in store.human_labels.outputs(run.id)
                  for c, v in o["verdicts"].items() if v["kind"] == "llm"]
        passed = [v["passed"] != (n % 4 == 0) for n, (_, _, v) in enumerate(judged)]
        labels = [Label(run=run.id, case=o["case"], iteration=o["iteration"], criterion=c,
                        score=90.0 if p else 30.0, passed=p, labeler="ann")
                  for (o, c, _), p in zip(judged, passed, strict=True)]
        return store.human_labels.add(labels)


def test_rounds_say_the_judge_is_uncalibrated_until_people_label(project: Path) -> None:
    out = improve(project)
    # the progress line of each round, and each round of the summary, beside the score
    done = [line for line in out.splitlines() if " done: " in line]
    assert done and all(line.endswith("; judge uncalibrated (no labels)") for line in done)
    summary = [line for line in out.splitlines() if line.startswith("  round ")]
    assert len(summary) == len(done)
    assert re.match(r"  round +0: 1\.0\.0 scored \d+\.\d \[\d+\.\d, \d+\.\d\] \(baseline\); "
                    r"judge uncalibrated \(no labels\)$", summary[0]), summary[0]

    cycle_id = latest_cycle(project)
    shown = cycles(project, cycle_id)
    assert f"cycle {cycle_id} on support-reply: finished  [offline model]" in shown
    assert "uncalibrated, no human labels yet" in shown  # the judge's line, per criterion
    rows = [line for line in shown.splitlines() if line.startswith("  round ")]
    assert rows == summary  # the same rounds as the cycle's summary said

    report = (project / "reports" / f"{cycle_id}.md").read_text()
    assert "| judge (kappa with people) |" in report
    assert "| 0 | 1.0.0 |" in report and report.count("| uncalibrated (no labels) |") == len(done)


def test_labels_put_the_judges_kappa_beside_every_round(project: Path, store_target) -> None:
    """On both backends: the labels and the runs they are of are read from the store."""
    improve(project, store=store_target)
    labelled = label_baseline(project, latest_cycle(project, store_target), store_target)
    assert labelled == 45  # 5 cases x 3 iterations x 3 LLM criteria
    # the next cycle, judged by the same judge (model and version)
    out = improve(project, store=store_target)
    cycle_id = latest_cycle(project, store_target)

    done = [line for line in out.splitlines() if " done: " in line]
    figures = {KAPPA.search(line).group(0) for line in done}  # type: ignore[union-attr]
    assert len(figures) == 1  # one judge, one figure for every round
    kappa, low, high, n = KAPPA.search(done[0]).groups()  # type: ignore[union-attr]
    assert int(n) == 45 and float(low) < float(kappa) < float(high)
    assert 0 < float(kappa) < 1  # people agree with the judge more than chance, not always

    data = json.loads((project / "reports" / f"{cycle_id}.json").read_text())
    judge = data["rounds"][0]["judge_agreement"]
    assert judge["model"] == "offline:default" and judge["version"] == "1.0.0"
    assert judge["labels"] == 45 and f"{judge['kappa']:.2f}" == kappa
    assert [f"{x:.2f}" for x in judge["kappa_ci"]] == [low, high]

    figure = f"kappa {kappa} [{low}, {high}], n 45"
    report = (project / "reports" / f"{cycle_id}.md").read_text()
    assert report.count(f"| {figure} |") == len(data["rounds"])
    html = (project / "reports" / f"{cycle_id}.html").read_text()
    assert html.count(f'<td class="judge">{figure}</td>') == len(data["rounds"])
    assert "<th title=\"Cohen&#39;s kappa" in html or "<th title=\"Cohen's kappa" in html

    shown = cycles(project, cycle_id, store=store_target)
    assert "against 45 human labels" in shown
    assert all(line.endswith(f"; judge {figure}") for line in shown.splitlines()
               if line.startswith("  round "))
    as_json = json.loads(cycles(project, cycle_id, "--json", store=store_target))
    assert as_json["cycle_id"] == cycle_id
    assert [r["judge_agreement"]["text"] for r in as_json["rounds"]] == [figure] * len(done)

    # the list of cycles is unchanged: one line a cycle
    listing = cycles(project, store=store_target)
    assert cycle_id in listing and "kappa" not in listing


def test_a_new_judge_prompt_starts_uncalibrated(project: Path) -> None:
    """The figure is the judge in use's: labels of the outputs another judge prompt
    version judged do not make the new one calibrated."""
    improve(project)
    label_baseline(project, latest_cycle(project))
    with Store.open(project / "s.db") as store:
        from cycle.judge.llm_judge import judge_prompt_in

        prompt, version = judge_prompt_in(store)
    edited = prompt.model_copy(update={"system": prompt.system + " Be strict."})
    with Store.open(project / "s.db") as store:
        new = store.save_version(edited, message="stricter").version
    out = improve(project)
    done = [line for line in out.splitlines() if " done: " in line]
    assert new != version
    assert all(line.endswith("; judge uncalibrated (no labels)") for line in done), done


def test_a_kappa_a_hair_under_zero_reads_as_zero() -> None:
    from cycle.records import JudgeKappa

    k = JudgeKappa(model="m", version="1.0.0", kappa=-1e-9, kappa_ci=(-2e-9, 0.0), labels=45)
    assert k.text() == "kappa 0.00 [0.00, 0.00], n 45"
    assert k.compact() == "0.00 [0.00, 0.00] n 45"
    assert JudgeKappa(model="m", version="1.0.0", kappa=None, kappa_ci=None,
                      labels=3).text() == "kappa —, n 3"  # everyone said pass: undefined
