"""Benchmark of the model layer against the loopback server in a separate process.

    python benchmarks/bench_model.py            # about a minute
    python benchmarks/bench_model.py --quick    # a few seconds, smaller counts

1. Overhead at zero latency: calls per second through ``Model`` (retries,
   semaphores, cost, events; no cache) beside the bare ``AsyncOpenAI`` client
   making the same calls; the ratio is what ``Model`` costs in client CPU.
   Also ``Model`` on the gemini provider and ``Model`` with a warm cache.
2. Concurrency at 100 ms latency: 640 calls, 64 at a time, through ``Model``;
   the ideal wall time is 10 rounds x 0.1 s = 1.0 s.

The server runs in its own process, so the client's CPU is measured
without the server's. Each figure is the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cycle.events import EventBus
from cycle.llm.base import ProviderOptions
from cycle.llm.cache import ResponseCache
from cycle.llm.model import Model, ModelServices, RetryPolicy
from cycle.llm.registry import get_api
from cycle.records import Message


@contextmanager
def server_process(latency: float):
    """The loopback server in a child process; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cycle.testing.server", "--port", "0", "--latency", str(latency)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"server did not start: {line!r}")
        yield line.split(" ", 1)[1]
    finally:
        proc.terminate()
        proc.wait(10)


async def run_calls(call: Callable[[int], Awaitable[Any]], count: int, concurrency: int) -> float:
    """Wall seconds for ``count`` calls, ``concurrency`` at a time."""
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            await call(i)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


def make_model(name: str, base_url: str, cache: ResponseCache | None = None) -> Model:
    options = ProviderOptions(base_url=base_url, max_connections=64)
    bus = EventBus()
    bus.subscribe(lambda event: None)  # a subscriber, as the store recorder would be
    return Model(get_api(name, options), ModelServices(bus=bus, cache=cache),
                 retry=RetryPolicy(attempts=3))


async def overhead(base_url: str, count: int, concurrency: int, repeat: int) -> dict[str, float]:
    import openai

    bare = openai.AsyncOpenAI(api_key="x", base_url=f"{base_url}/v1", max_retries=0)
    via_openai = make_model("openai:gpt-4o-mini", f"{base_url}/v1")
    via_gemini = make_model("gemini:gemini-2.5-flash", base_url)
    cache_dir = tempfile.mkdtemp(prefix="cycle-bench-")
    cached = make_model("openai:gpt-4o-mini", f"{base_url}/v1",
                        cache=ResponseCache(Path(cache_dir) / "cache.db"))

    async def bare_call(i: int) -> None:
        await bare.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"hello {i}"}])

    def model_call(model: Model, distinct: bool = True) -> Callable[[int], Awaitable[Any]]:
        async def call(i: int) -> None:
            await model.generate([Message.user(f"hello {i if distinct else 0}")])
        return call

    # warm up connections and imports
    await run_calls(bare_call, 50, concurrency)
    for m in (via_openai, via_gemini, cached):
        await run_calls(model_call(m), 50, concurrency)
    await run_calls(model_call(cached, distinct=False), 1, 1)

    results: dict[str, list[float]] = {k: [] for k in ("bare", "openai", "gemini", "cache")}
    for _ in range(repeat):
        results["bare"].append(count / await run_calls(bare_call, count, concurrency))
        results["openai"].append(count / await run_calls(model_call(via_openai), count,
                                                         concurrency))
        results["gemini"].append(count / await run_calls(model_call(via_gemini), count,
                                                         concurrency))
        results["cache"].append(count / await run_calls(model_call(cached, distinct=False),
                                                        count, concurrency))
    await bare.close()
    for m in (via_openai, via_gemini, cached):
        await m.aclose()
    return {k: statistics.median(v) for k, v in results.items()}


async def latency_bound(base_url: str, count: int, concurrency: int, repeat: int,
                        latency: float) -> tuple[float, float, float]:
    import openai

    bare = openai.AsyncOpenAI(api_key="x", base_url=f"{base_url}/v1", max_retries=0)
    model = make_model("openai:gpt-4o-mini", f"{base_url}/v1")
    await run_calls(lambda i: model.generate([Message.user("warm")], iteration=i), 64, 64)

    async def bare_call(i: int) -> None:
        await bare.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"case {i}"}])

    await run_calls(bare_call, 64, 64)
    times, bare_times = [], []
    for r in range(repeat):
        async def call(i: int, r: int = r) -> None:
            await model.generate([Message.user(f"case {i}")], iteration=r)
        times.append(await run_calls(call, count, concurrency))
        bare_times.append(await run_calls(bare_call, count, concurrency))
    await model.aclose()
    await bare.close()
    ideal = (count / concurrency) * latency
    return statistics.median(times), statistics.median(bare_times), ideal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts (smoke run)")
    parser.add_argument("--repeat", type=int, default=None)
    args = parser.parse_args()
    count = 300 if args.quick else 2000
    repeat = args.repeat or (1 if args.quick else 3)

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; median of {repeat} runs")
    with server_process(0.0) as url:
        rates = asyncio.run(overhead(url, count, 16, repeat))
    print(f"\n## Zero latency, {count} calls, 16 concurrent (calls/s)")
    print(f"bare AsyncOpenAI         {rates['bare']:8.0f}")
    print(f"Model(openai)            {rates['openai']:8.0f}   "
          f"ratio to bare {rates['openai'] / rates['bare']:.2f}")
    print(f"Model(gemini)            {rates['gemini']:8.0f}   "
          f"ratio to bare openai {rates['gemini'] / rates['bare']:.2f}")
    print(f"Model(openai) cache hits {rates['cache']:8.0f}")

    latency, calls, conc = 0.1, 640, 64
    with server_process(latency) as url:
        wall, bare_wall, ideal = asyncio.run(latency_bound(url, calls, conc, repeat, latency))
    print(f"\n## {latency * 1000:.0f} ms latency, {calls} calls, {conc} concurrent")
    print(f"Model(openai)     wall {wall:.2f} s, ideal {ideal:.2f} s, ratio {wall / ideal:.2f}")
    print(f"bare AsyncOpenAI  wall {bare_wall:.2f} s, ideal {ideal:.2f} s, "
          f"ratio {bare_wall / ideal:.2f}")


if __name__ == "__main__":
    main()
