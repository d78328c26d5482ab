"""`cycle run --eval` against an agent endpoint: wall time against the ideal.

1,000 tool-forge cases at concurrency 16 against an HTTP agent answering in 100 ms (in a
process of its own, so the agent's threads do not share cycle's interpreter). The ideal wall
time is cases / concurrency x 100 ms = 6.25 s; the goal is within 10% of it (issue 13).

    python benchmarks/bench_evalfile.py [--cases 1000] [--concurrency 16] [--delay 0.1]

Prints the run's own wall time (the result file's totalDurationMs: first request to last
answer) and the command's (start-up and the result file included), each against the ideal,
and a bare httpx client making the same calls (what the endpoint and the loopback cost).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BARE = """
import asyncio, sys, time
import httpx2 as httpx  # the client the openai SDK ships with, as cycle's HTTP agent uses

async def main(url, cases, concurrency):
    async with httpx.AsyncClient(timeout=60) as client:
        todo = iter(range(cases))

        async def worker():
            for i in todo:
                (await client.post(url, json={"message": f"city {i}"})).json()

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        print(time.monotonic() - started)

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""

AGENT = """
import sys, time
from cycle.testing.endpoint import AgentEndpoint

def answer(body):
    return {"response": "It is sunny in " + body["message"], "toolCalls": [
        {"name": "get_weather", "success": True, "durationMs": 3, "params": {"city": "x"}}]}

endpoint = AgentEndpoint(answer, delay=float(sys.argv[1])).start()
print(endpoint.url, flush=True)
sys.stdin.read()  # until the benchmark closes it
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--delay", type=float, default=0.1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cases = [{"id": f"gs-{i:05d}", "description": f"case {i}",
                  "input": {"message": f"city {i}"},
                  "expect": {"toolsCalled": ["get_weather"], "noToolErrors": True,
                             "responseContains": [f"city {i}"], "maxLatencyMs": 5000}}
                 for i in range(args.cases)]
        (folder / "evals.golden.json").write_text(json.dumps({"cases": cases}))
        agent = subprocess.Popen([sys.executable, "-c", AGENT, str(args.delay)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert agent.stdout is not None
            url = agent.stdout.readline().strip()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "cycle", "--store", str(folder / "store.db"), "run",
                 "--eval", str(folder / "evals.golden.json"), "--agent-endpoint", url,
                 "--concurrency", str(args.concurrency), "--output-dir", str(folder / "out"),
                 "--json"], capture_output=True, text=True, cwd=folder, check=False)
            wall = time.monotonic() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            bare = float(subprocess.run(
                [sys.executable, "-c", BARE, url, str(args.cases), str(args.concurrency)],
                capture_output=True, text=True, check=True).stdout)
        finally:
            agent.stdin.close()  # type: ignore[union-attr]
            agent.wait(timeout=10)
        if done.returncode != 0:
            print(done.stderr)
            return 1
        result = json.loads(done.stdout)
    ideal = args.cases / args.concurrency * args.delay
    run = result["summary"]["totalDurationMs"] / 1000
    print(f"{args.cases} cases, concurrency {args.concurrency}, agent {args.delay * 1000:.0f} ms: "
          f"ideal {ideal:.2f} s")
    print(f"  run (first request to last answer): {run:.2f} s = {run / ideal:.3f} x ideal")
    print(f"  command (start-up, result file):    {wall:.2f} s = {wall / ideal:.3f} x ideal")
    print(f"  bare httpx, same calls, no cycle:   {bare:.2f} s = {bare / ideal:.3f} x ideal "
          f"(cycle's run {run / bare:.3f} x bare)")
    print(f"  cycle's CPU: {cpu:.2f} s, {cpu / args.cases * 1000:.2f} ms a case (start-up included)")
    print(f"  passed {result['summary']['passed']}/{result['summary']['totalCases']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
