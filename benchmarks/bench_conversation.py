"""Benchmark: what one conversation driver costs each agent kind (issue 31).

Per agent kind, two suites through the Runner, checks only (no judge model):

- plain: N one-turn cases, no tools;
- 3 turns: N cases of 3 user turns (2 scripted follow-ups), no tools: the driver alone;
- conversation: the same, each turn 2 mocked tool calls (one a step) before the answer.

The figure is client CPU (``time.process_time()``) per agent call: a model call of the
prompt and ADK agents (the scripted provider, in process: no SDK, so cycle's own cost
shows), a call of the Python function (sync, its tools called from its worker thread; and
async, its tools awaited), a POST to the HTTP endpoint (served by a
subprocess, whose CPU is not counted). The conversation's CPU per call over the plain
one's is the driver's, mocks' and trace's cost per call. A Python function makes its
tool calls inside one call, where the other kinds make a model call or a POST for each:
its rows "per step" count a function call or a tool call as one step, the unit the other
kinds are measured in. The rows ``http-bare`` and ``adk-bare`` are the same suites without
cycle (the same POST bodies with the same client; the same agent on ADK alone): what a
POST or an ADK model call itself costs more as the conversation's history grows, against
which cycle's HTTP and ADK ratios are read. Figures are medians of
``--repeat`` runs, the kinds in rotation.

    .venv/bin/python benchmarks/bench_conversation.py            # 1,000 cases (ADK 200)
    .venv/bin/python benchmarks/bench_conversation.py --cases 200 --repeat 1
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cycle.agents import PromptAgent
from cycle.agents.agent import CallableAgent, HttpAgent
from cycle.cases import ConversationSpec, TestCase
from cycle.evals.runner import Runner
from cycle.judge import Judge
from cycle.judge.criteria import CriterionConfig
from cycle.llm.base import ModelOutput
from cycle.llm.registry import get_model
from cycle.mocks import MockSpec
from cycle.records import Prompt, ToolCall, ToolDef
from cycle.testing import script
from cycle.testing.endpoint import AgentEndpoint

TOOLS = (ToolDef(name="lookup", parameters={"type": "object", "properties": {"q": {"type": "string"}}}),
         ToolDef(name="history", parameters={"type": "object", "properties": {"q": {"type": "string"}}}))
PROMPT = Prompt(id="bench", system="You help.", user_template="{{ q }}", tools=TOOLS)
MOCKS = {"lookup": MockSpec(value={"status": "shipped"}),
         "history": MockSpec(value={"orders": 3})}
CRITERIA = [CriterionConfig(id="said", check={"type": "contains", "values": ["done"]})]


def cases(n: int, turns: bool) -> list[TestCase]:
    spec = ConversationSpec(follow_ups=["and then?", "thanks"]) if turns else None
    return [TestCase(id=f"c{i:05d}", input={"q": f"question {i}"}, conversation=spec)
            for i in range(n)]


def step(roles: list[str], tools: bool) -> tuple[str, dict[str, Any]] | str:
    """The agent's next move: after the user's last message, lookup, history, answer.
    It reads only the messages' roles: the fake model's own CPU counts as the client's."""
    last = max(i for i, role in enumerate(roles) if role == "user")
    done = sum(1 for role in roles[last + 1:] if role == "tool")
    if not tools or done >= 2:
        return "done"
    return ("lookup", {"q": "x"}) if done == 0 else ("history", {"q": "x"})


def model_answer(tools: bool):
    def answer(messages, _tools, _config) -> ModelOutput | str:
        move = step([m.role for m in messages], tools)
        if isinstance(move, str):
            return move
        n = sum(1 for m in messages if m.role == "tool")
        return ModelOutput(tool_calls=(ToolCall(id=f"t{n}", name=move[0], arguments=move[1]),))
    return answer


def python_agent(inp, tools, messages):
    if tools.names:  # the conversation suite's agent: two tool calls a turn
        tools.call("lookup", q="x")
        tools.call("history", q="x")
    return "done"


async def async_python_agent(inp, tools, messages):
    if tools.names:  # no thread hop: the tools are awaited on the event loop
        await tools.acall("lookup", q="x")
        await tools.acall("history", q="x")
    return "done"


def endpoint_answer(body: dict[str, Any]) -> dict[str, Any]:
    """The HTTP agent (protocol: tools): the tool calls it asks for, then its answer."""
    move = step([m["role"] for m in body["messages"]], bool(body.get("tools")))
    if isinstance(move, str):
        return {"response": move}
    n = sum(1 for m in body["messages"] if m["role"] == "tool")
    return {"tool_calls": [{"id": f"h{n}", "name": move[0], "arguments": move[1]}]}


