"""The agent under test: a prompt on a model, a Python callable, or an HTTP endpoint.

Each kind turns one case (and an iteration number) into an ``AgentResult``:
the output text (and a structured answer when there is one), the tool calls,
usage, cost and latency. A failure raises; the runner records it as an
*error* of that iteration, never as a low score.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any, Literal, Protocol

from msgspec import Struct, field

from cycle.agents.intercept import interceptable, intercepting
from cycle.agents.termination import ConversationState, holds
from cycle.agents.tools import AgentTools, Toolbox
from cycle.agents.users import FunctionUserPlayer, UserAgents, UserSimulator
from cycle.aio import in_thread
from cycle.cases import ConversationSpec, FunctionUser, SimulatedUser, TestCase
from cycle.errors import ConfigError, EvalError
from cycle.llm.base import GenerateConfig, ModelOutput
from cycle.llm.http import maskable, scrub
from cycle.llm.model import Model
from cycle.mocks import DEFAULT_MAX_STEPS, MockSpec, UserAgentSpec
from cycle.prompts.template import render, render_system, render_user
from cycle.records import AgentResult, Message, Prompt, ToolCall, ToolDef, TraceEvent, Usage


class Agent(Protocol):
    """Anything that answers a case."""

    #: shown in reports: "openai:gpt-4o-mini", "python:mypkg.agents:answer", "http://..."
    name: str
    #: the answers do not come from a real model (offline/scripted)
    offline: bool

    async def run(self, case: TestCase, *, iteration: int, context: dict[str, Any]) -> AgentResult:
        ...

    async def aclose(self) -> None:
        ...


#: prompt params that become GenerateConfig fields; the rest (model, ...) are not sent
_CONFIG_PARAMS = ("temperature", "max_tokens", "top_p", "stop", "seed", "timeout")


def generate_config(params: dict[str, Any]) -> GenerateConfig:
    """The generation options a prompt's params ask for."""
    values = {k: params[k] for k in _CONFIG_PARAMS if params.get(k) is not None}
    if isinstance(values.get("stop"), str):
        values["stop"] = (values["stop"],)
    elif "stop" in values:
        values["stop"] = tuple(values["stop"])
    return GenerateConfig(**values)


def prompt_messages(prompt: Prompt, case: TestCase, *, system: Message | None = None) -> list[Message]:
    """The first messages a prompt sends for ``case``: its system prompt and its user
    template, rendered with the case's variables (``system``: the system message when
    it is the same for every case, built once)."""
    variables = case.variables
    messages: list[Message] = []
    if system is not None:
        messages.append(system)
    elif prompt.system:
        messages.append(Message.system(render_system(prompt, variables)))
    messages.append(Message.user(render_user(prompt, variables)))
    return messages


class _Run(Struct):
    """What the model calls of one iteration add up to."""

    usage: Usage
    model: str
    cost: float = 0.0
    latency: float = 0.0
    calls: list[ToolCall] = field(default_factory=list)

    def add(self, out: ModelOutput, trace: list[TraceEvent], started: float) -> None:
        """Count one model call, and put its turn in the trace."""
        self.usage = self.usage + out.usage if self.usage.total_tokens else out.usage
        self.cost += out.cost
        self.latency += out.latency
        self.model = out.model or self.model
        self.calls += out.tool_calls
        trace.append(TraceEvent(kind="model", at=time.monotonic() - started, text=out.text,
                                tool_calls=out.tool_calls, usage=out.usage, cost=out.cost,
                                model=out.model or None))

    def result(self, trace: Sequence[TraceEvent], state: dict[str, Any], started: float,
               output: str, ending: Literal["completed", "terminated"], note: str,
               verdict: Literal["judged", "pass", "fail"] = "judged") -> AgentResult:
        """The iteration's result, timed from ``started``."""
        return AgentResult(
            output=output, tool_calls=tuple(self.calls), usage=self.usage, cost=self.cost,
            latency=self.latency, duration=time.monotonic() - started, model=self.model,
            trace=tuple(trace), state=state, ending=ending, note=note, verdict=verdict)


