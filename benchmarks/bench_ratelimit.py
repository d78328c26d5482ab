"""Benchmark: calls against a provider that answers 429, with and without adaptive concurrency.

    .venv/bin/python benchmarks/bench_ratelimit.py   # --calls 2000 --storm-calls 300 -c 32

The loopback server in its own process, 50 ms a call, in two moods:

- ``storm``: every 3rd request is answered 429, whatever the load (issue 17's storm);
- ``quota``: at most 200 requests a second are answered, the rest 429 (a provider's rate
  limit, which a client can stay under).

Each: ``--calls`` calls (``--storm-calls`` in the storm, where every call waits out backoffs)
through cycle's ``Model`` on the real openai SDK, ``max_connections``
= ``--concurrency``, cycle's default retry policy (exponential backoff from 1 s with
jitter). "fixed" is the same with the limit held at the ceiling (the cut disabled).
Reported: wall time, calls answered per second, 429s met, calls that failed after the
policy's 5 attempts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cycle import events as ev
from cycle.llm.base import ProviderOptions
from cycle.llm.limit import AdaptiveLimit
from cycle.llm.model import Model, ModelServices
from cycle.llm.registry import get_api
from cycle.records import Message


def server(*flags: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "cycle.testing.server", "--latency", "0.05",
                             *flags], stdout=subprocess.PIPE, text=True, cwd=str(ROOT),
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip().split(" ", 1)[1] + "/v1"


async def fire(url: str, calls: int, concurrency: int) -> dict:
    bus = ev.EventBus()
    limits: list[int] = []
    attempts = [0]

    def seen(e: ev.Event) -> None:
        if isinstance(e, ev.ConcurrencyChanged):
            limits.append(e.limit)
        elif isinstance(e, ev.ModelCalled):
            attempts[0] += e.attempts  # every attempt but the answered one met a 429

    bus.subscribe(seen)
    options = ProviderOptions(base_url=url, api_key="bench", max_connections=concurrency)
    model = Model(get_api("openai:bench", options), ModelServices(bus=bus))
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(model.generate([Message.user(f"call {i}")])
                                      for i in range(calls)), return_exceptions=True)
    wall = time.perf_counter() - started
    await model.aclose()
    failed = sum(isinstance(o, BaseException) for o in outcomes)
    return {"wall": wall, "per_s": (calls - failed) / wall, "failed": failed,
            "rate_limited": attempts[0] - (calls - failed),
            "lowest_limit": min(limits, default=concurrency)}


def measure(flags: list[str], calls: int, concurrency: int, adaptive: bool) -> dict:
    """``calls`` calls against a server started with ``flags``; without ``adaptive`` the
    limit is never cut (it stays at the ceiling)."""
    proc, url = server(*flags)
    original = AdaptiveLimit.throttle
    if not adaptive:
        AdaptiveLimit.throttle = lambda self, sent: False  # type: ignore[method-assign]
    try:
        return asyncio.run(fire(url, calls, concurrency))
    finally:
        AdaptiveLimit.throttle = original  # type: ignore[method-assign]
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--storm-calls", type=int, default=300)
    parser.add_argument("-c", "--concurrency", type=int, default=32)
    args = parser.parse_args()
    results = {}
    for mood, flags in (("storm", ["--every", "3"]), ("quota", ["--rate-limit", "200"])):
        for adaptive in (True, False):
            calls = args.storm_calls if mood == "storm" else args.calls
            r = measure(flags, calls, args.concurrency, adaptive)
            name = f"{mood} {'adaptive' if adaptive else 'fixed'}"
            results[name] = r
            print(f"{name:15s} {r['wall']:6.2f} s  {r['per_s']:6.1f} answered/s  "
                  f"{r['rate_limited']:5d} x 429  {r['failed']} failed after 5 attempts  "
                  f"lowest limit {r['lowest_limit']}", flush=True)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
