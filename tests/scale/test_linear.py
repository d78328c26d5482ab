"""Guards against going quadratic again (issue 17), by counting, not timing: the Python
lines a step executes for n and for 4n items. Linear work grows about 4x; the quadratic
case loading this replaced (every case re-filtered the whole file's line map) grew 16x."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cycle.cases import load_case_file


def lines_executed(fn: Callable[[], Any]) -> int:
    """How many Python lines ``fn()`` executes (comprehension bodies count per item)."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def growth(make: Callable[[int], Callable[[], Any]], n: int) -> float:
    """lines(4n) / lines(n)."""
    small, large = lines_executed(make(n)), lines_executed(make(4 * n))
    return large / small


def test_loading_a_case_file_is_linear_in_its_cases(tmp_path: Path):
    def make(n: int) -> Callable[[], Any]:
        path = tmp_path / f"cases{n}.yaml"
        path.write_text("".join(
            f"- id: c{i}\n  tags: [t{i % 7}]\n  input: {{question: 'What is {i}?', n: {i}}}\n"
            f"  expected: '{i}'\n" for i in range(n)))
        return lambda: load_case_file(path)

    assert growth(make, 300) < 5
