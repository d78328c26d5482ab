"""Benchmark: start-up. The CPU a command spends before it does its work, in a fresh process.

    .venv/bin/python benchmarks/bench_startup.py             # --repeat 21 [--instructions]

(a) ``cycle --help`` and ``cycle history ID``, beside ``python -c pass``.
(c) ``import google.adk`` with the agent, runner and session classes cycle uses (what an
    ``agent: {adk: ...}`` config or ``cycle simulate --adk`` adds; no other command imports it).
(b) ``cycle run`` of one case, one iteration (one agent call and one judge call through the
    real openai SDK to the loopback server in its own process), beside the bare SDK
    (``import openai``, one AsyncOpenAI client, the same two calls): issue 17 asks for
    cycle's run to be within 0.1 s of CPU of the bare SDK's.

CPU is user + system of the child process (``resource.getrusage(RUSAGE_CHILDREN)``);
figures are medians of ``--repeat`` runs, alternated; the run's gap over the bare SDK is
the median of the differences of neighbouring runs.

cycle's modules are compiled to bytecode first, as ``pip install`` does for the SDK's: a
checkout run with PYTHONDONTWRITEBYTECODE set (this machine's default) would otherwise
compile every cycle module from source on each start, about 0.1 s the SDK never pays.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
CYCLE = [PYTHON, "-m", "cycle"]

BARE = """
import asyncio, sys, openai
async def main():
    client = openai.AsyncOpenAI(base_url=sys.argv[1], api_key="bench", max_retries=0)
    await client.chat.completions.create(model="bench-agent", messages=[
        {"role": "system", "content": "You answer."}, {"role": "user", "content": "Hello"}])
    await client.chat.completions.create(model="bench-judge", temperature=0, messages=[
        {"role": "user", "content": "Judge: Hello"}], response_format={"type": "json_schema",
        "json_schema": {"name": "cycle_judge", "strict": True, "schema": {"type": "object",
        "properties": {"score": {"type": "integer"}}, "required": ["score"],
        "additionalProperties": False}}})
    await client.close()
asyncio.run(main())
"""


def cpu(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, check=False, cwd=cwd, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{cmd} failed ({done.returncode}): {done.stderr[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def instructions(cmd: list[str], cwd: Path, env: dict[str, str]) -> int:
    """The instructions ``cmd`` executes, by valgrind's callgrind (string hashing seeded, so
    that two tries count the same to a few parts in a million)."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
                          check=False, cwd=cwd, env={**env, "PYTHONHASHSEED": "0"},
                          capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode not in (0, 1) or found is None:
        raise RuntimeError(f"callgrind failed ({done.returncode}): {done.stderr[-500:]}")
    return int(found.group(1))


def project(folder: Path, url: str) -> None:
    (folder / "prompt.yaml").write_text(json.dumps(
        {"id": "bench", "system": "You answer.", "user_template": "{{ input }}"}))
    (folder / "cases.yaml").write_text(json.dumps([{"id": "c1", "input": "Hello"}]))
    (folder / "cycle.yaml").write_text(json.dumps({
        "prompt": "prompt.yaml", "agent": "openai:bench-agent", "judge": "openai:bench-judge",
        "providers": {"openai": {"base_url": url}},
        "criteria": [{"id": "quality", "rubric": "Answers."}],
        "cases": ["cases.yaml"], "run": {"iterations": 1},
    }))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--instructions", action="store_true",
                        help="also count the instructions of the run and of the bare SDK under "
                        "valgrind's callgrind: the same on every try (about 2 minutes)")
    args = parser.parse_args()
    compileall.compile_dir(ROOT / "cycle", quiet=1)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "bench"}
    server = subprocess.Popen([PYTHON, "-m", "cycle.testing.server"], stdout=subprocess.PIPE,
                              text=True, cwd=ROOT, env=env)
    assert server.stdout is not None
    url = server.stdout.readline().strip().split(" ", 1)[1] + "/v1"
    runs: dict[str, list[float]] = {k: [] for k in
                                    ("python", "help", "history", "run", "bare SDK",
                                     "google-adk")}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            project(folder, url)
            subprocess.run([*CYCLE, "prompt", "import", "prompt.yaml"], cwd=folder, env=env,
                           check=True, capture_output=True)
            commands = {
                "python": [PYTHON, "-c", "pass"],
                "help": [*CYCLE, "--help"],
                "history": [*CYCLE, "history", "bench"],
                "run": [*CYCLE, "run", "--no-cache", "-q"],
                "bare SDK": [PYTHON, "-c", BARE, url],
                "google-adk": [PYTHON, "-c", ("from google.adk.agents import Agent; "
                               "from google.adk.runners import Runner; "
                               "from google.adk.sessions import InMemorySessionService")],
            }
            if args.instructions:
                counted = {name: instructions(commands[name], folder, env)
                           for name in ("run", "bare SDK")}
            for i in range(args.repeat):
                # the run and the bare SDK go back to back, first one then the other: this
                # machine's CPU figures drift by 0.1-0.2 s between minutes, far less between
                # neighbours, so their difference is taken pair by pair
                names = ["python", "help", "history", "google-adk"]
                names = names[i % 4:] + names[:i % 4]
                names.insert(i % 5, ("run", "bare SDK") if i % 2 else ("bare SDK", "run"))
                for name in names:
                    for one in (name if isinstance(name, tuple) else (name,)):
                        runs[one].append(cpu(commands[one], folder, env))
    finally:
        server.terminate()
        server.wait(timeout=10)
    m = {k: statistics.median(v) for k, v in runs.items()}
    gaps = sorted(r - b for r, b in zip(runs["run"], runs["bare SDK"], strict=True))
    quartiles = statistics.quantiles(gaps, n=4)
    print(f"median CPU of {args.repeat}, s: python -c pass {m['python']:.3f}; cycle --help "
          f"{m['help']:.3f}; cycle history {m['history']:.3f}; cycle run (1 case, 2 calls) "
          f"{m['run']:.3f}; bare SDK (import openai, the same 2 calls) {m['bare SDK']:.3f}; "
          f"cycle run over the bare SDK, pair by pair: median {statistics.median(gaps):+.3f} s "
          f"(quartiles {quartiles[0]:+.3f} to {quartiles[2]:+.3f}); importing google-adk "
          f"{m['google-adk'] - m['python']:.3f} s over python -c pass")
    if args.instructions:
        extra = counted["run"] / counted["bare SDK"] - 1
        print(f"instructions (callgrind): cycle run {counted['run'] / 1e9:.3f} G, bare SDK "
              f"{counted['bare SDK'] / 1e9:.3f} G: {extra:+.1%}")
    print(json.dumps({"median": m, "gaps": gaps, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
