"""A/B of two checkouts of cycle on scenario (b) of bench_suite: client CPU per model call,
2,000 cases at zero latency, concurrency 16, the two checkouts alternating (the machine is
shared: back-to-back runs of one version are not comparable with another's later).

    git worktree add /tmp/before <commit>
    .venv/bin/python benchmarks/ab_suite.py /tmp/before . --rounds 5

Each run is a fresh process importing the checkout it measures (PYTHONPATH), against a
fresh loopback server in its own process. Prints each pair and the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ONE = """
import asyncio, json, sys, tempfile
from pathlib import Path
root = sys.argv[1]
sys.path.insert(0, root + "/benchmarks")
import bench_suite as b
cases = b.make_cases(int(sys.argv[2]))
server = b.Server(0.0)
try:
    r = asyncio.run(b.run_cycle(server.url, cases, 16, Path(tempfile.mkdtemp()) / "p.db"))
finally:
    server.stop()
print(json.dumps({"ms_per_call": r["cpu"] / r["calls"] * 1000}))
"""


def run(root: Path, cases: int) -> float:
    out = subprocess.run([sys.executable, "-c", ONE, str(root), str(cases)], cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True,
                         text=True, check=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["ms_per_call"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", type=Path, help="the baseline checkout")
    parser.add_argument("b", type=Path, help="the checkout measured against it")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", type=int, default=2000)
    args = parser.parse_args()
    a_runs: list[float] = []
    b_runs: list[float] = []
    for i in range(args.rounds):
        first_b = i % 2 == 0  # each goes first in turn
        for which in (("b", "a") if first_b else ("a", "b")):
            (b_runs if which == "b" else a_runs).append(
                run(args.b if which == "b" else args.a, args.cases))
        print(f"round {i + 1}: A {a_runs[-1]:.3f} ms, B {b_runs[-1]:.3f} ms per call "
              f"({(b_runs[-1] / a_runs[-1] - 1) * 100:+.1f}%)", flush=True)
    ma, mb = statistics.median(a_runs), statistics.median(b_runs)
    print(f"median: A {ma:.3f} ms, B {mb:.3f} ms per call: B {(mb / ma - 1) * 100:+.1f}%")


if __name__ == "__main__":
    main()