def serve() -> None:
    """The endpoint in a process of its own (its CPU is not the client's)."""
    import threading

    with AgentEndpoint(endpoint_answer, path="/agent") as endpoint:
        print(endpoint.port, flush=True)
        threading.Event().wait()


def make_agent(kind: str, tools: bool, url: str) -> tuple[Any, str]:
    """The agent, and what one of its calls is."""
    prompt = PROMPT if tools else Prompt(id="bench", system="You help.", user_template="{{ q }}")
    mocks = MOCKS if tools else {}
    if kind in ("prompt", "adk"):
        script("bench", model_answer(tools), repeat=True)
        if kind == "prompt":
            return PromptAgent(prompt, get_model("scripted:bench"), mocks=mocks), "model call"
        from cycle.agents.adk import AdkAgent

        return AdkAgent("benchmarks.bench_conversation:adk_agent" if tools else
                        "benchmarks.bench_conversation:plain_adk_agent", prompt,
                        get_model("scripted:bench"), mocks=mocks), "model call"
    if kind in ("python", "python-async"):
        agent = python_agent if kind == "python" else async_python_agent
        return CallableAgent(agent, tools=prompt.tools, mocks=mocks), "function call"
    return HttpAgent(url, prompt=prompt, protocol="tools", mocks=mocks), "POST"


def lookup(q: str) -> dict:
    """Look something up (the ADK agent's tool; mocked)."""
    return {}


def history(q: str) -> dict:
    """Order history (the ADK agent's tool; mocked)."""
    return {}


def __getattr__(name: str) -> Any:  # the ADK agents, built on first use (ADK imports slowly)
    from google.adk.agents import Agent

    if name == "adk_agent":
        return Agent(name="bench", model="gemini-2.0-flash", tools=[lookup, history])
    if name == "plain_adk_agent":
        return Agent(name="bench", model="gemini-2.0-flash")
    raise AttributeError(name)


async def bare_adk(n: int, turns: bool, tools: bool) -> tuple[float, float]:
    """The same suite on ADK alone: ADK's Runner, a fake model answering in process the
    moves cycle's scripted model makes, the tools real functions; no cycle. What ADK
    itself costs per model call as a conversation and its tool calls grow the history
    (with cycle's telemetry setting, so that only cycle's own work differs)."""
    from google.adk.agents import Agent
    from google.adk.agents.run_config import RunConfig
    from google.adk.models import BaseLlm, LlmResponse
    from google.adk.runners import Runner as AdkRunner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    from cycle.agents.adk import _telemetry

    class Fake(BaseLlm):
        async def generate_content_async(self, llm_request: Any, stream: bool = False):
            roles = []
            for content in llm_request.contents:
                responses = [p for p in content.parts or () if p.function_response]
                roles += (["tool"] * len(responses) if responses else
                          ["assistant" if content.role == "model" else "user"])
            move = step(roles, tools)
            part = types.Part(text=move) if isinstance(move, str) else types.Part(
                function_call=types.FunctionCall(id=f"a{len(roles)}", name=move[0], args=move[1]))
            yield LlmResponse(content=types.Content(role="model", parts=[part]))

    agent = Agent(name="bench", model=Fake(model="fake"),
                  tools=[lookup, history] if tools else [])
    sessions = InMemorySessionService()
    runner = AdkRunner(agent=agent, app_name="bench", session_service=sessions)
    config = RunConfig(telemetry=_telemetry())
    said = ["question", "and then?", "thanks"] if turns else ["question"]
    gate = asyncio.Semaphore(16)
    calls = 0

    async def one(i: int) -> None:
        nonlocal calls
        async with gate:
            session = await sessions.create_session(app_name="bench", user_id="u")
            for text in said:
                async for event in runner.run_async(
                        user_id="u", session_id=session.id, run_config=config,
                        new_message=types.Content(role="user", parts=[types.Part(text=text)])):
                    calls += event.author == "bench" and not event.get_function_responses()

    gc.collect()
    started = time.process_time()
    await asyncio.gather(*(one(i) for i in range(n)))
    took = time.process_time() - started
    return took / calls, took / calls


