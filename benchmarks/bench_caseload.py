"""Benchmark: reading a case file, on the way to a run's first request (issue 40).

A file of N cases (``- id: ...`` with a two-variable ``input``, as bench_latency.py
writes), read and validated by ``cycle.cases.load_case_file``: each item built from the
YAML parser's events (``cycle.yamlload._quick``), beside the same file read through
PyYAML's composer and constructor (what every item went through before, and what an item
with an anchor, a tag or a merge key still goes through). Best of 7, in one process.

    .venv/bin/python benchmarks/bench_caseload.py [--cases 500 2000 20000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from cycle import yamlload
from cycle.cases import load_case_file


def best(path: Path, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        load_case_file(path)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, nargs="+", default=[500, 2000, 20000])
    args = parser.parse_args()
    quick_depth = yamlload._QUICK_DEPTH
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.cases:
            path = Path(tmp) / f"c{n}.yaml"
            path.write_text("".join(
                f"- id: c{i:05d}\n  input: {{customer: C{i}, question: 'where is parcel {i}?'}}\n"
                for i in range(n)))
            quick = best(path)
            yamlload._QUICK_DEPTH = -1  # every item to PyYAML's composer and constructor
            try:
                composed = best(path)
            finally:
                yamlload._QUICK_DEPTH = quick_depth
            print(f"{n:>7} cases: {quick * 1000:8.1f} ms ({quick / n * 1e6:5.1f} us a case) "
                  f"against {composed * 1000:8.1f} ms through PyYAML's composer: "
                  f"{quick / composed:.2f}x", flush=True)


if __name__ == "__main__":
    main()
