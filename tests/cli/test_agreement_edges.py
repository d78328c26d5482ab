"""`cycle judge agreement` on the labels people really give: the same labels given twice, a
label beside no verdict, a handful of labels, a person who always agrees. Before, the first
counted each label twice, the second counted in n, the third had bootstrap "95%" intervals
from 3 outputs and the last an interval of [1, 1] that let a cycle's judge gate pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.judge.agreement import MIN_OUTPUTS, Rating, measure
from cycle.judge.calibration import gate
from cycle.store import Store
from cycle.store.human_labels import Label, Labelled
from tests.stored import copied, run


@pytest.fixture
def judged(tmp_path) -> tuple[Path, str, list[dict]]:
    """A stored offline run of the quickstart: its store, run id and judged outputs."""
    project = copied("quickstart", tmp_path)
    store = tmp_path / "s.db"
    run_id = run(store, project / "cycle.yaml")
    with Store.open(store) as s:
        outputs = s.human_labels.outputs(run_id)
    return store, run_id, outputs


def agreement(store: Path, run_id: str, *args: str) -> dict:
    r = CliRunner().invoke(cli, ["--store", str(store), "judge", "agreement", run_id, "--json",
                                 *args])
    assert r.exit_code == 0, r.output

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")
    return json.loads(r.output, parse_constant=refuse)


def write(path: Path, run_id: str, outputs: list[dict], criterion: str, scores: list[float]) -> Path:
    path.write_text("".join(json.dumps({
        "run": run_id, "case": o["case"], "iteration": o["iteration"], "criterion": criterion,
        "score": s, "labeler": "ann"}) + "\n" for o, s in zip(outputs, scores, strict=False)))
    return path


def test_labels_given_again_in_a_file_are_not_counted_twice(judged, tmp_path):
    store, run_id, outputs = judged
    labels = write(tmp_path / "l.jsonl", run_id, outputs, "tone",
                   [o["verdicts"]["tone"]["score"] - 5 for o in outputs])
    assert CliRunner().invoke(cli, ["--store", str(store), "judge", "labels", "import",
                                    str(labels)]).exit_code == 0
    stored = agreement(store, run_id)["criteria"]["tone"]
    again = agreement(store, run_id, "--labels", str(labels))["criteria"]["tone"]
    assert stored["n"] == again["n"] == len(outputs)  # was 2 x 15
    assert again == stored


def test_few_labels_get_no_interval_and_say_so(judged, tmp_path):
    store, run_id, outputs = judged
    labels = write(tmp_path / "l.jsonl", run_id, outputs, "tone", [20, 30, 45])
    data = agreement(store, run_id, "--labels", str(labels))["criteria"]["tone"]
    assert data["n"] == 3 and data["bias"] == pytest.approx(30 - 95 / 3)
    assert data["bias_ci"] is None  # a bootstrap of three outputs gave one
    assert (f"no 95% intervals on 3 labelled output(s): under {MIN_OUTPUTS} a bootstrap's "
            "interval would be far too narrow") in data["notes"]
    shown = CliRunner().invoke(cli, ["--store", str(store), "judge", "agreement", run_id,
                                     "--labels", str(labels)]).output
    assert "tone: no 95% intervals on 3 labelled output(s)" in shown
    # one label: no corrected mean, and why
    one = write(tmp_path / "1.jsonl", run_id, outputs, "tone", [20])
    data = agreement(store, run_id, "--labels", str(one))["criteria"]["tone"]
    assert data["corrected_mean"] is None and data["corrected_ci"] is None
    assert ("no corrected mean: 1 labelled output(s) with a score from both the judge and a "
            "person, it takes 2") in data["notes"]


def test_every_label_of_one_class_says_kappa_is_undefined(judged, tmp_path):
    store, run_id, outputs = judged  # the offline judge fails every output on tone
    labels = write(tmp_path / "l.jsonl", run_id, outputs, "tone", [10.0] * len(outputs))
    data = agreement(store, run_id, "--labels", str(labels))["criteria"]["tone"]
    assert data["kappa"] is None and data["kappa_ci"] is None and data["agreement"] == 1.0
    assert any(n.startswith("kappa undefined: the judge and the people gave one verdict only")
               for n in data["notes"])


def test_a_label_beside_no_verdict_is_counted_apart(judged, tmp_path):
    store, run_id, outputs = judged
    labels = write(tmp_path / "l.jsonl", run_id, outputs, "tonee", [50, 60])  # a typo
    data = agreement(store, run_id, "--labels", str(labels))["criteria"]["tonee"]
    assert data["n"] == 0 and data["unmatched"] == 2
    assert data["notes"][0].startswith("2 label(s) have no judge verdict beside them")


def test_a_person_who_always_agrees_gets_an_honest_lower_bound_not_1():
    """12 outputs, half passed, every label agreeing: the bootstrap said [1.00, 1.00] and a
    cycle's `min_agreement: 0.6` gate let head move on it."""
    ratings = [Rating(("r", "c", i), "ann", None, i % 2 == 0, None, i % 2 == 0) for i in range(12)]
    a = measure(ratings)
    assert a.kappa == 1.0 and a.kappa_ci is not None
    low = (0.025 ** (1 / 12) - 0.5) / 0.5
    assert a.kappa_ci == (pytest.approx(low), 1.0) and low < 0.6
    labelled = [Labelled(label=Label(run="r", case="c", iteration=i, criterion="q", score=None,
                                     passed=i % 2 == 0, labeler="ann"),
                         judge_score=None, judge_passed=i % 2 == 0) for i in range(12)]
    why = gate(labelled, ["q"], 0.6)
    assert why is not None and "q: kappa 1.00, lower bound 0.47 < 0.60 on 12 labels" in why
    # at 50 outputs the bound clears the floor: a person who always agrees is believed
    many = [Rating(("r", "c", i), "ann", None, i % 2 == 0, None, i % 2 == 0) for i in range(50)]
    assert measure(many).kappa_ci[0] > 0.85