async def bare_http(n: int, turns: bool, tools: bool, url: str) -> tuple[float, float]:
    """The same suite as bare POSTs: the client cycle's HTTP agent uses, the bodies it
    sends (the conversation so far, each turn's tool calls and results in it, the tools
    declared), no cycle. What a POST itself costs as the history grows."""
    import json

    import httpx2 as httpx

    declared = [{"type": "function", "function": {"name": t.name, "description": "",
                                                  "parameters": t.parameters}}
                for t in TOOLS] if tools else []
    said = ["question", "and then?", "thanks"] if turns else ["question"]
    gate = asyncio.Semaphore(16)
    calls = 0

    async with httpx.AsyncClient() as client:
        async def one(i: int) -> None:
            nonlocal calls
            async with gate:
                messages: list[dict[str, Any]] = []
                for text in said:
                    messages.append({"role": "user", "content": text})
                    while True:
                        body = {"message": text, "input": {"q": f"question {i}"},
                                "messages": messages, **({"tools": declared} if tools else {})}
                        answer = (await client.post(url, json=body)).json()
                        calls += 1
                        if "response" in answer:
                            messages.append({"role": "assistant", "content": answer["response"]})
                            break
                        asked = answer["tool_calls"]
                        messages.append({"role": "assistant", "content": "", "tool_calls": [
                            {"id": c["id"], "type": "function", "function": {
                                "name": c["name"], "arguments": json.dumps(c["arguments"])}}
                            for c in asked]})
                        messages += [{"role": "tool", "tool_call_id": c["id"],
                                      "content": json.dumps(MOCKS[c["name"]].value)}
                                     for c in asked]

        gc.collect()
        started = time.process_time()
        await asyncio.gather(*(one(i) for i in range(n)))
        took = time.process_time() - started
    return took / calls, took / calls


def calls_of(result: Any, kind: str) -> tuple[int, int]:
    """The agent calls a run made (model turns in the traces; a function's: its turns), and
    its steps: the same, but a Python function's tool calls count too, as they do for the
    other kinds, whose every tool call is a model call or a POST of its own."""
    if kind.startswith("python"):
        turns = sum(1 for r in result.results for e in r.trace if e.kind == "user")
        tools = sum(1 for r in result.results for e in r.trace
                    if e.kind in ("tool_result", "tool_error"))
        return turns, turns + tools
    calls = sum(1 for r in result.results for e in r.trace if e.kind == "model")
    return calls, calls


#: the suites: (name, 3 user turns, 2 mocked tool calls a turn)
SUITES = (("plain", False, False), ("turns", True, False), ("conversation", True, True))


async def measure(kind: str, n: int, turns: bool, tools: bool, url: str
                  ) -> tuple[float, float]:
    if kind == "adk-bare":
        return await bare_adk(n, turns, tools)
    if kind == "http-bare":
        return await bare_http(n, turns, tools, url)
    agent, _ = make_agent(kind, tools, url)
    gc.collect()  # every suite starts from the same heap: the last one's garbage is not its
    runner = Runner(agent=agent, judge=Judge(CRITERIA), cases=cases(n, turns),
                    concurrency=16)
    started = time.process_time()
    result = await runner.run()
    took = time.process_time() - started
    await agent.aclose()
    bad = [r for r in result.results if r.status != "passed"]
    assert not bad, bad[0].error
    calls, steps = calls_of(result, kind)
    return took / calls, took / steps


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--adk-cases", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kinds", default="prompt,python,python-async,http,http-bare,adk,adk-bare")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return 0
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE,
                              text=True)
    try:
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}/agent"
        kinds = args.kinds.split(",")
        for kind in kinds:  # warm up: imports, first-use caches (ADK's above all)
            for _name, turns, tools in SUITES:
                asyncio.run(measure(kind, 5, turns, tools, url))
        figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.repeat):
            for kind in kinds:
                n = args.adk_cases if kind.startswith("adk") else args.cases
                for name, turns, tools in SUITES:
                    figures.setdefault((kind, name), []).append(
                        asyncio.run(measure(kind, n, turns, tools, url)))
        print("CPU per agent call (us), median; ratios against the plain one-turn case")
        print(f"{'kind':8} {'cases':>6} {'plain':>7} {'3 turns':>8} {'ratio':>6} "
              f"{'+2 tools/turn':>14} {'ratio':>6}")
        for kind in kinds:
            n = args.adk_cases if kind.startswith("adk") else args.cases
            units = ((0, ""), (1, " per step")) if kind.startswith("python") else ((0, ""),)
            for unit, label in units:
                plain, turns, talk = (
                    statistics.median(f[unit] for f in figures[(kind, name)]) * 1e6
                    for name, _, _ in SUITES)
                print(f"{kind + label:8} {n:>6} {plain:>7.0f} {turns:>8.0f} "
                      f"{turns / plain:>6.2f} {talk:>14.0f} {talk / plain:>6.2f}")
    finally:
        server.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