class PromptAgent:
    """A prompt on a model: system and user template rendered with the case's input.

    ``owns_model``: closing the agent closes the model (the assembler gives each
    evaluation a model of its own); otherwise the model is the caller's to close.
    """

    def __init__(
        self,
        prompt: Prompt,
        model: Model,
        *,
        owns_model: bool = False,
        mocks: Mapping[str, MockSpec] | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        user_model: Callable[[str], Model] | None = None,
        user_agents: Mapping[str, UserAgentSpec] | None = None,
    ) -> None:
        """``mocks``: how the prompt's tools answer (a case's own mocks override these);
        ``max_steps``: model turns before the case ends as terminated; ``user_model``:
        makes the model a simulated user names (default: ``get_model(name)``)."""
        self.prompt = prompt
        self.model = model
        self._owns_model = owns_model
        self.mocks = dict(mocks or {})
        self.max_steps = max_steps
        self._user_model = user_model
        self._user_models: dict[str, Model] = {}
        #: who answers the tools that ask the user (a case's own override these)
        self.user_agents = dict(user_agents or {})
        self.name: str = model.name
        self.offline: bool = model.offline
        self._config = generate_config(prompt.params)
        self._tools = list(prompt.tools)
        self._functions = {t.name: t.function for t in prompt.tools if t.function}
        # a system prompt without template syntax is the same for every case: build it once
        self._static_system = (
            Message.system(prompt.system)
            if prompt.system and "{" not in prompt.system else None
        )

    def messages(self, case: TestCase) -> list[Message]:
        """The messages sent for ``case``."""
        return prompt_messages(self.prompt, case, system=self._static_system)

    async def run(self, case: TestCase, *, iteration: int, context: dict[str, Any]) -> AgentResult:
        """Each user turn: model -> tool calls -> tool results -> model ... until the model
        answers without calling a tool (at most ``max_steps`` model turns, else the case is
        terminated). A multi-turn case then says its next scripted turn, until the script
        is used up (completed) or ``max_turns`` is reached (what that means: the case's
        ``on_max_turns``)."""
        started = time.monotonic()
        messages = self.messages(case)
        trace: list[TraceEvent] = [TraceEvent(kind="user", text=messages[-1].content)]
        toolbox = Toolbox(
            self._tools, {**self.mocks, **case.mocks}, case_id=case.id, state=case.state,
            functions=self._functions, started=started,
            ask=UserAgents({**self.user_agents, **case.user_agents}, model=self._user,
                           case_id=case.id, iteration=iteration, context=context),
        ) if self._tools else None
        conversation = case.conversation
        script = iter(conversation.user_turns()) if conversation else iter(())
        user = conversation.user if conversation else None
        simulator: UserSimulator | FunctionUserPlayer | None = (
            None if user is None
            else FunctionUserPlayer(user.function) if isinstance(user, FunctionUser)
            else UserSimulator(user, self._user(user.model)))
        max_turns = conversation.max_turns if conversation else 1
        run = _Run(usage=Usage(), model=self.name)
        turn = 1
        while True:
            answer = await self._turn(messages, trace, toolbox if case.run_tools else None,
                                      run, started, iteration=iteration, context=context,
                                      turn=turn, max_steps=case.max_steps or self.max_steps)
            if answer is None:
                note = (f"the step limit was reached: {case.max_steps or self.max_steps} model "
                        "turns without a final answer")
                return self._result(run, trace, toolbox, case, started, "", "terminated", note)
            if conversation and conversation.end_when and await holds(
                    conversation.end_when,
                    ConversationState(case.id, turn, answer,
                                      toolbox.state if toolbox else dict(case.state), trace),
                    model=lambda name: self._user(name or self._condition_model(conversation)),
                    iteration=iteration, context={**context, "turn": turn}):
                trace.append(TraceEvent(kind="final", at=time.monotonic() - started, text=answer))
                note = f"the end condition held after turn {turn}: {conversation.end_when.describe()}"
                return self._result(run, trace, toolbox, case, started, answer, "completed",
                                    note, verdict=conversation.on_condition_met)
            following = next(script, None)
            if following is None and simulator is None:
                break  # the script is used up: the conversation is complete
            if turn >= max_turns:
                assert conversation is not None
                note = (f"max_turns reached: {max_turns} user turns, "
                        + ("with turns still to say" if following is not None
                           else "the simulated user's goal not met"))
                if conversation.on_max_turns == "terminated":
                    return self._result(run, trace, toolbox, case, started, answer,
                                        "terminated", note)
                trace.append(TraceEvent(kind="final", at=time.monotonic() - started, text=answer))
                return self._result(run, trace, toolbox, case, started, answer, "completed",
                                    note, verdict=conversation.on_max_turns)
            if following is not None:
                text = render(following, case.variables, field="conversation.follow_ups")
            else:
                assert simulator is not None
                said = await simulator.next_turn(
                    trace, iteration=iteration, context={**context, "turn": turn + 1},
                    state=toolbox.state if toolbox else dict(case.state))
                if said.done:
                    break  # the simulated user's goal is met: the conversation is complete
                text = said.message
            turn += 1
            messages.append(Message.assistant(answer))
            messages.append(Message.user(text))
            trace.append(TraceEvent(kind="user", at=time.monotonic() - started, text=text))
        trace.append(TraceEvent(kind="final", at=time.monotonic() - started, text=answer))
        return self._result(run, trace, toolbox, case, started, answer, "completed", "")

    async def _turn(self, messages: list[Message], trace: list[TraceEvent], toolbox: Toolbox | None,
                    run: _Run, started: float, *, iteration: int, context: dict[str, Any],
                    turn: int, max_steps: int) -> str | None:
        """One user turn's model calls and tool calls; its answer, or None at the step limit.
        Without a toolbox the first model turn is the answer (its tool calls are recorded)."""
        for step in range(max_steps):
            ctx = context if step == 0 and turn == 1 else {**context, "turn": turn, "step": step}
            out = await self.model.generate(messages, tools=self._tools, config=self._config,
                                            iteration=iteration, role="agent", context=ctx)
            run.add(out, trace, started)
            if not out.tool_calls or toolbox is None:
                return out.text
            messages.append(Message.assistant(out.text, out.tool_calls))
            # parallel calls run together; their results go back in the order asked
            answers = await asyncio.gather(*(toolbox.call(c) for c in out.tool_calls))
            for c, (events, shown) in zip(out.tool_calls, answers, strict=True):
                trace += events
                messages.append(Message.tool(shown, tool_call_id=c.id, name=c.name))
        return None

    def _result(self, run: _Run, trace: list[TraceEvent], toolbox: Toolbox | None,
                case: TestCase, started: float, output: str,
                ending: Literal["completed", "terminated"], note: str,
                verdict: Literal["judged", "pass", "fail"] = "judged") -> AgentResult:
        return run.result(trace, toolbox.state if toolbox else dict(case.state), started,
                          output, ending, note, verdict)

    def _condition_model(self, conversation: ConversationSpec) -> str:
        """The model a natural-language condition asks when it names none."""
        user = conversation.user
        return user.model if isinstance(user, SimulatedUser) else self.model.name

    def _user(self, name: str) -> Model:
        model = self._user_models.get(name)
        if model is None:
            if self._user_model is not None:
                model = self._user_model(name)
            else:
                from cycle.llm.registry import get_model

                model = get_model(name, role="user_sim")
            self._user_models[name] = model
        return model

    async def aclose(self) -> None:
        for model in self._user_models.values():
            await model.aclose()
        self._user_models.clear()
        if self._owns_model:
            await self.model.aclose()


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    calls = []
    for i, item in enumerate(raw or []):
        if isinstance(item, ToolCall):
            calls.append(item)
            continue
        if not isinstance(item, dict) or "name" not in item:
            raise EvalError(f"tool call #{i} is not a mapping with 'name': {item!r}"[:200])
        args = item.get("arguments", item.get("params", item.get("args", {})))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = {"_raw": args}
        calls.append(ToolCall(id=str(item.get("id", f"call_{i}")), name=item["name"],
                              arguments=args or {}))
    return tuple(calls)


