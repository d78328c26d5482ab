"""Held-out cases (issue 15, item 3): the improver never sees them, decisions report the
gain on them apart, and a candidate they did not gain with is rejected as overfitting."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys

import pytest

from cycle.assemble import build_loop
from cycle.cases import TestCase
from cycle.errors import ConfigError
from cycle.loop.holdout import DEFAULT_FROM, held_out_cases
from cycle.loop.review import AutoReviewer
from cycle.testing import script

from .conftest import KEYWORDS, last_json, suggestion


def cases(n: int, tags: dict[int, list[str]] | None = None) -> list[TestCase]:
    return [TestCase(id=f"c{i}", input=f"case {i}", tags=(tags or {}).get(i, [])) for i in range(n)]


def test_the_split_is_stable_and_sized_by_the_fraction() -> None:
    suite = cases(40)
    quarter = held_out_cases(suite, 0.25)
    assert len(quarter) == 10 and quarter == held_out_cases(list(reversed(suite)), 0.25)
    grown = held_out_cases(cases(41), 0.25)
    assert len(quarter & grown) >= 9  # a new case does not reshuffle the others
    assert held_out_cases(suite) == quarter  # on by default from DEFAULT_FROM cases
    assert held_out_cases(cases(DEFAULT_FROM - 1)) == frozenset()
    assert held_out_cases(suite, False) == frozenset()


def test_held_out_cases_by_id_or_tag_and_clear_errors() -> None:
    suite = cases(6, {2: ["tricky"], 3: ["tricky"]})
    assert held_out_cases(suite, ["c0", "tricky"]) == {"c0", "c2", "c3"}
    with pytest.raises(ConfigError, match="no case has the id or tag 'nope'"):
        held_out_cases(suite, ["nope"])
    with pytest.raises(ConfigError, match="holds out 0"):
        held_out_cases(suite, 0.01)
    with pytest.raises(ConfigError, match="between 0 and 1"):
        held_out_cases(suite, 1.5)


def test_the_improver_never_sees_a_held_out_case_and_overfitting_is_rejected(world, store) -> None:
    """'sorry' helps the cases the improver saw (+20) and costs the held-out one 10 points:
    the mean gains +12.5, but the candidate is rejected and head stays."""
    shown: list[set[str]] = []

    def improver(messages, tools, config):
        shown.append({c["id"] for c in last_json(messages)["low_cases"]})
        return {"suggestions": [suggestion("Always say sorry.")]}

    def judge(messages, tools, config):
        case = last_json(messages)
        score = 40 + 20 * sum(w in case["output"] for w in KEYWORDS)
        if case["input"] == "case 4" and "sorry" in case["output"]:
            score -= 30
        return {"verdicts": {"quality": {"score": score, "reasoning": "."}}}

    loaded = world(improver, improve={"validation": ["c4"], "stop": {"max_rounds": 1}})
    script("judge", judge)
    result = asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run())
    assert shown == [{"c1", "c2", "c3"}]
    explore = result.rounds[1]
    assert not explore.accepted and "overfitting" in explore.reason
    assert "seen +20.00, held-out -10.00" in explore.reason
    row = store.cycles.get_rounds(result.cycle_id)[1]
    assert (row.seen_delta, row.held_out_delta) == (20, -10)
    assert store.resolve("support@head").version == "1.0.0" and len(result.rounds) == 2


def test_a_validation_naming_no_case_is_refused_before_anything_runs(world, tmp_path) -> None:
    loaded = world([], improve={"validation": ["c9"], "stop": {"max_rounds": 1}})
    loaded.path.write_text(re.sub(r"scripted:\w+", "offline:default", loaded.path.read_text()))
    proc = subprocess.run([sys.executable, "-m", "cycle", "improve", str(loaded.path), "--headless", "--yes"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert re.search(r"cycle\.yaml.*improve\.validation.*no case has the id or tag 'c9'", proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / ".cycle").exists()