def test_a_large_sample_s_normal_interval_stays_inside_kappa_s_range():
    """Past LARGE outputs the interval is normal: a kappa near 1 gave an upper bound over 1."""
    from cycle.judge.agreement import LARGE

    n = LARGE + 100
    ratings = [Rating(("r", "c", i), "ann", None, i % 2 == 0, None, (i % 2 == 0) != (i == 0))
               for i in range(n)]  # one disagreement in 500
    a = measure(ratings)
    assert a.kappa is not None and a.kappa > 0.99 and a.kappa_ci is not None
    assert -1.0 <= a.kappa_ci[0] <= a.kappa <= a.kappa_ci[1] <= 1.0
    assert a.correlation is None and a.bias is None


def test_a_score_alone_passes_at_the_criterion_s_mark_in_its_run(tmp_path):
    """pass_threshold 90: the judge fails accuracy's 84s; a person who scores them 84 too
    was stored as passing (a fixed 70), and agreement read 0.00 for identical scores."""
    project = copied("quickstart", tmp_path)
    config = project / "cycle.yaml"
    config.write_text(config.read_text().replace("pass_threshold: 70", "pass_threshold: 90"))
    store = tmp_path / "s.db"
    run_id = run(store, config, "-n", "1")
    with Store.open(store) as s:
        outputs = s.human_labels.outputs(run_id)
    assert {o["verdicts"]["accuracy"]["passed"] for o in outputs} == {False}
    scores = [o["verdicts"]["accuracy"]["score"] for o in outputs]
    labels = write(tmp_path / "l.jsonl", run_id, outputs, "accuracy", scores)
    data = agreement(store, run_id, "--labels", str(labels))["criteria"]["accuracy"]
    assert data["agreement"] == 1.0 and data["base_rate"] == 0.0
    assert CliRunner().invoke(cli, ["--store", str(store), "judge", "labels", "import",
                                    str(labels)]).exit_code == 0
    with Store.open(store) as s:
        assert {x.label.passed for x in s.human_labels.of_run(run_id)} == {False}


def test_labels_alike_on_every_output_give_no_interval_rather_than_a_point(judged, tmp_path):
    """A person who scores every output exactly 5 below the judge (or exactly as it does):
    every resample of the outputs gives the same bias (alpha, correlation), and the
    bootstrap said [+5.0, +5.0], a certainty 15 outputs cannot give. No interval now, and
    the notes say why."""
    store, run_id, outputs = judged
    assert len(outputs) >= MIN_OUTPUTS
    shifted = write(tmp_path / "s.jsonl", run_id, outputs, "tone",
                    [o["verdicts"]["tone"]["score"] - 5 for o in outputs])
    got = agreement(store, run_id, "--labels", str(shifted))["criteria"]["tone"]
    assert got["bias"] == pytest.approx(5.0) and got["bias_ci"] is None  # the judge 5 high
    assert any(note.startswith("no 95% interval for bias: every resample of the 15 labelled")
               for note in got["notes"]), got["notes"]
    r = CliRunner().invoke(cli, ["--store", str(store), "judge", "agreement", run_id,
                                 "--labels", str(shifted)])
    assert "[+5.0, +5.0]" not in r.output and "no 95% interval for bias" in r.output, r.output
    # a person who scores as the judge does, over varied scores: alpha and correlation 1
    scores = [10.0 * (i % 10) for i in range(MIN_OUTPUTS + 5)]
    same = measure([Rating(("r", f"c{i}", 0), "ann", x, x >= 70, x, x >= 70)
                    for i, x in enumerate(scores)])
    assert (same.alpha, same.correlation, same.bias) == (1.0, pytest.approx(1.0), 0.0)
    assert same.alpha_ci is same.correlation_ci is same.bias_ci is None
    assert same.flat == ["alpha", "bias", "correlation"]
    assert same.kappa_ci is not None and same.kappa_ci[0] < 1  # kappa's exact bound stays
