"""Run every benchmark in turn (`make bench`); each prints its own figures.

    python benchmarks/run.py              # all of them (several minutes)
    python benchmarks/run.py store model  # only those named

Record what they print in benchmarks/RESULTS.md with the machine and date.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
#: every bench_*.py here, by the name after bench_ (a new script joins on its own)
BENCHMARKS = tuple(sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py")))


def main(argv: list[str]) -> int:
    names = argv or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    failed = []
    for name in names:
        script = HERE / f"bench_{name}.py"
        print(f"== {script.name}", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, str(script)])
        print(f"== {script.name}: exit {code} in {time.monotonic() - started:.0f} s\n", flush=True)
        if code:
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
