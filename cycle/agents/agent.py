"""The agent under test: a prompt on a model, a Python callable, or an HTTP endpoint
(and an ADK agent, in cycle.agents.adk).

Each kind turns one case (and an iteration number) into an ``AgentResult``:
the output text (and a structured answer when there is one), the tool calls,
usage, cost and latency. A failure raises; the runner records it as an
*error* of that iteration, never as a low score. Every kind only says how it takes
one turn; the conversation around the turns is cycle.agents.conversation's.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Literal, Protocol

from cycle.agents.conversation import Iteration, TurnAgent, no_conversation
from cycle.agents.intercept import interceptable, intercepting
from cycle.agents.tools import AgentTools, Toolbox
from cycle.aio import in_thread
from cycle.cases import TestCase
from cycle.errors import ConfigError, EvalError, MalformedResponseError
from cycle.llm.base import GenerateConfig
from cycle.llm.http import (
    MIN_SECRET,
    environment_secrets,
    has_surrogate,
    maskable,
    safe_url,
    scrub,
    secret_variable,
    url_secrets,
    whole,
)
from cycle.llm.model import Model
from cycle.mocks import DEFAULT_MAX_STEPS, MockSpec, UserAgentSpec
from cycle.prompts.examples import example_turn, shown_examples
from cycle.prompts.template import render_system, render_user
from cycle.records import AgentResult, Message, Prompt, ToolCall, ToolDef, TraceEvent
from cycle.records.scope import NO_SCOPE, CallScope


class Agent(Protocol):
    """Anything that answers a case."""

    #: shown in reports: "openai:gpt-4o-mini", "python:mypkg.agents:answer", "http://..."
    name: str
    #: the answers do not come from a real model (offline/scripted)
    offline: bool

    async def run(self, case: TestCase, *, iteration: int, scope: CallScope = NO_SCOPE
                  ) -> AgentResult:
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
    """The first messages a prompt sends for ``case``: its system prompt, its few-shot
    examples as user and assistant turns (but one drawn from this case), and its user
    template, rendered with the case's variables (``system``: the system message when
    it is the same for every case, built once)."""
    variables = case.variables
    messages: list[Message] = []
    if system is not None:
        messages.append(system)
    elif prompt.system:
        messages.append(Message.system(render_system(prompt, variables)))
    for example in shown_examples(prompt, case.id, case.input):
        messages += [Message(role="user", content=example_turn(prompt, example), example=True),
                     Message(role="assistant", content=example.output, example=True)]
    messages.append(Message.user(render_user(prompt, variables)))
    return messages


def unsent_examples(agent: str) -> ConfigError:
    """The refusal of a prompt's few-shot examples by an agent that would not send them."""
    return ConfigError(
        f"the prompt has few-shot examples, and {agent} does not send a prompt's messages: "
        "it would run without them", field="examples",
        hint="Examples are sent as turns by a prompt run on a model (agent: provider:model); "
        "remove them from the prompt, or put what they show in the system prompt.")


class PromptAgent(TurnAgent):
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
        super().__init__(tools=prompt.tools, mocks=mocks, max_steps=max_steps,
                         user_model=user_model, user_agents=user_agents)
        self.prompt = prompt
        self.model = model
        self._owns_model = owns_model
        self.name: str = model.name
        self.offline: bool = model.offline
        self.waited_on = f"its model {model.name}"
        self._config = generate_config(prompt.params)
        # a system prompt without template syntax is the same for every case: build it once
        self._static_system = (
            Message.system(prompt.system)
            if prompt.system and "{" not in prompt.system else None
        )

    def messages(self, case: TestCase) -> list[Message]:
        """The messages sent for ``case``."""
        return prompt_messages(self.prompt, case, system=self._static_system)

    def opening(self, case: TestCase) -> list[Message]:
        return self.messages(case)

    def condition_model(self) -> str:
        return self.model.name

    async def take_turn(self, it: Iteration) -> str | None:
        """Model -> tool calls -> tool results -> model ... until the model answers
        without calling a tool (at most ``max_steps`` model turns). A case that does not
        run tools takes the first model turn as the answer (its tool calls recorded)."""
        toolbox = it.toolbox if it.case.run_tools else None
        for step in range(it.max_steps):
            out = await self.model.generate(it.messages, tools=self.tools, config=self._config,
                                            iteration=it.iteration, role="agent",
                                            scope=it.scope_of_step(step))
            it.tally.add(out, it.trace, it.started)
            if not out.tool_calls or toolbox is None:
                return out.text
            it.messages.append(Message.assistant(out.text, out.tool_calls))
            await answer_tools(toolbox, out.tool_calls, it)
        return None

    async def aclose(self) -> None:
        await super().aclose()
        if self._owns_model:
            await self.model.aclose()


