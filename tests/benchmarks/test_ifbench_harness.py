"""benchmarks/ifbench: IFBench's checkers as a cycle check, and the harness end to end on
the offline model (the real CLI in its own processes, a real SQLite store)."""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

for _module in ("nltk", "emoji", "syllapy"):
    pytest.importorskip(_module, reason="IFBench's checkers import nltk, emoji and syllapy: "
                        "pip install -e '.[dev]'")

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "benchmarks" / "ifbench"


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch):
    """The harness's modules, imported as run.py imports them (its folder on sys.path)."""
    monkeypatch.syspath_prepend(str(HARNESS))
    spec = importlib.util.spec_from_file_location("ifbench_run", HARNESS / "run.py")
    assert spec and spec.loader
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    import project
    import scoring

    return run, project, scoring


def _run_harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(HARNESS / "run.py"), *args], check=False,
                          text=True, capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize(("instruction", "kwargs", "answer", "followed"), [
    # the five kinds whose NLTK data the stand-ins replace
    ("words:words_position", {"keyword": "vibrant"}, "A vibrant sky, so vibrant.", True),
    ("words:words_position", {"keyword": "vibrant"}, "A vibrant sky, so blue.", False),
    ("ratio:stop_words", {"percentage": 30}, "Cats chase mice quickly.", True),
    ("ratio:stop_words", {"percentage": 30}, "The cat sat on the mat.", False),
    ("format:title_case", {}, "This Is A Title.", True),
    ("format:title_case", {}, "This is not a title.", False),
    ("words:start_verb", {}, "Write the report today.", True),
    ("words:start_verb", {}, "The report is done.", False),
    ("words:keywords_specific_position", {"keyword": "river", "n": 2, "m": 3},
     "I walked far. We saw river banks.", True),
    ("words:keywords_specific_position", {"keyword": "river", "n": 2, "m": 3},
     "I walked far. The river was wide.", False),
    # one the stand-ins do not touch
    ("format:no_whitespace", {}, "NoSpacesAtAll.", True),
    ("format:no_whitespace", {}, "Some spaces.", False),
])
def test_the_checkers_judge_answers_as_the_instruction_says(harness, instruction, kwargs,
                                                            answer, followed):
    _, _, scoring = harness
    (verdict,) = scoring.verdicts(answer, "the prompt", [instruction], [kwargs])
    assert verdict.followed is followed and not verdict.error


def test_a_checker_that_breaks_on_an_answer_fails_it_and_says_so(harness):
    """A stop-word ratio of an answer with no words divides by zero: upstream's run stops;
    here the answer fails that instruction and the reason names the error."""
    _, _, scoring = harness
    from cycle.testing.checks import check_context

    ctx = check_context("?!", expected={"instruction_id_list": ["ratio:stop_words"],
                                        "kwargs": [{"percentage": 30}]})
    outcome = scoring.score(ctx)
    assert outcome.score == 0
    assert "ratio:stop_words: not followed (the checker raised ZeroDivisionError" in outcome.reason


def test_a_case_edited_into_an_unknown_instruction_is_an_error_naming_it(harness):
    """An error of the case (cycle counts it apart), not a zero for the prompt."""
    _, _, scoring = harness
    from cycle.testing.checks import check_context

    ctx = check_context("an answer", case_id="ifbench-7", expected={
        "instruction_id_list": ["format:no_such_thing"], "kwargs": [{}]})
    with pytest.raises(ValueError, match="case ifbench-7: its expected is not an IFBench "
                       "item's instructions: unknown instruction 'format:no_such_thing'"):
        scoring.score(ctx)


def test_a_span_that_starts_at_zero_is_scored_the_same_every_time(harness):
    """Item 286 asks for the words 0 to 7 of a text: upstream drew a random span for a start
    of 0, so the same answer passed or failed by chance."""
    _, project, scoring = harness
    (item,) = [i for i in project.load_items() if i["key"] == "286"]
    kwargs = [{k: v for k, v in kw.items() if v is not None} for kw in item["kwargs"]]
    right = " ".join(kwargs[0]["prompt_to_repeat"].split()[0:7])
    runs = {scoring.verdicts(right, item["prompt"], item["instruction_id_list"], kwargs)[0].followed
            for _ in range(30)}
    assert runs == {True}


def test_the_split_is_seeded_stratified_and_disjoint(harness):
    _, project, _ = harness
    items = project.load_items()
    assert len(items) == 294
    improve, test = project.split(items, 0.5, 38)
    again = project.split(project.load_items(), 0.5, 38)
    assert [i["key"] for i in improve] == [i["key"] for i in again[0]]
    assert {i["key"] for i in improve}.isdisjoint({i["key"] for i in test})
    assert len(improve) + len(test) == 294 and abs(len(improve) - len(test)) <= 1
    kinds = {i["instruction_id_list"][0] for i in items}
    sides = [{i["instruction_id_list"][0] for i in side} for side in (improve, test)]
    # every kind with two items or more is on both sides
    assert all(k in sides[0] and k in sides[1] for k in kinds
               if sum(i["instruction_id_list"][0] == k for i in items) >= 2)
    other = project.split(project.load_items(), 0.5, 39)[1]
    assert {i["key"] for i in other} != {i["key"] for i in test}


