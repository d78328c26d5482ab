"""Benchmark: what watching a cycle in the TUI costs its throughput.

The same improvement cycle (the quickstart's prompt and criteria, the offline
model, many generated cases, one round, suggestions approved automatically)
runs headless (``asyncio.run(Loop(...).run())``) and under the TUI (the real
``CycleApp`` at 80x24: the cycle in its child process, its events relayed over
the pipe, the dashboard redrawn from the throttled event bridge, and every frame encoded to terminal escape
sequences as for a real terminal, then dropped). Throughput is case
iterations judged per second of ``Loop.run`` (loading the config is not
timed); the TUI's cost is ``1 - tui / headless``. Target: under 10%.

    .venv/bin/python benchmarks/bench_tui.py                 # 2,000 cases, 5 repeats
    .venv/bin/python benchmarks/bench_tui.py --cases 500 --repeat 1
    .venv/bin/python benchmarks/bench_tui.py --profile ui.prof   # cProfile the UI thread
    .venv/bin/python benchmarks/bench_tui.py --host thread       # the cycle in a thread

Both modes are warmed up on a small suite first; then the runs alternate in
pairs whose order flips (headless+TUI, TUI+headless, ...), each on a fresh
store; figures are medians."""

from __future__ import annotations

import argparse
import asyncio
import gc
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

from textual.drivers.headless_driver import HeadlessDriver

from cycle import events as ev
from cycle import heap
from cycle.assemble import build_loop
from cycle.assemble.config import load_config
from cycle.events import EventBus
from cycle.llm.registry import register_provider
from cycle.loop.review import AutoReviewer, Reviewer
from cycle.store import Store
from cycle.testing.offline import OfflineAPI
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


class LatentOffline(OfflineAPI):
    """The offline model answering after ``LATENCY`` seconds, as a real model would."""

    provider = "latent"
    latency = 0.0

    async def generate(self, messages, tools, config):  # type: ignore[no-untyped-def]
        await asyncio.sleep(self.latency)
        return await super().generate(messages, tools, config)


register_provider("latent", LatentOffline)


def make_world(root: Path, cases: int, latency: float = 0.0) -> Path:
    """A cycle.yaml like the quickstart's, with ``cases`` generated cases and one round;
    with ``latency``, every model call waits that long (a latency-bound cycle)."""
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
    if latency:
        config = config.replace("offline:default", "latent:default")
        config = config.replace("concurrency: 8", "concurrency: 32")
    (root / "cycle.yaml").write_text(config)
    return root / "cycle.yaml"


class Counter:
    """Counts judged case iterations and times the cycle from its first to its last event."""

    def __init__(self) -> None:
        self.cases = 0

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.CaseFinished):
            self.cases += 1


async def run_cycle(config: Path, store_path: Path, bus: EventBus, reviewer: Reviewer) -> tuple[float, float]:
    """Run the cycle; return its run time in seconds (loading excluded) and the
    CPU seconds of the process it ran in meanwhile."""
    with Store.open(store_path) as store:
        loop = build_loop(load_config(config), store=store, bus=bus, reviewer=reviewer)
        started, cpu = time.perf_counter(), time.process_time()
        await loop.run()
        return time.perf_counter() - started, time.process_time() - cpu


def headless(config: Path, store_path: Path) -> tuple[int, float]:
    bus, counter = EventBus(), Counter()
    bus.subscribe(counter)
    # the TUI freezes the objects alive when its cycle starts (its own and every
    # module's: gc.freeze cannot pick) so that full collections skip them; do the
    # same at the same point here, or the comparison would credit the TUI with
    # a speed-up any headless run could have
    gc.freeze()
    try:
        seconds, _ = asyncio.run(run_cycle(config, store_path, bus, AutoReviewer()))
    finally:
        gc.unfreeze()
    return counter.cases, seconds


class TerminalDriver(HeadlessDriver):
    """No terminal, but every frame is encoded to escape sequences as for a real one.

    Textual's headless driver skips turning the compositor's frames into
    terminal output; a user's terminal does not, so neither does the benchmark.
    The bytes are counted (and dropped) to show that frames were drawn.
    """

    written = 0

    @property
    def is_headless(self) -> bool:
        return False

    def write(self, data: str) -> None:
        TerminalDriver.written += len(data)


