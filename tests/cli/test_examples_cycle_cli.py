"""`cycle improve` with few-shot examples on, through the real CLI on the offline quickstart
and a real store file: the offline improver adds an example drawn from an improvement case
(never the held-out one), `cycle diff` and the report show it with its source, rollback
undoes it; with examples off the cycle makes the very versions it made before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cycle.cli import cli
from tests.stored import copied

HELD_OUT = "damaged-item"


@pytest.fixture
def quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(copied("quickstart", tmp_path))

    def configure(**improve: object) -> None:
        cfg = yaml.safe_load(Path("cycle.yaml").read_text())
        cfg["improve"].update(stop={"max_rounds": 1}, validation=[HELD_OUT], **improve)
        Path("cycle.yaml").write_text(yaml.safe_dump(cfg))

    return configure


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result


def report(out: str) -> dict:
    line = next(x for x in out.splitlines() if x.startswith("report: "))
    return json.loads(Path(line.removeprefix("report: ").strip()).with_suffix(".json").read_text())


def test_the_improver_adds_an_example_from_an_improvement_case_and_diff_shows_it(quickstart):
    quickstart(examples={"max": 2})
    out = invoke("improve", "cycle.yaml", "--headless", "--yes").stdout
    data = report(out)
    assert data["final"]["version"] == "1.0.1"

    diff = invoke("diff", "support-reply", "1.0.0", "1.0.1").stdout
    assert "+++ 1.0.1/examples" in diff
    source = diff.split("+example 1  (from case ")[1].split(")")[0]
    files = [yaml.safe_load(f.read_text()) for f in Path("cases").glob("*.yaml")]
    case_ids = {c["id"] for d in files for c in (d["cases"] if isinstance(d, dict) else d)}
    assert source in case_ids and source != HELD_OUT
    shown = invoke("show", "support-reply@1.0.1").stdout
    assert f"source: {source}" in shown
    (example,) = [s for r in data["rounds"] for s in r["suggestions"] if s["type"] == "example"]
    assert example["source_case"] == source and example["applied"]
    md = Path(next(x for x in out.splitlines() if x.startswith("report: "))
              .removeprefix("report: ").strip()).read_text()
    assert f"example (drawn from case {source})" in md

    # the offline agent imitates its examples: the held-out cases gain too
    assert data["final"]["score"] > data["initial"]["score"] + 20

    invoke("rollback", "support-reply", "--to", "1.0.0")
    assert "examples" not in invoke("prompt", "export", "support-reply").stdout


def test_examples_off_the_cycle_makes_the_versions_it_always_made(quickstart):
    quickstart()
    out = invoke("improve", "cycle.yaml", "--headless", "--yes").stdout
    data = report(out)
    assert [(r["version"], round(r["score"], 2)) for r in data["rounds"]] == [
        ("1.0.0", 46.8), ("1.0.1", 54.49), ("1.0.1", 54.49)]  # as main made them
    history = json.loads(invoke("history", "support-reply", "--json").stdout)
    versions = history["versions"] if isinstance(history, dict) else history
    assert {v["version"]: v["hash"] for v in versions} == {
        "1.0.0": "6f369bc4bc3d4de330a704661d65b7e8a62f29a4dfe62dedca7de7b81d07cecc",
        "1.0.1": "608431048cc7e813688bc9730a9dd44dff7da766c860d436a6172ce725b8f8d4",
    }
    assert not [s for r in data["rounds"] for s in r["suggestions"] if s["type"] == "example"]


def test_improve_examples_with_an_adk_agent_is_refused_naming_the_line(quickstart):
    quickstart(examples={"max": 2})
    cfg = yaml.safe_load(Path("cycle.yaml").read_text())
    cfg["agent"] = {"adk": "tests.agents.adk_agents:plain_agent", "model": "offline:default"}
    Path("cycle.yaml").write_text(yaml.safe_dump(cfg))
    result = CliRunner().invoke(cli, ["improve", "cycle.yaml", "--headless", "--yes"])
    assert result.exit_code == 2, result.output
    assert "cycle.yaml" in result.output and "(improve.examples)" in result.output
    assert "would not reach its model" in result.output


def test_the_terminal_review_shows_an_examples_source_and_its_lines(quickstart):
    quickstart(examples={"max": 2})
    result = CliRunner().invoke(cli, ["improve", "cycle.yaml", "--headless", "--review", "prompt"],
                                input="a\na\na\ns\n")
    assert result.exit_code == 0, result.output
    assert "example drawn from case " in result.output
    assert "+++ suggested/examples" in result.output and "+example 1  (from case " in result.output
