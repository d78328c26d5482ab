"""Benchmark: what watching a cycle in the TUI costs its throughput.

The same improvement cycle (the quickstart's prompt and criteria, the offline
model, many generated cases, one round, suggestions approved automatically)
runs headless (``asyncio.run(Loop(...).run())``) and under the TUI (the real
``CycleApp`` in headless mode at 80x24: the cycle in its worker thread, the
dashboard redrawn from the throttled event bridge). Throughput is case
iterations judged per second of the cycle's own run time; the TUI's cost is
``1 - tui / headless``. Target: under 10%.

    .venv/bin/python benchmarks/bench_tui.py                 # 2,000 cases, 3 repeats
    .venv/bin/python benchmarks/bench_tui.py --cases 500 --repeat 1

Runs alternate (headless, TUI, headless, ...), each on a fresh store; figures
are medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cycle import events as ev
from cycle.config import load_config
from cycle.events import EventBus
from cycle.improve.suggestion import Reviewer
from cycle.loop import Loop
from cycle.loop.review import AutoReviewer
from cycle.store import Store
from cycle.tui.app import CycleApp
from cycle.tui.widgets.header import HeaderInfo

QUICKSTART = ROOT / "examples" / "quickstart"
NAMES = ("Ann", "Ben", "Cleo", "Dana", "Eli", "Fay", "Gus", "Hana")
QUESTIONS = (
    "Where is my parcel? It was due last week.",
    "I sent the shoes back. When do I get my refund?",
    "I am locked out of my account. Can you help?",
    "The item arrived broken. What now?",
)


def make_world(root: Path, cases: int) -> Path:
    """A cycle.yaml like the quickstart's, with ``cases`` generated cases and one round."""
    shutil.copytree(QUICKSTART / "prompts", root / "prompts")
    config = (QUICKSTART / "cycle.yaml").read_text()
    (root / "cases").mkdir()
    generated = [
        {"id": f"case-{i:05d}", "input": {
            "customer": NAMES[i % len(NAMES)], "order": f"X-{1000 + i}",
            "question": QUESTIONS[i % len(QUESTIONS)]}}
        for i in range(cases)
    ]
    (root / "cases" / "generated.yaml").write_text(json.dumps(generated))
    config = config.replace("iterations: 3", "iterations: 1")
    config = config.replace(
        "stop: {any: [{target_score: 95}, {max_rounds: 5}, {no_improvement: 2}, {max_cost: 0.50}]}",
        "stop: {max_rounds: 1}",
    )
    assert "max_rounds: 1}" in config, "the quickstart's cycle.yaml changed: update this benchmark"
    (root / "cycle.yaml").write_text(config)
    return root / "cycle.yaml"


class Counter:
    """Counts judged case iterations and times the cycle from its first to its last event."""

    def __init__(self) -> None:
        self.cases = 0

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.CaseFinished):
            self.cases += 1


async def run_cycle(config: Path, store_path: Path, bus: EventBus, reviewer: Reviewer) -> float:
    """Run the cycle; return its run time in seconds."""
    with Store.open(store_path) as store:
        loop = Loop(load_config(config), store=store, bus=bus, reviewer=reviewer)
        started = time.perf_counter()
        await loop.run()
        return time.perf_counter() - started


def headless(config: Path, store_path: Path) -> tuple[int, float]:
    bus, counter = EventBus(), Counter()
    bus.subscribe(counter)
    seconds = asyncio.run(run_cycle(config, store_path, bus, AutoReviewer()))
    return counter.cases, seconds


def under_tui(config: Path, store_path: Path) -> tuple[int, float, float]:
    """Returns (cases, cycle seconds, wall seconds including the app's start and exit)."""
    bus, counter = EventBus(), Counter()
    bus.subscribe(counter)
    timing: dict[str, float] = {}

    async def cycle(cycle_bus: EventBus, _tui_reviewer: Reviewer) -> Any:
        # approve automatically: the benchmark measures watching, not a person's review
        timing["cycle"] = await run_cycle(config, store_path, cycle_bus, AutoReviewer())

    info = HeaderInfo(prompt_id="support-reply", models={"agent": "offline:default"}, offline=True)
    app = CycleApp(cycle=cycle, store_path=store_path, info=info, bus=bus)

    async def auto_pilot(pilot: Any) -> None:
        while app.outcome is None:
            await pilot.pause(0.05)
        await pilot.pause(0.15)  # one last frame
        app.exit(app.outcome)

    started, ui_cpu = time.perf_counter(), time.thread_time()
    app.run(headless=True, size=(80, 24), auto_pilot=auto_pilot)
    wall = time.perf_counter() - started
    timing["ui_cpu"] = time.thread_time() - ui_cpu
    if app.outcome is None or app.outcome.status != "finished":
        raise SystemExit(f"the cycle under the TUI did not finish: {app.outcome}")
    print(f"          UI thread CPU {timing['ui_cpu']:.2f} s", flush=True)
    return counter.cases, timing["cycle"], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    rates: dict[str, list[float]] = {"headless": [], "tui": []}
    walls: list[float] = []
    counts: set[int] = set()
    with tempfile.TemporaryDirectory() as tmp:
        config = make_world(Path(tmp), args.cases)
        for i in range(args.repeat):
            n, seconds = headless(config, Path(tmp) / f"headless-{i}.db")
            rates["headless"].append(n / seconds)
            counts.add(n)
            print(f"headless: {n} case iterations in {seconds:.2f} s ({n / seconds:.0f}/s)", flush=True)
            n, seconds, wall = under_tui(config, Path(tmp) / f"tui-{i}.db")
            rates["tui"].append(n / seconds)
            walls.append(wall)
            counts.add(n)
            print(f"tui:      {n} case iterations in {seconds:.2f} s ({n / seconds:.0f}/s; "
                  f"app wall {wall:.2f} s)", flush=True)
    head = statistics.median(rates["headless"])
    tui = statistics.median(rates["tui"])
    cost = 1 - tui / head
    print()
    print(f"cases per cycle: {sorted(counts)}  (baseline + candidate runs)")
    print(f"| mode | case iterations/s (median of {args.repeat}) |")
    print("| --- | ---: |")
    print(f"| headless | {head:.0f} |")
    print(f"| TUI (headless app, 80x24) | {tui:.0f} |")
    print(f"TUI / headless = {tui / head:.3f}; the TUI costs {cost:.1%} of throughput "
          f"({'within' if cost < 0.10 else 'OVER'} the 10% target)")


if __name__ == "__main__":
    main()
