"""Benchmark: `cycle run` at 1,000 to 100,000 cases, CPU per model call and peak memory.

Each size is a fresh project: one case file of N cases, an agent call and an LLM-judge
call per case (two LLM criteria and a check), the response cache off, one iteration,
concurrency 64, reports written (Markdown, JSON, JUnit, HTML). `cycle run` runs in its
own process (the CLI as a user runs it) against the loopback server in another one
answering at once (L=0), so the figures are the client's: CPU (user + system) and peak
RSS from the child's rusage.

    .venv/bin/python benchmarks/bench_scale.py                      # 1,000 10,000 100,000
    .venv/bin/python benchmarks/bench_scale.py --sizes 1000 20000

CPU per call is given whole and net of start-up (a one-case run's CPU, taken first:
at 1,000 cases start-up alone is about a third of the process's CPU).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROMPT = ("id: bench\nsystem: You are a support agent. Answer the customer's question in two "
          "sentences.\nuser_template: 'Customer: {{ customer }} Order: {{ order }} "
          "Question: {{ question }}'\n")
CONFIG = """prompt: prompts/p.yaml
agent: openai:bench-agent
judge: openai:bench-judge
criteria:
  - {{id: accuracy}}
  - {{id: tone, rubric: Polite and warm.}}
  - {{id: short, check: {{type: max_tokens, tokens: 500}}}}
cases: [cases/*.yaml]
run: {{iterations: 1, concurrency: 64}}
cache: {{enabled: false}}
providers: {{openai: {{base_url: '{url}', max_connections: 64}}}}
"""


def project(work: Path, n: int, url: str) -> None:
    (work / "prompts").mkdir(parents=True)
    (work / "cases").mkdir()
    (work / "prompts" / "p.yaml").write_text(PROMPT)
    (work / "cycle.yaml").write_text(CONFIG.format(url=url))
    with open(work / "cases" / "c.yaml", "w") as f:
        f.writelines(f"- id: case-{i:06d}\n  input: {{customer: Customer{i}, order: A-{1000 + i}, "
                    f"question: 'Where is parcel number {i}? It was due last week.'}}\n" for i in range(n))


def run(work: Path, extra: list[str]) -> dict:
    env = {**os.environ, "OPENAI_API_KEY": "sk-bench-0123456789", "PYTHONPATH": str(ROOT)}
    env.pop("CYCLE_STORE", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "cycle", "--store", str(work / "s.db"), "run",
                             "cycle.yaml", "-q", *extra], cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read() if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"cycle run exited {code}: {err[-2000:]}")
    with sqlite3.connect(work / "s.db") as conn:
        calls, errors = conn.execute(
            "SELECT count(*), sum(error IS NOT NULL) FROM calls").fetchone()
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024, "calls": calls, "errors": errors or 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--keep", action="store_true", help="keep the projects")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from cycle.testing import LoopbackServer

    base = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    print(f"{'cases':>8} {'calls':>8} {'wall s':>8} {'CPU s':>8} {'ms/call':>8} "
          f"{'net ms/call':>11} {'peak RSS MB':>11}")
    with LoopbackServer(record=False) as srv:
        one = base / "start"
        project(one, 1, srv.openai_base_url)
        start = run(one, [])
        print(f"{1:>8} {start['calls']:>8} {start['wall']:>8.2f} {start['cpu']:>8.2f} "
              f"{'':>8} {'':>11} {start['rss_mb']:>11.0f}   (start-up)")
        for n in args.sizes:
            work = base / str(n)
            project(work, n, srv.openai_base_url)
            r = run(work, [])
            per = 1000 * r["cpu"] / r["calls"]
            net = 1000 * (r["cpu"] - start["cpu"]) / r["calls"]
            print(f"{n:>8} {r['calls']:>8} {r['wall']:>8.2f} {r['cpu']:>8.2f} {per:>8.3f} "
                  f"{net:>11.3f} {r['rss_mb']:>11.0f}" + (f"  {r['errors']} errors"
                                                           if r["errors"] else ""), flush=True)
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(base)


if __name__ == "__main__":
    main()