async def answer_tools(toolbox: Toolbox, calls: Sequence[ToolCall], it: Iteration) -> None:
    """Answer a model turn's tool calls from the case's tools: parallel calls run together,
    their results go back in the order asked (as tool messages, and into the trace)."""
    if len(calls) == 1:  # the usual turn: awaited as it is, no task made to run it beside others
        answers = [await toolbox.call(calls[0])]
    else:
        answers = await asyncio.gather(*(toolbox.call(c) for c in calls))
    for c, (events, shown) in zip(calls, answers, strict=True):
        it.trace += events
        it.messages.append(Message.tool(shown, tool_call_id=c.id, name=c.name))


def _tool_calls(raw: Any, *, source: str = "the agent") -> tuple[ToolCall, ...]:
    if raw and not isinstance(raw, list | tuple):
        raise EvalError(f"{source} answered toolCalls is not a list but a {type(raw).__name__}: "
                        f"{json.dumps(raw, ensure_ascii=False, default=str)}"[:300])
    calls = []
    for i, item in enumerate(raw or []):
        if isinstance(item, ToolCall):
            calls.append(item)
            continue
        if not isinstance(item, dict) or "name" not in item:
            raise EvalError(f"{source} answered tool call #{i}, which is not a mapping with "
                            f"'name': {item!r}"[:300])
        args = item.get("arguments", item.get("params", item.get("args", {})))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = {"_raw": args}
        if not isinstance(item["name"], str) or not isinstance(args or {}, dict):
            raise EvalError(f"{source} answered tool call #{i} with a name that is not text or "
                            f"arguments that are not a mapping: {item!r}"[:300])
        calls.append(ToolCall(id=str(item.get("id", f"call_{i}")), name=item["name"],
                              arguments=args or {}))
    return tuple(calls)


def record_answer(it: Iteration, answer: Any, *, source: str, began: float,
                  made: Sequence[ToolCall] = (), events: Sequence[TraceEvent] = ()) -> str:
    """A function's or endpoint's answer to one turn (a str, or {response, tool_calls}),
    in the trace as a prompt agent's turn would be: the calls it made through cycle's
    tools (``made``, with their ``events``), then its answer with the tool calls it
    reports having run itself and their outcomes. Returns the answer's text.

    A lone surrogate in it (a function's str, an endpoint's JSON "\\ud800") is replaced by
    U+FFFD, as in a model's answer (cycle.llm.http.whole): kept, the store could not
    write the iteration and the run stopped on an internal error."""
    if not isinstance(answer, str) and has_surrogate(answer):  # one C pass, walked only then
        answer = whole(answer)
    text, structured, reported = _from_answer(whole(answer) if isinstance(answer, str) else answer,
                                              source=source)
    at = it.now()
    outcomes = _reported_outcomes(answer, reported, at=at)
    if made:
        it.trace.append(TraceEvent(kind="model", at=at, tool_calls=tuple(made), model=source))
        it.trace += events
    it.trace.append(TraceEvent(kind="model", at=at, text=text, tool_calls=reported, model=source))
    it.trace += outcomes
    it.tally.calls += [*made, *reported]
    it.tally.latency += at - began
    it.structured = structured
    return text


