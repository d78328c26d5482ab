"""Benchmark: a 10,000-case `cycle run --batch` through the loopback server's batch
endpoints (the real openai SDK), whole and killed-then-resumed.

Each case is an agent call and an LLM-judge call (bench_scale's project), one iteration,
the response cache off, batch_size 10,000: the agent's calls go in one job, then the
judge's in another. `cycle run` runs in its own process; the loopback server in this one.

(a) a whole run: wall, CPU and peak RSS of the client, jobs submitted, calls paid.
(b) the same run SIGKILLed once its first job is submitted (the job takes --delay s at the
    "provider"), then `cycle run --resume`: jobs submitted in all (2 means the killed job
    was polled again, not resubmitted), calls paid per role (each call once).

    .venv/bin/python benchmarks/bench_batch.py              # 10,000 cases
    .venv/bin/python benchmarks/bench_batch.py --cases 2000 --delay 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import ROOT, project


def batch_project(work: Path, n: int, url: str) -> None:
    project(work, n, url)
    config = work / "cycle.yaml"
    text = config.read_text().replace(
        "run: {iterations: 1, concurrency: 64}",
        "run: {iterations: 1, batch: true, batch_size: 10000}").replace(
        "max_connections: 64}", "max_connections: 64, batch_poll: 0.5, batch_window: 1.0}")
    assert "batch: true" in text and "batch_poll" in text
    config.write_text(text)


def start(work: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "OPENAI_API_KEY": "sk-bench-0123456789", "PYTHONPATH": str(ROOT)}
    env.pop("CYCLE_STORE", None)
    return subprocess.Popen([sys.executable, "-m", "cycle", "--store", str(work / "s.db"), "run",
                             "cycle.yaml", "-q", *extra], cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, t0: float) -> dict:
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"cycle run exited {code}: {(proc.stderr.read() or '')[-2000:]}")
    return {"wall": time.perf_counter() - t0, "cpu": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024}


def paid(work: Path) -> dict[str, int]:
    with sqlite3.connect(work / "s.db") as conn:
        return dict(conn.execute("SELECT role, count(*) FROM calls GROUP BY role").fetchall())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--delay", type=float, default=5.0, help="seconds a job takes")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from cycle.testing import LoopbackServer

    base = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    n = args.cases
    with LoopbackServer(record=False, batch_delay=args.delay) as srv:
        work = base / "whole"
        batch_project(work, n, srv.openai_base_url)
        t0 = time.perf_counter()
        r = finish(start(work), t0)
        calls = paid(work)
        print(f"(a) {n} cases, whole: {sum(calls.values())} calls paid {calls}, "
              f"{srv.batches.created} jobs submitted; wall {r['wall']:.1f} s (jobs "
              f"{args.delay:g} s each), CPU {r['cpu']:.2f} s "
              f"({1000 * r['cpu'] / sum(calls.values()):.3f} ms a call), "
              f"peak RSS {r['rss_mb']:.0f} MB", flush=True)

        srv.batches.reset()
        work = base / "killed"
        batch_project(work, n, srv.openai_base_url)
        t0 = time.perf_counter()
        proc = start(work)
        while True:
            try:
                with sqlite3.connect(work / "s.db", timeout=5) as conn:
                    if conn.execute("SELECT count(*) FROM batch_jobs").fetchone()[0]:
                        break
            except sqlite3.OperationalError:
                pass
            if proc.poll() is not None:
                raise RuntimeError("the run ended before its job was submitted")
            time.sleep(0.05)
        killed_at = time.perf_counter() - t0
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = srv.batches.created
        with sqlite3.connect(work / "s.db") as conn:
            (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
        t1 = time.perf_counter()
        r = finish(start(work, "--resume", run_id), t1)
        calls = paid(work)
        print(f"(b) {n} cases, SIGKILL {killed_at:.1f} s in (the agent's job submitted: "
              f"{before}), resumed: {srv.batches.created} jobs submitted in all, calls paid "
              f"{calls}; the resume's wall {r['wall']:.1f} s, CPU {r['cpu']:.2f} s, "
              f"peak RSS {r['rss_mb']:.0f} MB", flush=True)
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