def _rescored(store_path: Path, run_id: str, scoring, cases: dict[str, dict]
              ) -> tuple[dict[str, float], set[str]]:
    """Each stored iteration's answer scored again by the checkers: the means per case,
    and the answers."""
    from cycle.store import Store

    with Store.open(store_path, create=False) as store:
        results = store.runs.load_results(run_id)
    by_case: dict[str, list[float]] = {}
    for r in results:
        spec = cases[r.case_id]["expected"]
        found = scoring.verdicts(r.output, cases[r.case_id]["input"],
                                 spec["instruction_id_list"], spec["kwargs"])
        mine = 100 * sum(v.followed for v in found) / len(found)
        assert r.score == pytest.approx(mine), r.case_id  # the stored score is the check's
        by_case.setdefault(r.case_id, []).append(mine)
    return {k: sum(v) / len(v) for k, v in by_case.items()}, {r.output for r in results}


def test_the_harness_improves_then_scores_both_versions_on_cases_the_cycle_never_saw(
        harness, tmp_path):
    """Offline, 12 items, every candidate accepted (so head moves): the cycle sees one half,
    the other half is scored with the starting prompt and with head, paired."""
    import yaml

    _, _, scoring = harness
    work = tmp_path / "ifbench"
    proc = _run_harness("--items", "12", "--seed", "3", "--iterations", "1", "--rounds", "2",
                        "--acceptance", "always", "--workdir", str(work))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("OFFLINE: ")
    assert "they say nothing about any real model" in proc.stdout

    result = json.loads((work / "result.json").read_text())
    assert result["offline"] and result["improve_cases"] == 6 and result["test_cases"] == 6
    assert set(result["test"]["case_ids"]).isdisjoint(result["cycle"]["seen_case_ids"])
    start, head = result["start_version"], result["head_version"]
    assert start == "1.0.0" and head != start
    before, after = result["test"]["before"], result["test"]["after"]
    assert (before["version"], after["version"]) == (start, head)

    # the scores are IFBench's checkers on the answers each version gave
    cases = {c["id"]: c for c in yaml.safe_load((work / "cases" / "test.yaml").read_text())}
    store = work / ".cycle" / "cycle.db"
    (means, answers), (means_after, answers_after) = (
        _rescored(store, side["run_id"], scoring, cases) for side in (before, after))
    assert answers != answers_after  # head's edits change the answers: the after run ran head
    assert before["score"] == pytest.approx(sum(means.values()) / 6)
    assert after["score"] == pytest.approx(sum(means_after.values()) / 6)
    assert after["score"] != before["score"]
    gain = result["test"]["gain"]["score"]
    assert gain["pairs"] == 6
    assert gain["mean"] == pytest.approx(after["score"] - before["score"])
    assert gain["ci_low"] < gain["mean"] < gain["ci_high"]
    assert "paired over 6 cases" in proc.stdout

    # every paid call is counted, as the store's call journal has them
    with sqlite3.connect(store) as db:
        journal = db.execute("select count(*) from calls where cache_hit = 0").fetchone()[0]
    assert result["calls"]["total"] == journal
    assert result["calls"]["test"] == {"total": 12, "agent": 12}  # 6 cases x 2 versions


def test_a_cycle_that_keeps_head_is_scored_once(harness, tmp_path):
    """cycle's gate rejects the offline improver's edits: head stays, the final prompt is
    the starting one, and the held-out cases are not paid for twice."""
    work = tmp_path / "ifbench"
    proc = _run_harness("--items", "12", "--seed", "1", "--iterations", "1", "--rounds", "1",
                        "--workdir", str(work))
    assert proc.returncode == 0, proc.stderr
    result = json.loads((work / "result.json").read_text())
    assert result["head_version"] == result["start_version"] == "1.0.0"
    assert result["test"]["after"] == result["test"]["before"]
    assert result["calls"]["test"] == {"total": 6, "agent": 6}
    assert "head did not move: the final prompt is the starting one" in proc.stdout


def test_too_few_items_is_one_clear_error_before_anything_is_written(harness, tmp_path, capsys):
    run, _, _ = harness
    assert run.main(["--items", "4", "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "4 items split into 2 to improve on and 2 to test: each side needs 3 or more" in err
    assert "Traceback" not in err and not (tmp_path / "w").exists()


def test_a_workdir_in_use_is_refused(harness, tmp_path, capsys):
    run, _, _ = harness
    (tmp_path / "notes.txt").write_text("mine")
    assert run.main(["--items", "12", "--workdir", str(tmp_path)]) == 2
    assert "is not empty; give a new --workdir" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_real_model_without_its_key_stops_before_anything_is_stored(harness, tmp_path, capsys):
    run, _, _ = harness
    work = tmp_path / "w"
    assert run.main(["--items", "12", "--model", "openai:gpt-4o-mini", "--workdir",
                     str(work)]) == 2
    err = capsys.readouterr().err
    assert "no API key for openai:gpt-4o-mini: set OPENAI_API_KEY" in err
    assert not (work / ".cycle").exists()