def _answer_result(answer: Any, *, source: str, started: float, sent: str) -> AgentResult:
    """An agent's answer (str or {response, tool_calls}) as a result timed from ``started``,
    with its trace: what was sent, the tool calls the agent reports, its answer (the
    trajectory checks read them as they read a prompt agent's)."""
    text, structured, calls = _from_answer(answer, source=source)
    took = time.monotonic() - started
    trace = (TraceEvent(kind="user", text=sent),
             TraceEvent(kind="model", at=took, text=text, tool_calls=calls, model=source),
             *_reported_outcomes(answer, calls, at=took),
             TraceEvent(kind="final", at=took, text=text))
    return AgentResult(output=text, structured=structured, tool_calls=calls,
                       latency=took, duration=took, model=source, trace=trace)


def _reported_outcomes(answer: Any, calls: tuple[ToolCall, ...], *, at: float) -> list[TraceEvent]:
    """The outcome of each tool call an agent reports with ``success`` (and ``durationMs``,
    ``error``, ``result``), as the trace events a prompt agent's tools would leave: checks
    such as no_tool_errors read them the same way."""
    raw = answer.get("tool_calls", answer.get("toolCalls")) if isinstance(answer, dict) else None
    events = []
    for item, call in zip(raw or (), calls, strict=False):
        if not isinstance(item, dict) or "success" not in item:
            continue
        ms = item.get("durationMs")
        duration = float(ms) / 1000.0 if isinstance(ms, int | float) else 0.0
        if item["success"] is False:
            events.append(TraceEvent(kind="tool_error", at=at, tool=call.name, call_id=call.id,
                                     arguments=call.arguments, duration=duration,
                                     error=str(item.get("error") or "the tool failed")))
        else:
            events.append(TraceEvent(kind="tool_result", at=at, tool=call.name, call_id=call.id,
                                     arguments=call.arguments, duration=duration,
                                     result=item.get("result")))
    return events


