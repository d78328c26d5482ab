"""Issue 16's figures: a kill at random moments re-pays only the calls in flight, and a
budget at concurrency 64 is never passed. Both through the real CLI in subprocesses.

kill:   examples/conversation (agent turns, simulated-user turns, judge and improver
        calls; 2 rounds and a confirmation), the response cache off, on the offline model
        made slow (10 ms a call) and counting the calls it answers (every answer is a paid
        call). One uncut cycle, then N cycles each SIGKILLed after a random share of the
        uncut cycle's calls and resumed: calls re-paid (cut - uncut, at most the
        concurrency, 2), the store's integrity, and the prompt versions and head against
        the uncut cycle's.
budget: `cycle run --budget CAP -c 64` on 200 cases through the real openai SDK against
        the loopback server (50 ms a call), the cap about half the suite's cost: spend
        (the run's recorded calls, checked to be every request the server answered)
        against the cap.
hostile: the same on 200 cases in Japanese against a server that bills one token a
        character (cycle.testing.billing) and tells cycle its usage (told), nothing
        (omitted), as text (strings), or answers 8x past max_tokens
        (ignores_max_tokens): what the *server billed* against the cap, per mode.

    .venv/bin/python benchmarks/bench_durability.py [--kills 20] [--budgets 200]
        [--hostile 200] [--only kill|budget|hostile]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

COUNTING = '''
import asyncio, os, sys
from cycle.testing.offline import OfflineAPI
from cycle.llm.registry import register_provider

class CountedOffline(OfflineAPI):
    async def generate(self, messages, tools, config):
        await asyncio.sleep(0.01)
        out = await super().generate(messages, tools, config)
        with open(os.environ["CALL_LOG"], "a") as f:
            f.write("call\\n")
        return out

register_provider("counted", CountedOffline)
from cycle.cli import main
sys.argv = ["cycle", *sys.argv[1:]]
main()
'''
CONCURRENCY = 2


def conversation_project(path: Path) -> Path:
    example = ROOT / "examples" / "conversation"
    for name in ("cases", "prompts"):
        shutil.copytree(example / name, path / name)
    config = yaml.safe_load((example / "cycle.yaml").read_text())
    config.update(agent="counted:default", judge="counted:default", improver="counted:default")
    config["run"] = {"iterations": 2, "concurrency": CONCURRENCY, "timeout": 60}
    config["cache"] = {"enabled": False}
    config["improve"]["stop"] = {"max_rounds": 2}
    cases = yaml.safe_load((path / "cases" / "returns.yaml").read_text())
    for case in cases:
        case["conversation"]["user"]["model"] = "counted:default"
    (path / "cases" / "returns.yaml").write_text(yaml.safe_dump(cases))
    (path / "cycle.yaml").write_text(yaml.safe_dump(config))
    (path / "run_cycle.py").write_text(COUNTING)
    return path


def start(project: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CALL_LOG": str(project / "calls.log")}
    env.pop("CYCLE_STORE", None)
    return subprocess.Popen([sys.executable, str(project / "run_cycle.py"), "improve",
                             "cycle.yaml", "--headless", "--yes", "-q", *args],
                            cwd=project, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def calls(project: Path) -> int:
    log = project / "calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def versions(project: Path) -> tuple[list[tuple[str, str]], str]:
    with sqlite3.connect(project / ".cycle" / "cycle.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT version, hash FROM versions WHERE prompt_id = "
                            "'returns-assistant' ORDER BY version").fetchall()
        (head,) = conn.execute("SELECT version FROM labels WHERE prompt_id = 'returns-assistant' "
                               "AND name = 'head'").fetchone()
    return rows, head


def bench_kill(n: int, seed: int) -> None:
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="bench-kill-"))
    whole = conversation_project(work / "whole")
    proc = start(whole)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    uncut, reference = calls(whole), versions(whole)
    print(f"uncut cycle: {uncut} paid calls; versions {[v for v, _ in reference[0]]}, "
          f"head {reference[1]}")
    print("| kill | after calls | re-paid | in flight max | integrity | versions as uncut |")
    print("| --- | --- | --- | --- | --- | --- |")
    worst = 0
    for k in range(n):
        cut = conversation_project(work / f"cut{k}")
        at = rng.randint(1, uncut - 1)
        proc = start(cut)
        while calls(cut) < at and proc.poll() is None:
            time.sleep(0.001)
        ended = proc.poll() is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        killed_at = calls(cut)
        resumed = start(cut, "--resume")
        _, err = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, err
        repaid = calls(cut) - uncut
        worst = max(worst, repaid)
        same = versions(cut) == reference
        print(f"| {k + 1} | {killed_at}{' (ended)' if ended else ''} | {repaid} | "
              f"{CONCURRENCY} | ok | {'yes' if same else 'NO'} |")
    print(f"\nworst re-paid: {worst} (in flight at most {CONCURRENCY})")
    shutil.rmtree(work, ignore_errors=True)


def budget_project(prefix: str, system: str, max_tokens: int, question: str) -> Path:
    """A folder with a prompt (``system``, ``max_tokens``) and 200 cases asking
    ``question`` (``{i}``: the case's number)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    (work / "prompts").mkdir()
    (work / "cases").mkdir()
    (work / "prompts" / "p.yaml").write_text(
        f"id: p\nsystem: {system}\nuser_template: '{{{{ question }}}}'\n"
        f"params: {{model: openai:gpt-4o-mini, max_tokens: {max_tokens}}}\n")
    (work / "cases" / "c.yaml").write_text("".join(
        f"- id: c{i}\n  input: {{question: '{question.format(i=i)}'}}\n" for i in range(200)))
    return work


def bench_budget(n: int, seed: int) -> None:
    from cycle.testing import LoopbackServer

    rng = random.Random(seed)
    work = budget_project("bench-budget-", "Answer briefly.", 200,
                          "Question number {i}: where is my parcel?")
    over = 0
    unrecorded = 0
    spends = []
    with LoopbackServer(latency=0.05) as srv:
        (work / "cycle.yaml").write_text(
            "prompt: prompts/p.yaml\nagent: openai:gpt-4o-mini\n"
            "criteria: [{id: any, check: {type: regex, pattern: '.'}}]\ncases: [cases/*.yaml]\n"
            f"run: {{iterations: 1}}\ncache: {{enabled: false}}\n"
            f"providers: {{openai: {{base_url: '{srv.openai_base_url}'}}}}\n")
        env = {**os.environ, "OPENAI_API_KEY": "sk-bench-0123456789", "PYTHONPATH": str(ROOT)}
        env.pop("CYCLE_STORE", None)
        full = None
        for k in range(n):
            store = work / f"s{k}.db"
            before = len(srv.requests)
            cap = None if full is None else round(full * rng.uniform(0.2, 0.8), 6)
            args = [sys.executable, "-m", "cycle", "--store", str(store), "run", "cycle.yaml",
                    "-c", "64", "-q", "--no-reports"] + (["--budget", str(cap)] if cap else [])
            subprocess.run(args, cwd=work, env=env, timeout=300, check=False)
            answered = len(srv.requests) - before
            with sqlite3.connect(store) as conn:
                recorded, spent = conn.execute(
                    "SELECT count(*), coalesce(sum(cost), 0) FROM calls WHERE error IS NULL "
                    "AND cache_hit = 0").fetchone()
            # every request the provider answered is a recorded call: the store's sum is
            # what the provider would bill
            unrecorded += answered - recorded
            if full is None:
                full = spent
                print(f"the whole suite: {answered} calls, ${spent:.6f}")
                continue
            spends.append(spent / cap)
            over += spent > cap + 1e-12
    spends.sort()
    print(f"budget runs: {len(spends)}; spend over the cap: {over}; paid calls missing from "
          f"the cost totals: {unrecorded}")
    print(f"spend / cap: min {spends[0]:.3f}, median {spends[len(spends) // 2]:.3f}, "
          f"max {spends[-1]:.3f}")
    shutil.rmtree(work, ignore_errors=True)


def bench_hostile(n: int, seed: int) -> None:
    from cycle.llm.pricing import PriceTable
    from cycle.testing import LoopbackServer
    from cycle.testing.billing import MODES, Billing

    rng = random.Random(seed)
    work = budget_project("bench-hostile-", "簡潔に答えてください。", 64,
                          "注文番号{i}の返金はいつ届きますか。配送状況を教えてください。")
    pricing = PriceTable()
    env = {**os.environ, "OPENAI_API_KEY": "sk-bench-0123456789", "PYTHONPATH": str(ROOT)}
    env.pop("CYCLE_STORE", None)
    print(f"{'mode':20} {'runs':>5} {'over':>5} {'median billed/cap':>18} {'max':>7}")
    for mode in MODES:
        bill = Billing(mode)
        ratios = []
        # a model streams a token (here a character) a millisecond
        with LoopbackServer(latency=0.02, stream_chars=1, stream_delay=0.001) as srv:
            srv.responder = bill
            (work / "cycle.yaml").write_text(
                "prompt: prompts/p.yaml\nagent: openai:gpt-4o-mini\n"
                "criteria: [{id: any, check: {type: regex, pattern: '.'}}]\n"
                "cases: [cases/*.yaml]\nrun: {iterations: 1}\ncache: {enabled: false}\n"
                f"providers: {{openai: {{base_url: '{srv.openai_base_url}', "
                "max_connections: 64}}\n")
            full = None
            for k in range(n + 1):
                store = work / f"{mode}-{k}.db"
                before = len(bill.tokens)
                cap = None if full is None else round(full * rng.uniform(0.2, 0.8), 6)
                args = [sys.executable, "-m", "cycle", "--store", str(store), "run",
                        "cycle.yaml", "-c", "64", "-q", "--no-reports"]
                subprocess.run(args + (["--budget", str(cap)] if cap else []), cwd=work,
                               env=env, timeout=300, check=False, capture_output=True)
                billed = bill.billed(pricing, "openai:gpt-4o-mini", since=before)
                if full is None:
                    full = billed
                    continue
                ratios.append(billed / cap)
                store.unlink(missing_ok=True)
        ratios.sort()
        over = sum(r > 1 + 1e-9 for r in ratios)
        print(f"{mode:20} {len(ratios):>5} {over:>5} {ratios[len(ratios) // 2]:>18.3f} "
              f"{ratios[-1]:>7.3f}")
    shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--budgets", type=int, default=200)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--hostile", type=int, default=200)
    parser.add_argument("--only", choices=["kill", "budget", "hostile"])
    a = parser.parse_args()
    if a.only in (None, "kill"):
        bench_kill(a.kills, a.seed)
    if a.only in (None, "budget"):
        bench_budget(a.budgets + 1, a.seed)
    if a.only in (None, "hostile"):
        bench_hostile(a.hostile, a.seed)


if __name__ == "__main__":
    main()
