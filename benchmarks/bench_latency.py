"""Benchmark (issue 40): a latency-bound `cycle run` against the bare SDK's floor.

Workload: N cases, each one agent call then one LLM-judge call (one custom rubric
criterion, a strict ``json_schema`` answer), on the loopback server (its own process)
answering every request after L ms. cycle: ``cycle run -n 1 -c C --no-cache -q`` in its own
process, ``providers.openai.max_connections: C``, every report written. The floor: one
``AsyncOpenAI`` client in its own process, C cases in flight, the same two
``chat.completions.create`` calls a case (the judge's with the same strict schema), no
store, no report. The two alternate, each pair in turn order.

``--structured json_schema`` tells cycle the judge's form, as the floor assumes it. With
``auto`` (the default, the issue's workload) cycle knows nothing of the server: the judge's
first call learns whether it takes ``json_schema`` while the other cases' judge calls wait
for it, one round trip (docs/local-models.md).

Per run: the wall (the process, start-up included), its CPU (rusage), and from the
server's timeline (each request's arrival and answer): the time before the first request
(start-up), the serving span (first arrival to last answer), the time after the last
answer (results, reports, exit), and the mean calls in flight over the span. The summary
gives the CPU per call of each pair's two runs as a ratio too: run next to each other,
they share the machine's speed of the moment, which moves the floor's own CPU by up to 20%
from one set to the next (their median is the CPU figure least moved by it).

cycle's modules are compiled to bytecode first, as ``pip install`` does for the SDK's (as
bench_startup.py does): a checkout run with PYTHONDONTWRITEBYTECODE set would otherwise
compile every cycle module from source on each start, a cost no installed cycle pays.

    .venv/bin/python benchmarks/bench_latency.py                       # the three workloads
    .venv/bin/python benchmarks/bench_latency.py --only 2000/16/100 --pairs 3
    .venv/bin/python benchmarks/bench_latency.py --only 500/64/100 --structured json_schema
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("2000/16/100", "500/64/100", "500/16/250")

PROMPT = ("id: bench\nsystem: You are a support agent. Answer the customer's question in two "
          "sentences.\nuser_template: 'Customer: {{ customer }} Question: {{ question }}'\n")
CONFIG = """prompt: prompts/p.yaml
agent: openai:bench-agent
judge: openai:bench-judge
criteria:
  - {{id: helpful, rubric: Solves the customer's problem.}}
cases: [cases/*.yaml]
run: {{iterations: 1, concurrency: {c}, timeout: 600}}
cache: {{enabled: false}}
providers: {{openai: {{base_url: '{url}', max_connections: {c}, structured: {structured}}}}}
"""

FLOOR = r'''
import asyncio, json, sys, time
import openai
n, c, url = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
SCHEMA = {"type": "object", "properties": {"helpful": {"type": "object", "properties": {
    "reasoning": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["reasoning", "score"], "additionalProperties": False}},
    "required": ["helpful"], "additionalProperties": False}
async def main():
    client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0, timeout=60)
    sem = asyncio.Semaphore(c)
    async def one(i):
        async with sem:
            a = await client.chat.completions.create(model="bench-agent", messages=[
                {"role": "system", "content": "You are a support agent."},
                {"role": "user", "content": f"Customer: C{i} Question: where is parcel {i}?"}])
            await client.chat.completions.create(model="bench-judge", temperature=0, messages=[
                {"role": "system", "content": "You judge answers."},
                {"role": "user", "content": "Judge: " + (a.choices[0].message.content or "")}],
                response_format={"type": "json_schema", "json_schema": {
                    "name": "cycle_judge", "schema": SCHEMA, "strict": True}})
    await asyncio.gather(*(one(i) for i in range(n)))
    await client.close()
asyncio.run(main())
'''


def server(latency: float, timeline: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "cycle.testing.server", "--latency",
                             str(latency), "--timeline", str(timeline)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("LISTENING "):
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, line.split(" ", 1)[1] + "/v1"


def timed(cmd: list[str], cwd: Path) -> tuple[float, float, float, float]:
    env = {**os.environ, "OPENAI_API_KEY": "sk-bench-0123456789", "PYTHONPATH": str(ROOT)}
    env.pop("CYCLE_STORE", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    t1 = time.perf_counter()
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise RuntimeError(f"{cmd[:4]} failed: {proc.stderr.read()[-2000:] if proc.stderr else ''}")
    return t1 - t0, usage.ru_utime + usage.ru_stime, t0, t1


def one(kind: str, n: int, c: int, latency: float, work: Path, structured: str = "auto"
        ) -> dict:
    timeline = work / f"{kind}-timeline.json"
    proc, url = server(latency, timeline)
    try:
        if kind == "cycle":
            project = work / "project"
            if not project.exists():
                (project / "prompts").mkdir(parents=True)
                (project / "cases").mkdir()
                (project / "prompts" / "p.yaml").write_text(PROMPT)
                (project / "cases" / "c.yaml").write_text("".join(
                    f"- id: c{i:05d}\n  input: {{customer: C{i}, question: 'where is parcel {i}?'}}\n"
                    for i in range(n)))
            (project / "cycle.yaml").write_text(CONFIG.format(c=c, url=url, structured=structured))
            (project / "s.db").unlink(missing_ok=True)
            wall, cpu, t0, t1 = timed([sys.executable, "-m", "cycle", "--store", str(project / "s.db"),
                               "run", "cycle.yaml", "-n", "1", "-c", str(c), "--no-cache", "-q"],
                              project)
        else:
            wall, cpu, t0, t1 = timed([sys.executable, "-c", FLOOR, str(n), str(c), url], work)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    spans = json.loads(timeline.read_text())
    first, last = min(a for a, _ in spans), max(b for _, b in spans)
    busy = sum(b - a for a, b in spans)
    # the server's clock is the loop's (CLOCK_MONOTONIC), as perf_counter's is here
    return {"wall": wall, "cpu": cpu, "calls": len(spans), "span": last - first,
            "in_flight": busy / (last - first), "before": first - t0, "after": t1 - last}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", default=list(WORKLOADS), metavar="N/C/L")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument(
        "--structured", choices=("auto", "json_schema"), default="auto",
        help="cycle.yaml's providers.openai.structured: auto (the default: the judge's first "
        "call learns the server's form while the others wait) or json_schema (the form the "
        "floor assumes, given)")
    args = parser.parse_args()
    compileall.compile_dir(ROOT / "cycle", quiet=1)
    print(f"{'N/C/L ms':>12} {'run':>6} {'wall s':>7} {'before':>7} {'span s':>7} {'after':>6} "
          f"{'ideal':>6} {'in flight':>9} {'CPU s':>6}")
    for spec in args.only:
        n, c, ms = (int(x) for x in spec.split("/"))
        ideal = n * 2 * ms / 1000 / c
        got: dict[str, list[dict]] = {"cycle": [], "floor": []}
        with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp:
            for i in range(args.pairs):
                for kind in (("cycle", "floor") if i % 2 == 0 else ("floor", "cycle")):
                    r = one(kind, n, c, ms / 1000, Path(tmp), args.structured)
                    got[kind].append(r)
                    print(f"{spec:>12} {kind:>6} {r['wall']:>7.2f} {r['before']:>7.2f} "
                          f"{r['span']:>7.2f} {r['after']:>6.2f} {ideal:>6.1f} "
                          f"{r['in_flight']:>9.1f} {r['cpu']:>6.2f}", flush=True)
        med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in got.items()}
        cy, fl = med["cycle"], med["floor"]
        # each pair's two runs are next to each other in time: the machine's speed, which
        # moves the floor's own CPU by up to 20% between sets, moves both alike
        paired = sorted((c["cpu"] / c["calls"]) / (f["cpu"] / f["calls"])
                        for c, f in zip(got["cycle"], got["floor"], strict=True))
        print(f"{spec:>12} median: wall cycle {cy['wall']:.2f} s / floor {fl['wall']:.2f} s "
              f"= {cy['wall'] / fl['wall']:.3f}x; span {cy['span']:.2f} / {fl['span']:.2f} = "
              f"{cy['span'] / fl['span']:.3f}x; CPU per call {cy['cpu'] / cy['calls'] * 1000:.2f} / "
              f"{fl['cpu'] / fl['calls'] * 1000:.2f} ms = "
              f"{(cy['cpu'] / cy['calls']) / (fl['cpu'] / fl['calls']):.2f}x; pairs' CPU ratios "
              f"{', '.join(f'{x:.3f}' for x in paired)} (median {statistics.median(paired):.3f})",
              flush=True)


if __name__ == "__main__":
    main()
