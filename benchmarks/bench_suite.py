"""Benchmark: a 2,000-case suite through the real openai SDK against the loopback server.

Each case makes one agent call and one judge call (structured output), and
its result, verdicts and calls are written to a real SQLite store. The
server runs in its own process (``python -m cycle.testing.server``), so the
figures measure the client.

    .venv/bin/python benchmarks/bench_suite.py            # all three scenarios
    .venv/bin/python benchmarks/bench_suite.py --cases 500 --only b

(a) 100 ms latency, concurrency 16: wall time against the ideal
    cases x 2 calls x 0.1 s / 16.
(b) zero latency: CPU time per model call for cycle (judging and store
    writes included) beside the bare SDK making the same calls (AsyncOpenAI
    with a semaphore, nothing else): through ``chat.completions.create``, and
    through ``client.post`` as cycle's provider calls the SDK.
(c) 100 ms latency, concurrency 64: wall time, and whether client CPU bounds it.
(d) zero latency, concurrency 16: CPU per model call of a case whose agent makes 3
    tool calls (mocked) before it answers, beside the plain case of (b): 5 calls a
    case against 2, and the loop, the mocks and the trace on top. Each beside its
    floor: the bare SDK's post path, plain, and a tool loop written by hand.
(e) 100 ms latency, concurrency 16: 200 conversations of 5 user turns (4 scripted
    follow-ups) against the ideal wall time set by each conversation's critical path
    (5 agent calls and 1 judge call, one after another): cases / concurrency x 6 x latency.

Every scenario runs cycle and the bare SDK ``--repeat`` times, in rotation, each
run against a fresh server process; figures are medians. CPU is
``time.process_time()`` of the client process only, over the timed part.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cycle import heap
from cycle.agents import PromptAgent
from cycle.cases import ConversationSpec, TestCase
from cycle.evals.runner import Runner
from cycle.events import EventBus
from cycle.judge import Judge
from cycle.judge.criteria import CriterionConfig
from cycle.judge.llm_judge import LlmJudge, verdict_schema
from cycle.llm.base import ProviderOptions
from cycle.llm.model import ModelServices
from cycle.llm.registry import get_model
from cycle.mocks import MockSpec
from cycle.prompts.template import render_user
from cycle.records import Prompt, ToolDef
from cycle.store import Store

DEFAULT_GC = gc.get_threshold()

PROMPT = Prompt(
    id="bench",
    system="You are a support agent. Answer the customer's question in two sentences.",
    user_template="Customer: {{ customer }}\nOrder: {{ order }}\nQuestion: {{ question }}",
)
CRITERIA = [
    CriterionConfig(id="accuracy"),
    CriterionConfig(id="tone", rubric="Polite and warm."),
    CriterionConfig(id="short", check={"type": "max_tokens", "tokens": 500}),
]


def make_cases(n: int) -> list[TestCase]:
    return [
        TestCase(id=f"case-{i:05d}", input={
            "customer": f"Customer{i}", "order": f"A-{1000 + i}",
            "question": f"Where is parcel number {i}? It was due last week."})
        for i in range(n)
    ]


TOOL_PROMPT = PROMPT.model_copy(update={"tools": (ToolDef(
    name="lookup_order", description="Find an order by its number.",
    parameters={"type": "object", "properties": {}}),)})
TOOL_MOCKS = {"lookup_order": MockSpec(value={"status": "shipped", "eta": "2 days"})}


class Server:
    """The loopback server in its own process."""

    def __init__(self, latency: float, tool_calls: int = 0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cycle.testing.server", "--latency", str(latency),
             "--tool-calls", str(tool_calls)],
            stdout=subprocess.PIPE, text=True, cwd=str(ROOT),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"server did not start: {line!r}")
        self.url = line.split(" ", 1)[1] + "/v1"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


async def run_cycle(url: str, cases: list[TestCase], concurrency: int, store_path: Path,
                    tools: bool = False) -> dict:
    options = ProviderOptions(base_url=url, max_connections=max(64, concurrency * 2))
    bus = EventBus()
    store = Store.open(store_path)
    # the call journal as the CLI has it: every paid call kept the moment it arrives
    journal = None if os.environ.get("BENCH_NO_JOURNAL") else store.journal
    services = ModelServices(bus=bus, journal=journal)
    agent_model = get_model("openai:bench-agent", services, options=options, role="agent")
    judge_model = get_model("openai:bench-judge", services, options=options, role="judge")
    agent = (PromptAgent(TOOL_PROMPT, agent_model, mocks=TOOL_MOCKS) if tools
             else PromptAgent(PROMPT, agent_model))
    runner = Runner(agent=agent,
                    judge=Judge(CRITERIA, model=judge_model, threshold=70), cases=cases,
                    iterations=1, concurrency=concurrency, timeout=120, store=store, bus=bus)
    # warm up the connections and imports outside the measurement
    await Runner(agent=runner.agent, judge=runner.judge, cases=cases[:concurrency],
                 concurrency=concurrency).run()
    # as `cycle run` does once loaded (it owns its process); undone after the
    # run, so that the bare SDK's runs keep CPython's defaults
    heap.own()
    heap.settle()
    try:
        cpu0, t0 = time.process_time(), time.perf_counter()
        result = await runner.run()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        gc.unfreeze()
        gc.set_threshold(*DEFAULT_GC)
    calls = store.db.execute("select count(*) from calls where run_id = ?",
                             (result.run_id,)).fetchone()[0]
    await agent_model.aclose()
    await judge_model.aclose()
    # the results are read from the store: before it is closed
    errors = [r.error for r in result.iter_results() if r.error][:3]
    done = sum(len(result.results_of(c)) for c in result.cases)
    store.close()
    assert result.suite.errors == 0, errors
    return {"wall": wall, "cpu": cpu, "calls": calls, "results": done}


async def run_bare(url: str, cases: list[TestCase], concurrency: int, post: bool = False,
                   tools: bool = False) -> dict:
    """The same calls through AsyncOpenAI with a semaphore: the floor cycle is held to.

    Same requests as cycle sends (the agent's system + user messages; the judge's
    messages, ``temperature: 0`` and the strict ``cycle_judge`` response_format,
    judging the answer the server gives the agent), same client settings (timeout
    60 s, no SDK retries), one client, the same warm-up. ``chat.completions.create``,
    or with ``post`` the SDK's ``client.post("/chat/completions", cast_to=object)``
    as cycle's provider calls it: the SDK's cheapest path, nothing of cycle's.
    With ``tools`` the agent's call is a tool loop written by hand: the tool declared,
    each tool call answered with the mock's value as JSON, until the model answers
    (the floor for scenario (d)).
    """
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0,
                                timeout=ProviderOptions().timeout)
    sem = asyncio.Semaphore(concurrency)
    judge = LlmJudge(None)
    schema = verdict_schema(["accuracy", "tone"])
    crit = [c for c in Judge(CRITERIA, model=object()).criteria if c.kind == "llm"]
    # messages are built before timing: the bare run measures the SDK alone
    plans = []
    for case in cases:
        user = render_user(PROMPT, case.variables)
        answer = f"echo: {user}"  # what the server answers the agent
        jm = judge.messages(crit, input=case.input, output=answer, expected=None)
        plans.append((user, [{"role": m.role, "content": m.content} for m in jm]))

    async def create(**body: Any) -> Any:
        if post:
            return await client.post("/chat/completions", cast_to=object, body=body)
        return await client.chat.completions.create(**body)

    declared = [{"type": "function", "function": {
        "name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in TOOL_PROMPT.tools]
    mocked = json.dumps(TOOL_MOCKS["lookup_order"].value)
    calls = 0

    async def one(user: str, judge_messages: list[dict]) -> None:
        nonlocal calls
        async with sem:
            messages: list[dict] = [{"role": "system", "content": PROMPT.system},
                                    {"role": "user", "content": user}]
            while True:
                calls += 1
                if not tools:
                    await create(model="bench-agent", messages=messages)
                    break
                reply = await create(model="bench-agent", messages=messages, tools=declared)
                message = (reply if post else reply.model_dump())["choices"][0]["message"]
                if not message.get("tool_calls"):
                    break
                messages.append({"role": "assistant", "content": message.get("content"),
                                 "tool_calls": message["tool_calls"]})
                messages.extend({"role": "tool", "tool_call_id": c["id"], "content": mocked}
                                for c in message["tool_calls"])
            calls += 1
            await create(
                model="bench-judge", messages=judge_messages, temperature=0,
                response_format={"type": "json_schema", "json_schema": {
                    "name": "cycle_judge", "schema": schema, "strict": True}})

    await asyncio.gather(*(one(*p) for p in plans[:concurrency]))  # warm-up
    calls = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(*p) for p in plans))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await client.close()
    return {"wall": wall, "cpu": cpu, "calls": calls}


def scenario(latency: float, fn, *args, tool_calls: int = 0) -> dict:
    server = Server(latency, tool_calls)
    try:
        return asyncio.run(fn(server.url, *args))
    finally:
        server.stop()


def alternated(latency: float, cases: list[TestCase], concurrency: int, repeat: int,
               tmp: Path, tag: str) -> tuple[list[dict], list[dict], list[dict]]:
    """``repeat`` runs of cycle, of the bare SDK's ``create`` and of its ``post``, the
    order rotating (the machine is shared, and a run just after another one
    measures slower: each goes first in turn)."""
    runs: dict[str, list[dict]] = {"cycle": [], "bare": [], "post": []}
    order = ["cycle", "bare", "post"]
    for i in range(repeat):
        for which in order[i % 3:] + order[:i % 3]:
            if which == "cycle":
                runs[which].append(scenario(latency, run_cycle, cases, concurrency, tmp / f"{tag}{i}.db"))
            else:
                runs[which].append(scenario(latency, run_bare, cases, concurrency, which == "post"))
    return runs["cycle"], runs["bare"], runs["post"]


def med(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--only", choices=["a", "b", "c", "d", "e"], action="append")
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=3, help="alternated runs of each scenario")
    args = parser.parse_args()
    only = set(args.only or ["a", "b", "c", "d", "e"])
    cases = make_cases(args.cases)
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        for name, concurrency in (("a", 16), ("c", 64)):
            if name not in only:
                continue
            cs, bs, ps = alternated(args.latency, cases, concurrency, args.repeat, tmp, name)
            ideal = len(cases) * 2 * args.latency / concurrency
            wall, bare_wall, post_wall = med(cs, "wall"), med(bs, "wall"), med(ps, "wall")
            cpu = med(cs, "cpu")
            walls = [r["wall"] for r in cs]
            out[name] = {"concurrency": concurrency, "ideal": ideal, "wall": wall,
                         "over_ideal": wall / ideal - 1, "cpu": cpu, "cpu_share": cpu / wall,
                         "bare_wall": bare_wall, "bare_over_ideal": bare_wall / ideal - 1,
                         "bare_cpu": med(bs, "cpu"), "post_wall": post_wall,
                         "runs": cs, "bare_runs": bs, "post_runs": ps}
            print(f"({name}) concurrency {concurrency}, {args.latency * 1000:.0f} ms, median of "
                  f"{args.repeat}: cycle wall {wall:.2f} s ({(wall / ideal - 1) * 100:+.1f}% over the "
                  f"ideal {ideal:.2f} s; runs {', '.join(f'{w:.2f}' for w in walls)}), client CPU "
                  f"{cpu:.2f} s = {cpu / wall * 100:.0f}% of wall; bare SDK create {bare_wall:.2f} s "
                  f"({(bare_wall / ideal - 1) * 100:+.1f}%), bare SDK post {post_wall:.2f} s "
                  f"({(post_wall / ideal - 1) * 100:+.1f}%)", flush=True)
        if "b" in only:
            cs, bs, ps = alternated(0.0, cases, 16, args.repeat, tmp, "b")
            per_c = [r["cpu"] / r["calls"] * 1000 for r in cs]
            per_b = [r["cpu"] / r["calls"] * 1000 for r in bs]
            per_p = [r["cpu"] / r["calls"] * 1000 for r in ps]
            mc, mb, mp = statistics.median(per_c), statistics.median(per_b), statistics.median(per_p)
            pairs = [c / b - 1 for c, b in zip(per_c, per_b)]
            post_pairs = [c / p - 1 for c, p in zip(per_c, per_p)]
            out["b"] = {"cycle_ms_per_call": mc, "bare_ms_per_call": mb, "overhead": mc / mb - 1,
                        "post_ms_per_call": mp, "overhead_over_post": mc / mp - 1,
                        "pair_overheads": pairs, "post_pair_overheads": post_pairs,
                        "all_cycle_ms": per_c, "all_bare_ms": per_b, "all_post_ms": per_p,
                        "calls": cs[0]["calls"]}
            print(f"(b) zero latency, median of {args.repeat}: cycle {mc:.3f} ms CPU/call "
                  f"({cs[0]['calls']} calls), bare SDK create {mb:.3f} ms CPU/call: overhead "
                  f"{(mc / mb - 1) * 100:+.1f}% (runs side by side: "
                  f"{', '.join(f'{p * 100:+.0f}%' for p in pairs)}); bare SDK post {mp:.3f} ms/call: "
                  f"cycle's own overhead on the same SDK path {(mc / mp - 1) * 100:+.1f}% "
                  f"({', '.join(f'{p * 100:+.0f}%' for p in post_pairs)})", flush=True)
        if "d" in only:
            # cycle and the bare SDK's post path, each with a plain case and with a
            # 3-tool-call case, in rotation: the question is whether cycle's overhead
            # over the floor grows when the case uses tools
            kinds = ["plain", "tools", "bare plain", "bare tools"]
            per: dict[str, list[float]] = {k: [] for k in kinds}
            for i in range(args.repeat):
                for which in kinds[i % 4:] + kinds[:i % 4]:
                    tools = which.endswith("tools")
                    if which.startswith("bare"):
                        r = scenario(0.0, run_bare, cases, 16, True, tools,
                                     tool_calls=3 if tools else 0)
                    else:
                        r = scenario(0.0, run_cycle, cases, 16, tmp / f"d{which}{i}.db", tools,
                                     tool_calls=3 if tools else 0)
                    assert r["calls"] == (5 if tools else 2) * len(cases), (which, r)
                    per[which].append(r["cpu"] / r["calls"] * 1000)
            m = {k: statistics.median(v) for k, v in per.items()}
            plain_over = [c / b - 1 for c, b in zip(per["plain"], per["bare plain"])]
            tools_over = [c / b - 1 for c, b in zip(per["tools"], per["bare tools"])]
            out["d"] = {"ms_per_call": m, "runs_ms": per, "ratio": m["tools"] / m["plain"],
                        "plain_overhead": m["plain"] / m["bare plain"] - 1,
                        "tools_overhead": m["tools"] / m["bare tools"] - 1,
                        "plain_pair_overheads": plain_over, "tools_pair_overheads": tools_over}
            print(f"(d) zero latency, median of {args.repeat}, ms CPU per model call: cycle "
                  f"plain {m['plain']:.3f}, cycle 3 tool calls {m['tools']:.3f} (ratio "
                  f"{m['tools'] / m['plain']:.2f}); bare SDK post plain {m['bare plain']:.3f}, "
                  f"bare tool loop {m['bare tools']:.3f}. cycle over the floor: plain "
                  f"{(m['plain'] / m['bare plain'] - 1) * 100:+.1f}% "
                  f"({', '.join(f'{p * 100:+.0f}%' for p in plain_over)}), tools "
                  f"{(m['tools'] / m['bare tools'] - 1) * 100:+.1f}% "
                  f"({', '.join(f'{p * 100:+.0f}%' for p in tools_over)})", flush=True)
        if "e" in only:
            conversations = [c.model_copy(update={"conversation": ConversationSpec(
                follow_ups=[{"say": "And then?", "turns": 4}])}) for c in make_cases(200)]
            walls = []
            for i in range(args.repeat):
                r = scenario(args.latency, run_cycle, conversations, 16, tmp / f"e{i}.db")
                assert r["calls"] == 6 * len(conversations), r
                walls.append(r["wall"])
            ideal = len(conversations) / 16 * 6 * args.latency
            wall = statistics.median(walls)
            out["e"] = {"ideal": ideal, "wall": wall, "over_ideal": wall / ideal - 1,
                        "walls": walls}
            print(f"(e) 200 conversations of 5 turns, concurrency 16, {args.latency * 1000:.0f} ms, "
                  f"median of {args.repeat}: {wall:.2f} s, {(wall / ideal - 1) * 100:+.1f}% over "
                  f"the ideal {ideal:.2f} s (runs {', '.join(f'{w:.2f}' for w in walls)})",
                  flush=True)
    print(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