def under_tui(config: Path, store_path: Path, profile: Path | None = None,
              host: str = "process") -> tuple[int, float, float, float]:
    """Returns (cases, cycle seconds, wall seconds including the app's start and exit,
    the app's own CPU seconds: its UI thread and the relay, besides the cycle's)."""
    bus, counter = EventBus(), Counter()
    bus.subscribe(counter)

    async def cycle(cycle_bus: EventBus, _tui_reviewer: Reviewer) -> tuple[float, float]:
        # approve automatically: the benchmark measures watching, not a person's review
        return await run_cycle(config, store_path, cycle_bus, AutoReviewer())

    info = HeaderInfo(prompt_id="support-reply", models={"agent": "offline:default"}, offline=True)
    app = CycleApp(cycle=cycle, store_path=store_path, info=info, bus=bus, host=host)
    app.driver_class = TerminalDriver

    async def auto_pilot(pilot: Any) -> None:
        # poll with a bare, slow sleep: Pilot.pause would walk every widget and
        # force a screen update at each call, a cost no user's session has
        while app.outcome is None:
            await asyncio.sleep(0.25)
        await asyncio.sleep(0.25)  # the last frame
        app.exit(app.outcome)

    profiler = None
    if profile is not None:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()  # this (the UI) thread only
    TerminalDriver.written = 0
    started, app_cpu = time.perf_counter(), time.process_time()
    app.run(size=(80, 24), auto_pilot=auto_pilot)
    wall = time.perf_counter() - started
    app_cpu = time.process_time() - app_cpu
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    if app.outcome is None or app.outcome.status != "finished":
        raise SystemExit(f"the cycle under the TUI did not finish: {app.outcome}")
    if TerminalDriver.written == 0:
        raise SystemExit("the TUI drew nothing: the benchmark would not measure drawing")
    seconds, cycle_cpu = app.outcome.result
    if host == "thread":  # one process: the app's CPU cannot be told from the cycle's
        app_cpu = float("nan")
    print(f"          the app's CPU {app_cpu:.2f} s ({app_cpu / wall:.0%} of its wall time; "
          f"the cycle's {cycle_cpu:.2f} s); {TerminalDriver.written / 1e3:.0f} kB of terminal output",
          flush=True)
    return counter.cases, seconds, wall, app_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.0,
                        help="seconds every model call waits (0: the CPU-bound worst case)")
    parser.add_argument("--profile", type=Path, metavar="FILE",
                        help="cProfile the UI thread of the TUI runs into FILE (pstats)")
    parser.add_argument("--host", choices=["process", "thread"], default="process",
                        help="where the TUI runs the cycle (cycle.tui.process)")
    args = parser.parse_args()

    # the collector as `cycle improve` sets it, once loaded, for either mode
    heap.own()
    heap.settle()
    rates: dict[str, list[float]] = {"headless": [], "tui": []}
    app_shares: list[float] = []
    counts: set[int] = set()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # warm up both modes on a small suite (imports, first-use caches), unmeasured
        (root / "warm").mkdir()
        LatentOffline.latency = args.latency
        warm = make_world(root / "warm", min(200, args.cases), args.latency)
        headless(warm, root / "warm" / "headless.db")
        under_tui(warm, root / "warm" / "tui.db", host=args.host)
        (root / "run").mkdir()
        config = make_world(root / "run", args.cases, args.latency)
        for i in range(args.repeat):
            # alternate which mode goes first: neither always runs on a warmer machine
            for mode in ("headless", "tui") if i % 2 == 0 else ("tui", "headless"):
                db = root / "run" / f"{mode}-{i}.db"
                if mode == "headless":
                    n, seconds = headless(config, db)
                    print(f"headless: {n} case iterations in {seconds:.2f} s ({n / seconds:.0f}/s)", flush=True)
                else:
                    n, seconds, wall, app_cpu = under_tui(config, db, args.profile, args.host)
                    app_shares.append(app_cpu / wall)
                    print(f"tui:      {n} case iterations in {seconds:.2f} s ({n / seconds:.0f}/s; "
                          f"app wall {wall:.2f} s)", flush=True)
                rates[mode].append(n / seconds)
                counts.add(n)
    head = statistics.median(rates["headless"])
    tui = statistics.median(rates["tui"])
    cost = 1 - tui / head
    print()
    print(f"cases per cycle: {sorted(counts)}  (baseline + candidate runs)")
    print(f"| mode | case iterations/s (median of {args.repeat}) |")
    print("| --- | ---: |")
    print(f"| headless | {head:.0f} |")
    print(f"| TUI (80x24, every frame encoded for a terminal) | {tui:.0f} |")
    print(f"the app's own CPU (UI thread and relay, cycle host: {args.host}): median "
          f"{statistics.median(app_shares):.1%} of its wall time")
    print(f"TUI / headless = {tui / head:.3f}; the TUI costs {cost:.1%} of throughput "
          f"({'within' if cost < 0.10 else 'OVER'} the 10% target)")
    # other processes only ever slow a run down: the best runs are the least disturbed
    best_head, best_tui = max(rates["headless"]), max(rates["tui"])
    print(f"best runs: headless {best_head:.0f}/s, TUI {best_tui:.0f}/s, "
          f"TUI / headless = {best_tui / best_head:.3f} (cost {1 - best_tui / best_head:.1%})")


if __name__ == "__main__":
    main()
