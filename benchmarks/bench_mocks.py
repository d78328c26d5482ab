"""CPU per mocked tool call, by mock kind: ``Toolbox.call`` answering one tool 2,000 times
(after 200 calls of warm-up), median of five, in this process. A sync function runs in a
worker thread of cycle's own (cycle.aio.in_thread), an async one on the event loop; the
other kinds are answered inline. CPU is the process's (every thread), so the hop counts.

    .venv/bin/python benchmarks/bench_mocks.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import types

from cycle.agents.tools import Toolbox
from cycle.mocks import MockSpec
from cycle.records.messages import ToolCall, ToolDef

CALLS = 2000


def _sync(arguments, context):
    return {"ok": True}


async def _async(arguments, context):
    return {"ok": True}


def per_call(spec: MockSpec, calls: int = CALLS) -> float:
    """Microseconds of CPU per ``Toolbox.call`` answered by ``spec``."""
    toolbox = Toolbox([ToolDef(name="t")], {"t": spec}, case_id="c")
    call = ToolCall(id="1", name="t", arguments={})

    async def go() -> float:
        for _ in range(200):
            await toolbox.call(call)
        began = time.process_time()
        for _ in range(calls):
            await toolbox.call(call)
        return (time.process_time() - began) / calls * 1e6

    return asyncio.run(go())


def main() -> None:
    module = types.ModuleType("bench_mock_functions")
    module.sync_fn, module.async_fn = _sync, _async  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    kinds = {
        "value": MockSpec(value={"ok": True}),
        "sequence": MockSpec(sequence=[1, 2]),
        "match": MockSpec(match=[{"args": {}, "value": 1}]),
        "function (sync)": MockSpec(function=f"{module.__name__}:sync_fn"),
        "function (async)": MockSpec(function=f"{module.__name__}:async_fn"),
    }
    for name, spec in kinds.items():
        runs = [per_call(spec) for _ in range(5)]
        print(f"{name:>17}: {statistics.median(runs):6.1f} us CPU a call "
              f"(runs {', '.join(f'{r:.1f}' for r in runs)})", flush=True)


if __name__ == "__main__":
    main()
