"""A population's lineage in the cycle reports (cycle.report.lineage): a real cycle on
scripted models, through the CLI, draws each candidate under its parent with its screen
gain, full evaluation and decision, a merge with both parents, head and the frontier, in
the console, Markdown, HTML and JSON; a chain's reports have no lineage section."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli

#: the merge world's cycle: two rounds of two candidates, then a merge, confirmed
TREE = [
    (0, "1.0.0", "**1.0.0** · start · baseline 35.5"),
    (1, "1.0.1", ("**1.0.1** · round 1, candidate 1 · screen +24.0 on 5 cases · "
                  "full 58.0 (+22.5) · kept · frontier: best on 6 cases")),
    (2, "1.0.4", ("**1.0.4** · round 3, candidate 2 · merge of 1.0.1 and 1.0.3 · "
                  "screen +7.5 on 8 cases · full 65.5 (+7.5) · kept, confirmed · **head** · "
                  "frontier: best on 8 cases")),
    (1, "1.0.2", ("**1.0.2** · round 1, candidate 2 · screen +0.0 on 5 cases · "
                  "ended at its screen")),
    (1, "1.0.3", ("**1.0.3** · round 2, candidate 2 · screen +7.5 on 4 cases · "
                  "full 43.0 (-15.0) · rejected · frontier: best on 2 cases")),
]


def improve(config: Path, tmp_path: Path, *extra: str):
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "cycle.db"), "improve", str(config),
                                 "--headless", "--yes", "--report-dir", str(tmp_path / "reports"),
                                 *extra])
    assert r.exit_code == 0, r.output
    (data_file,) = (tmp_path / "reports").glob("*.json")
    return r.output, json.loads(data_file.read_text()), data_file.with_suffix("")


class _Items(HTMLParser):
    """Each list item of the lineage tree -> the item it is nested in."""

    def __init__(self) -> None:
        super().__init__()
        self.parent_of: dict[str, str | None] = {}
        self.classes: dict[str, set[str]] = {}
        self._open: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "li" and "data-version" in a:
            self.parent_of[a["data-version"]] = self._open[-1] if self._open else None
            self.classes[a["data-version"]] = set((a.get("class") or "").split())
            self._open.append(a["data-version"])

    def handle_endtag(self, tag):
        if tag == "li" and self._open:
            self._open.pop()


def test_a_population_cycles_reports_draw_each_candidate_under_its_parent(merge_world,
                                                                          tmp_path):
    loaded = merge_world([])
    # --no-cache: the improver answers by how often it was asked (as in tests/loop)
    out, data, stem = improve(loaded.path, tmp_path, "--no-cache",
                              "--events", str(tmp_path / "events.jsonl"))
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]

    # Markdown: a nested list, each candidate under its parent, after the rounds table
    md = stem.with_suffix(".md").read_text()
    assert md.index("## Rounds") < md.index("## Lineage") < md.index("## Suggestions")
    assert [f"{'  ' * depth}- {text}" for depth, _, text in TREE] == [
        line for line in md.splitlines() if line.lstrip().startswith("- **")]

    # JSON: the same tree as data, every screen the cycle told with its gain and fate
    lineage = data["lineage"]
    assert [(c["depth"], c["version"]) for c in lineage["candidates"]] == [
        (depth, version) for depth, version, _ in TREE]
    screened = {(c["round"], c["slot"]): c for c in lineage["candidates"] if c["screened"]}
    told = [e for e in events if e["kind"] == "candidate_screened"]
    assert sorted(screened) == sorted((e["round"], e["slot"]) for e in told)
    for e in told:
        c = screened[e["round"], e["slot"]]
        assert (c["version"], c["parent"], c["second_parent"], c["screen_gain"], c["evaluated"]) \
            == (e["version"], e["parent"], e["second_parent"], e["gain"], e["kept"])
    frontier = [e for e in events if e["kind"] == "frontier_changed"][-1]["versions"]
    assert {f["version"]: f["cases"] for f in lineage["frontier"]} == frontier
    assert lineage["head"] == data["final"]["version"] == "1.0.4"

    # HTML: nested lists, the merge inside its first parent's item, head and frontier marked
    items = _Items()
    items.feed(stem.with_suffix(".html").read_text())
    assert items.parent_of == {"1.0.0": None, "1.0.1": "1.0.0", "1.0.4": "1.0.1",
                               "1.0.2": "1.0.0", "1.0.3": "1.0.0"}
    assert items.classes["1.0.4"] == {"head", "merge", "frontier"}
    assert items.classes["1.0.2"] == {"ended"}

    # the console: a compact tree at the end of the cycle, and again from cycle report
    tree = [
        "lineage (a population of 2; rN.K: round N's candidate K):",
        "  1.0.0  start  baseline 35.5",
        "  ├─ 1.0.1  r1.1  screen +24.0  full 58.0 (+22.5)  kept  frontier 6",
        ("  │  └─ 1.0.4  r3.2  merge of 1.0.1 and 1.0.3  screen +7.5  full 65.5 (+7.5)  "
         "kept, confirmed  head  frontier 8"),
        "  ├─ 1.0.2  r1.2  screen +0.0  ended at its screen",
        "  └─ 1.0.3  r2.2  screen +7.5  full 43.0 (-15.0)  rejected  frontier 2",
    ]
    lines = out.splitlines()
    start = lines.index(tree[0])
    assert lines[start:start + len(tree)] == tree
    again = CliRunner().invoke(cli, ["--store", str(tmp_path / "cycle.db"), "report",
                                     data["cycle_id"], "--no-write"])
    assert again.exit_code == 0
    shown = again.output.splitlines()  # the cycle's id and rounds, then its lineage
    assert shown[0] == f"cycle {data['cycle_id']}:"
    start = shown.index(tree[0])
    assert shown[start:] == tree

    # the merged version read on its own names both parents
    store = ["--store", str(tmp_path / "cycle.db")]
    shown = CliRunner().invoke(cli, [*store, "show", "support@1.0.4"]).output
    assert "# source  improver, parent 1.0.1 + 1.0.3, created" in shown
    (row,) = [line for line in CliRunner().invoke(cli, [*store, "history", "support"]).output
              .splitlines() if line.startswith("1.0.4 ")]
    assert "1.0.1 + 1.0.3" in row
    listed = json.loads(CliRunner().invoke(cli, [*store, "show", "support@1.0.4", "--json"]).output)
    assert (listed["parent"], listed["second_parent"]) == ("1.0.1", "1.0.3")


def test_a_chains_reports_are_as_they_were(world, tmp_path):
    """A round of one: no lineage section, no tree on the console, null in the JSON."""
    from tests.loop.conftest import suggestion

    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}],
                   improve={"stop": {"max_rounds": 1}})
    out, data, stem = improve(loaded.path, tmp_path)
    assert data["lineage"] is None and "lineage" not in out
    md = stem.with_suffix(".md").read_text()
    assert [line for line in md.splitlines() if line.startswith("#")] == [
        f"# Improvement cycle {data['cycle_id']}: support", "## Rounds",
        "## Score across rounds", "## Suggestions", "### Round 1",
        "## From the first prompt to the final one"]
    assert "Lineage" not in stem.with_suffix(".html").read_text()


def test_a_round_whose_screens_all_failed_shows_them_and_no_full_evaluation(world, tmp_path):
    """Every candidate ended at its screen: the lineage says so, and the cases-by-round
    table has no column for the round (a screen is a minibatch, not its evaluation)."""
    from tests.loop.conftest import suggestion

    loaded = world(lambda *_: {"suggestions": [suggestion("Be calm.")]}, cases=4,
                   improve={"population": 2, "stop": {"max_rounds": 1}})
    out, data, _ = improve(loaded.path, tmp_path)
    (candidate,) = data["lineage"]["candidates"][1:]
    assert (candidate["round"], candidate["screen_gain"], candidate["decision"]) == (
        1, 0.0, "ended at its screen")
    assert data["rounds"][1]["verdict"] == "no"
    assert {int(n) for case in data["cases"].values() for n in case} == {0}
    assert "  └─ 1.0.1  r1.1  screen +0.0  ended at its screen" in out.splitlines()