def chat(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation so far as a Python agent or an endpoint gets it (OpenAI's shape)."""
    return [m.as_chat() for m in messages]


def _sent(case: TestCase) -> str:
    return case.input if isinstance(case.input, str) else json.dumps(case.input, ensure_ascii=False)


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
        if not 0.0 <= duration < 1e9:  # NaN, infinite, negative: no duration a call took
            raise EvalError(f"tool call {call.name!r} reported durationMs = {ms}, which no "
                            "call takes")
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
            if response is None:
                raise EvalError(f"{source} answered no response (\"response\": null)")
            calls = _tool_calls(answer.get("tool_calls", answer.get("toolCalls")), source=source)
            if isinstance(response, str):
                return response, None, calls
            return json.dumps(response, ensure_ascii=False), response, calls
        return json.dumps(answer, ensure_ascii=False), answer, ()
    raise EvalError(
        f"{source} returned {type(answer).__name__}; expected a str or a dict with 'response'"
    )


def takes_conversation(function: Callable[..., Any]) -> bool:
    """Whether a Python agent takes the conversation so far (``messages``, or ``**kw``)."""
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "messages" or p.kind == p.VAR_KEYWORD for p in params)


class CallableAgent(TurnAgent):
    """A Python function (sync or async) taking the case's input (a dict or a str).

    With a second parameter (``def agent(inp, tools)``) it is handed the prompt's tools,
    answered by the mocks (``AgentTools``): even its own loop cannot reach a real tool
    unmocked, and its calls are in the trace. With a ``messages`` parameter it is given
    the conversation so far (``[{role, content}]``, the last being the user's turn to
    answer), which a conversation case needs: each user turn is one call.
    """

    def __init__(self, function: Callable[..., Any] | str, *, tools: Sequence[ToolDef] = (),
                 mocks: Mapping[str, MockSpec] | None = None,
                 user_model: Callable[[str], Model] | None = None,
                 user_agents: Mapping[str, UserAgentSpec] | None = None,
                 project: Path | None = None) -> None:
        super().__init__(tools=tools, mocks=mocks, user_model=user_model,
                         user_agents=user_agents)
        if isinstance(function, str):
            from cycle.imports import import_object

            self.name = f"python:{function}"
            # a module of the project's own (agent.py beside cycle.yaml): that project's
            function = import_object(function, what="agent.function", project=project)
        else:
            self.name = f"python:{getattr(function, '__module__', '?')}:{getattr(function, '__qualname__', function)}"
        if not callable(function):
            raise ConfigError(f"agent function {self.name} is not callable", field="agent.function")
        self.function = function
        self.offline = False
        self.waited_on = f"the Python function {self.name.removeprefix('python:')}"
        self.calls_models = False  # a model it calls itself is not cycle's: not measured
        #: the keys and tokens of the environment: the function may say them (in its
        #: answer, its exception) as cycle never does; they are masked before kept
        self._environment = environment_secrets()
        #: the declared tools a direct call of the agent's reaches by import path
        self._intercept = interceptable(self.tools, project)
        self._is_async = inspect.iscoroutinefunction(function)
        try:
            params = list(inspect.signature(function).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                      and p.name != "messages"]
        self._wants_tools = len(positional) >= 2 or any(p.name == "tools" for p in params)
        #: it takes the conversation so far: it can play a conversation case
        self.converses = takes_conversation(function)

    def opening(self, case: TestCase) -> list[Message]:
        return [Message.user(_sent(case))]

    def wants_toolbox(self, case: TestCase) -> bool:
        return self._wants_tools or bool(self._intercept)

    async def begin(self, it: Iteration) -> None:
        if it.toolbox is not None:
            it.session = AgentTools(it.toolbox, asyncio.get_running_loop())

    async def take_turn(self, it: Iteration) -> str | None:
        if it.turn > 1 and not self.converses:
            raise no_conversation(f"agent {self.name}", it.case,
                                  "takes no `messages` parameter for the conversation so far")
        handed: AgentTools | None = it.session
        args = (it.case.input, handed) if handed is not None and self._wants_tools else (it.case.input,)
        kwargs = {"messages": chat(it.messages)} if self.converses else {}
        calls, events = (len(handed.calls), len(handed.events)) if handed else (0, 0)
        began = it.now()
        try:
            with intercepting(self._intercept, handed, self.function) if handed else nullcontext():
                if self._is_async:
                    answer = await self.function(*args, **kwargs)
                else:
                    # a sync agent may block (requests, time.sleep): keep the event loop free
                    # (a daemon thread: one stuck past run.timeout does not hold up the run)
                    answer = await in_thread(functools.partial(self.function, *args, **kwargs))
                    if inspect.isawaitable(answer):
                        answer = await answer
        except (EvalError, asyncio.CancelledError):
            raise  # an unmocked tool among them: the iteration's error says how to mock it
        except Exception as e:
            raise EvalError(f"agent {self.name} raised {e.__class__.__name__}: "
                            f"{scrub(str(e), self._environment)}") from e
        if handed is not None and handed.fatal is not None:
            raise handed.fatal  # the agent caught it: it is still the iteration's error
        return record_answer(it, scrub(answer, self._environment), source=self.name, began=began,
                             made=handed.calls[calls:] if handed else (),
                             events=handed.events[events:] if handed else ())


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def env_names(value: str) -> list[str]:
    """The variables a header's value reads (``Bearer ${TOKEN}``: ``['TOKEN']``)."""
    return _ENV_REF.findall(value)


class HttpAgent(TurnAgent):
    """An HTTP endpoint, one POST a turn: ``{"message", "input", "messages"}`` answered by
    ``{"response": ..., "toolCalls": [...]}`` (the tool calls it ran itself, reported).

    ``message`` is the user's turn: the case's input when it is a string, else the
    prompt's rendered user template when a prompt is given, else the input as JSON;
    ``messages`` is the conversation so far in OpenAI's chat shape.

    With ``protocol: tools`` the endpoint lets cycle answer its tools: the request also
    carries ``tools`` (the declared tools, OpenAI's shape), and an answer with
    ``tool_calls`` and no ``response`` asks cycle to run them: cycle answers each from
    its mocks and user agents and posts again with the assistant's calls and the tool
    results appended to ``messages``, until the endpoint answers with ``response``.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 120.0,
        prompt: Prompt | None = None,
        protocol: Literal["plain", "tools"] = "plain",
        mocks: Mapping[str, MockSpec] | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        user_model: Callable[[str], Model] | None = None,
        user_agents: Mapping[str, UserAgentSpec] | None = None,
        max_response_mb: float | None = None,
    ) -> None:
        """``max_response_mb``: the largest answer read, cycle.yaml's
        ``agent.max_response_mb`` (its error says to raise it); None: the default cap, which
        nothing raises (an endpoint given on the command line)."""
        import httpx2 as httpx  # the HTTP client the openai SDK ships with

        if prompt is not None and prompt.examples:
            raise unsent_examples(f"the HTTP agent {url}")
        tools = prompt.tools if prompt is not None and protocol == "tools" else ()
        super().__init__(tools=tools, mocks=mocks, max_steps=max_steps, user_model=user_model,
                         user_agents=user_agents)
        self.url = url
        #: the URL as it is shown and stored: without the credentials it may carry
        #: (user:password@, ?token=...), which are masked in answers and errors too
        self.name = safe_url(url)
        self.offline = False
        self.waited_on = f"the HTTP endpoint {self.name}"
        self.calls_models = False
        self.prompt = prompt
        self.protocol = protocol
        resolved = {k: _ENV_REF.sub(lambda m: os.environ.get(m.group(1), ""), v)
                    for k, v in (headers or {}).items()}
        #: the values the headers took from the environment (tokens), and those of headers
        #: named as credentials (Authorization, X-Api-Key: written in cycle.yaml itself):
        #: masked in answers and errors
        self._secrets = maskable([*(os.environ.get(name) for v in (headers or {}).values()
                                    for name in _ENV_REF.findall(v)), *url_secrets(url),
                                  *header_secrets(resolved),
                                  *header_literals(headers or {})])
        from cycle.llm import tls
        from cycle.llm.bodies import DEFAULT_MB, cap_client

        # redirects are not followed (httpx's default, said here): the headers, the token
        # among them, would go to wherever the endpoint points
        self._client = cap_client(
            httpx.AsyncClient(headers=resolved, timeout=timeout, verify=tls.context(),
                              follow_redirects=False),
            limit_mb=max_response_mb or DEFAULT_MB,
            limit="agent.max_response_mb in cycle.yaml raises the limit" if max_response_mb
            else f"an agent's answer is at most {DEFAULT_MB:g} MB")
        self._httpx = httpx

    def opening(self, case: TestCase) -> list[Message]:
        if self.prompt is not None and not isinstance(case.input, str):
            return [Message.user(render_user(self.prompt, case.variables))]
        return [Message.user(_sent(case))]

    def wants_toolbox(self, case: TestCase) -> bool:
        return self.protocol == "tools" and bool(self.tools)

    async def take_turn(self, it: Iteration) -> str | None:
        said = it.said
        for _ in range(it.max_steps):
            began = it.now()
            body: dict[str, Any] = {"message": said, "input": it.case.input,
                                    "messages": chat(it.messages)}
            if self.protocol == "tools":
                body["tools"] = [t.as_chat() for t in self.tools]
            answer = await self._post(body)
            asked = _asked_calls(answer) if self.protocol == "tools" else None
            if asked is None:
                return record_answer(it, answer, source=self.name, began=began)
            it.tally.latency += it.now() - began
            it.tally.calls += asked
            it.trace.append(TraceEvent(kind="model", at=it.now(), tool_calls=asked,
                                       model=self.name))
            it.messages.append(Message.assistant("", asked))
            if it.toolbox is None:  # declared no tool, yet asked for one
                raise EvalError(f"agent endpoint {self.name} asked for tool "
                                f"'{asked[0].name}', and the prompt declares no tools")
            await answer_tools(it.toolbox, asked, it)
        return None

    async def _post(self, body: dict[str, Any]) -> Any:
        try:
            response = await self._client.post(self.url, json=body)
        except self._httpx.HTTPError as e:
            raise EvalError(f"agent endpoint {self.name} failed: {e.__class__.__name__}: "
                            f"{scrub(str(e), self._secrets)}") from e
        except MalformedResponseError as e:  # a body past the cap, an encoding not asked for
            raise EvalError(f"agent endpoint {self.name}: {e.message}") from e
        text = scrub(response.text, self._secrets)  # an endpoint may echo the token
        status = response.status_code
        if 300 <= status < 400:
            to = response.headers.get("location")
            raise EvalError(
                f"agent endpoint {self.name} answered HTTP {status}, a redirect"
                + (f" to {scrub(safe_url(to), self._secrets)[:200]}" if to else "")
                + ": cycle does not follow it (the headers, a token among them, would go "
                "there); write the address it answers at in agent.http")
        if not 200 <= status < 300:
            raise EvalError(f"agent endpoint {self.name} answered HTTP {status}: {text[:200]}")
        try:
            answer = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
            # and once parsed: JSON may spell the token with escapes ("\u0074ok-..."), and a
            # lone surrogate ("\ud800", which no store or report can encode); an answer
            # without a backslash has neither, and is not walked again
            if "\\" in text:
                answer = scrub(answer, self._secrets)
                if has_surrogate(answer):  # one C pass; walked only when it holds one
                    answer = whole(answer)
        except _NotFinite as e:
            raise EvalError(f"agent endpoint {self.name} answered the number {e}, which no "
                            "float holds: not an answer cycle can keep") from None
        except RecursionError:
            raise EvalError(f"agent endpoint {self.name} answered JSON nested deeper than "
                            "cycle reads (Python's recursion limit)") from None
        except ValueError as e:
            raise EvalError(f"agent endpoint {self.name} did not answer JSON: {text[:200]!r}") from e
        if isinstance(answer, dict) and "error" in answer and not any(
                k in answer for k in ("response", "tool_calls", "toolCalls")):
            said = answer["error"]
            if isinstance(said, dict):
                said = said.get("message", said)
            said = said if isinstance(said, str) else json.dumps(said, ensure_ascii=False,
                                                                  default=str)
            raise EvalError(f"agent endpoint {self.name} answered an error (HTTP {status}): "
                            f"{said[:200]}")
        return answer

    async def aclose(self) -> None:
        await super().aclose()
        await self._client.aclose()


class _NotFinite(ValueError):
    """A JSON number past a float's range (1e400), or NaN or Infinity."""


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise _NotFinite(text[:40])
    return value


def _no_constant(text: str) -> float:
    raise _NotFinite(text)


def credential_header(name: str) -> bool:
    """Whether a header is named as a credential (Authorization, X-Api-Key, Cookie)."""
    return bool(secret_variable(name.replace("-", "_"))) or name.lower() in ("cookie", "x-auth")


#: headers that say how to talk (a type, a language, the client), never who talks: their
#: text is stored and shown as written unless it is shaped like a key. Any other header
#: may carry one whatever its name (X-Tenant-Sig, X-Session): its text, when one word as
#: long as a key (``MIN_SECRET``), is stored and shown as a credential header's is
_PLAIN_HEADERS = frozenset({"accept", "accept-charset", "accept-language", "cache-control",
                            "content-language", "content-type", "pragma", "user-agent"})

#: a run of key characters long enough to be a key: with a digit and a letter, as a
#: generated key has and a word or a version ("AppleWebKit", "537.36") has not
_KEY_RUN = re.compile(r"(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{16,}")


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The credentials among an endpoint's headers: the values of those named as one
    (Authorization, X-Api-Key, Cookie), and each one's token after its scheme
    ("Bearer tok-...")."""
    found = []
    for name, value in headers.items():
        if credential_header(name):
            found.append(value)
            found += value.split()[1:]
    return found


_SCHEME = re.compile(r"[A-Za-z][A-Za-z-]*\s+")


def _literal_runs(value: str) -> tuple[str, list[str]]:
    """A header's value: its scheme ("Bearer ", kept) and the pieces around the
    variables (text, ``NAME``, text, ...)."""
    scheme = _SCHEME.match(value)
    head = scheme.group() if scheme and "${" not in scheme.group() else ""
    return head, _ENV_REF.split(value[len(head):])


def _secret_words(name: str, text: str, *, stored: bool = False) -> list[str]:
    """The secrets in ``text``, written in cycle.yaml in the header ``name`` (outside its
    ``${NAME}``s and scheme): every word of a credential header's; in another, the words
    shaped like a key, and, where it is ``stored``, its text when it is one word as long
    as a key (``X-Session: correcthorsebattery``) unless the header is plain. Such a word
    is not masked in answers (``X-Env: production`` would blank "production" out of what
    is judged), nor is prose (``X-Note: a nightly evaluation``)."""
    words = [w for w in (w.strip("-_.") for w in re.split(r"[\s:;,]+", text)) if w]
    if credential_header(name):
        return words
    if (stored and len(words) == 1 and len(words[0]) >= MIN_SECRET
            and name.lower() not in _PLAIN_HEADERS):
        return words
    return [word for word in words if _KEY_RUN.search(word)]


def header_literals(headers: Mapping[str, str]) -> list[str]:
    """The secrets written in cycle.yaml in the headers (``_secret_words``), masked in
    answers and errors as a variable's value is: beside a ``${NAME}`` in a credential
    header (``X-Api-Key: "key-${PART}-tail"``: ``key``, ``tail``), and those of other
    headers (``X-Session: s3ss10n-0123456789abcdef``); one too short to be a secret is not
    (see ``maskable``)."""
    found: list[str] = []
    for name, value in headers.items():
        _, pieces = _literal_runs(value)
        found += [word for piece in pieces[::2] for word in _secret_words(name, piece)]
    return found


def literal_secret_headers(headers: Mapping[str, str]) -> list[str]:
    """The headers whose secret is written in cycle.yaml itself rather than read from
    the environment: those with a secret word (``header_literals``)."""
    return [name for name, value in headers.items() if header_literals({name: value})]


def stored_header(name: str, value: str) -> str:
    """A header as a run stores and shows it: its secret text ``***`` (a credential
    header's whole value when written without ``${NAME}``; else its scheme and its
    ``${NAME}``s kept: they name the variable, not the value); others as written."""
    if credential_header(name) and "${" not in value:
        return "***" if value else value
    head, pieces = _literal_runs(value)
    return head + "".join("${" + p + "}" if i % 2
                          else "***" if _secret_words(name, p, stored=True) else p
                          for i, p in enumerate(pieces))


def _asked_calls(answer: Any) -> tuple[ToolCall, ...] | None:
    """The tool calls an answer asks cycle to run (protocol: tools): ``tool_calls``
    without a ``response``, in cycle's or OpenAI's shape; None for a final answer."""
    if not isinstance(answer, dict) or "response" in answer:
        return None
    raw = answer.get("tool_calls", answer.get("toolCalls"))
    if not raw:
        return None
    if not isinstance(raw, list):
        return _tool_calls(raw, source="the agent endpoint")  # the error that says so
    flat = [{**item, **item["function"]} if isinstance(item, dict)
            and isinstance(item.get("function"), dict) else item for item in raw]
    return _tool_calls(flat, source="the agent endpoint")