def _from_answer(answer: Any, *, source: str) -> tuple[str, Any, tuple[ToolCall, ...]]:
    """(text, structured, tool_calls) from what a callable or endpoint returned."""
    if isinstance(answer, str):
        return answer, None, ()
    if isinstance(answer, dict):
        if "response" in answer:
            response = answer["response"]
            calls = _tool_calls(answer.get("tool_calls", answer.get("toolCalls")))
            if isinstance(response, str):
                return response, None, calls
            return json.dumps(response, ensure_ascii=False), response, calls
        return json.dumps(answer, ensure_ascii=False), answer, ()
    raise EvalError(
        f"{source} returned {type(answer).__name__}; expected a str or a dict with 'response'"
    )


class CallableAgent:
    """A Python function (sync or async) taking the case's input (a dict or a str).

    With a second parameter (``def agent(inp, tools)``) it is handed the prompt's tools,
    answered by the mocks (``AgentTools``): even its own loop cannot reach a real tool
    unmocked, and its calls are in the trace.
    """

    def __init__(self, function: Callable[..., Any] | str, *, tools: Sequence[ToolDef] = (),
                 mocks: Mapping[str, MockSpec] | None = None) -> None:
        if isinstance(function, str):
            from cycle.imports import import_object

            self.name = f"python:{function}"
            function = import_object(function, what="agent.function")
        else:
            self.name = f"python:{getattr(function, '__module__', '?')}:{getattr(function, '__qualname__', function)}"
        if not callable(function):
            raise ConfigError(f"agent function {self.name} is not callable", field="agent.function")
        self.function = function
        self.offline = False
        self.tools = list(tools)
        self.mocks = dict(mocks or {})
        self._functions = {t.name: t.function for t in self.tools if t.function}
        #: the declared tools a direct call of the agent's reaches by import path
        self._intercept = interceptable(self.tools)
        self._is_async = inspect.iscoroutinefunction(function)
        try:
            params = inspect.signature(function).parameters.values()
        except (TypeError, ValueError):
            params = ()  # type: ignore[assignment]
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._wants_tools = len(positional) >= 2 or any(p.name == "tools" for p in params)

    async def run(self, case: TestCase, *, iteration: int, context: dict[str, Any]) -> AgentResult:
        started = time.monotonic()
        handed = AgentTools(Toolbox(self.tools, {**self.mocks, **case.mocks}, case_id=case.id,
                                    state=case.state, functions=self._functions,
                                    started=started),
                            asyncio.get_running_loop()) if self._wants_tools or self._intercept else None
        args = (case.input, handed) if handed is not None and self._wants_tools else (case.input,)
        try:
            with intercepting(self._intercept, handed, self.function) if handed else nullcontext():
                if self._is_async:
                    answer = await self.function(*args)
                else:
                    # a sync agent may block (requests, time.sleep): keep the event loop free
                    # (a daemon thread: one stuck past run.timeout does not hold up the run)
                    answer = await in_thread(self.function, *args)
                    if inspect.isawaitable(answer):
                        answer = await answer
        except (EvalError, asyncio.CancelledError):
            raise  # an unmocked tool among them: the iteration's error says how to mock it
        except Exception as e:
            raise EvalError(f"agent {self.name} raised {e.__class__.__name__}: {e}") from e
        if handed is not None and handed.fatal is not None:
            raise handed.fatal  # the agent caught it: it is still the iteration's error
        sent = case.input if isinstance(case.input, str) else json.dumps(case.input, ensure_ascii=False)
        result = _answer_result(answer, source=self.name, started=started, sent=sent)
        if handed is None or not handed.calls:
            return result
        # the calls it made through the mocks, in the trace between the input and the answer
        user, model, *reported, final = result.trace
        made = model.model_copy(update={"tool_calls": tuple(handed.calls), "text": ""})
        trace = (user, made, *handed.events, model, *reported, final)
        return result.model_copy(update={
            "trace": trace, "state": handed.state,
            "tool_calls": tuple(handed.calls) + result.tool_calls})

    async def aclose(self) -> None:
        return None


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class HttpAgent:
    """An HTTP endpoint: ``POST {"message": ..., "input": ...}`` answering
    ``{"response": ..., "toolCalls": [...]}``.

    ``message`` is the case's input when it is a string, else the prompt's
    rendered user template when a prompt is given, else the input as JSON.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 120.0,
        prompt: Prompt | None = None,
    ) -> None:
        import httpx2 as httpx  # the HTTP client the openai SDK ships with

        self.url = url
        self.name = url
        self.offline = False
        self.prompt = prompt
        resolved = {k: _ENV_REF.sub(lambda m: os.environ.get(m.group(1), ""), v)
                    for k, v in (headers or {}).items()}
        #: the values the headers took from the environment (tokens): masked in answers
        self._secrets = maskable(os.environ.get(name) for v in (headers or {}).values()
                                 for name in _ENV_REF.findall(v))
        self._client = httpx.AsyncClient(headers=resolved, timeout=timeout)
        self._httpx = httpx

    def _message(self, case: TestCase) -> str:
        if isinstance(case.input, str):
            return case.input
        if self.prompt is not None:
            return render_user(self.prompt, case.variables)
        return json.dumps(case.input, ensure_ascii=False)

    async def run(self, case: TestCase, *, iteration: int, context: dict[str, Any]) -> AgentResult:
        started = time.monotonic()
        message = self._message(case)
        try:
            response = await self._client.post(
                self.url, json={"message": message, "input": case.input}
            )
        except self._httpx.HTTPError as e:
            raise EvalError(f"agent endpoint {self.url} failed: {e.__class__.__name__}: {e}") from e
        text = scrub(response.text, self._secrets)  # an endpoint may echo the token
        if response.status_code >= 400:
            raise EvalError(
                f"agent endpoint {self.url} answered HTTP {response.status_code}: {text[:200]}"
            )
        try:
            answer = json.loads(text)
        except ValueError as e:
            raise EvalError(f"agent endpoint {self.url} did not answer JSON: {text[:200]!r}") from e
        return _answer_result(answer, source=self.url, started=started, sent=message)

    async def aclose(self) -> None:
        await self._client.aclose()
