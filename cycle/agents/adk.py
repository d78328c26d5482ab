"""Google ADK agents under test: ``agent: {adk: "mypkg.agent:root_agent"}``.

The agent runs with ADK's own ``Runner`` and a fresh in-memory session per case
iteration, with three things of cycle's put in:

- **the model**: every LLM call of every LlmAgent of the tree (the root's, its
  sub-agents', a workflow root's steps', a graph Workflow's agent nodes') goes through
  cycle's ``Model`` (one ``CycleLlm`` an LlmAgent, so the trace names who called;
  an ADK ``BaseLlm``), so the budget, the response cache, retries, the rate limit,
  usage and cost are cycle's, and the agent's model is the one cycle.yaml names
  (``agent.model``, else the prompt's ``params.model``);
- **the instruction**: the versioned prompt's system (rendered with the case's
  variables) is the instruction of the prompt agent (``instruct_agent``: the root
  LlmAgent, or the one ``agent.prompt_agent`` names), and the prompt's tool
  descriptions replace the agent's where the prompt declares the tool: ``cycle
  improve`` improves them, with review, versions and rollback (``cycle prompt export
  ID@production --system`` prints the improved instruction back);
- **the tools**: ADK's before-tool callback answers every call with cycle's mocks
  (the ``Toolbox``), so nothing with side effects runs unless the config says
  ``passthrough``, and an unmocked tool is the same error as in cycle's own agents (a
  Workflow's tool node, which no model calls, through cycle's ADK plugin, which also
  refuses a call of an LlmAgent not in the tree: ``_plugin_class``).

Case state maps onto ADK's session state: ``session`` keys as they are, ``user`` and
``app`` keys with ADK's ``user:`` and ``app:`` prefixes. Every user turn of a
conversation (scripted or simulated) is said in the same session, one ADK invocation
a turn (cycle.agents.conversation drives them).

google-adk is an optional extra (``pip install 'cycle[adk]'``) imported only here, and
this module only when a config names an ADK agent.
"""

from __future__ import annotations

import contextvars
import copy
import json
import logging
import time
import warnings
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from functools import cache
from typing import Any

from msgspec import Struct

from cycle.agents.agent import generate_config, prompt_messages, unsent_examples
from cycle.agents.conversation import Iteration, TurnAgent
from cycle.cases import TestCase
from cycle.errors import ConfigError, CycleError, EvalError
from cycle.llm.base import GenerateConfig
from cycle.llm.http import environment_secrets, scrub, whole
from cycle.llm.model import Model
from cycle.mocks import DEFAULT_MAX_STEPS, MockSpec, UserAgentSpec
from cycle.records import Message, Prompt, ToolCall, ToolDef, TraceEvent

#: ADK's session-state key prefixes, by cycle's scope name (``session`` has none)
ADK_PREFIXES = {"user": "user:", "app": "app:"}
INSTALL_HINT = "Install the extra: pip install 'cycle[adk]' (it brings google-adk)."


def adk_state(scoped: Mapping[str, Any]) -> dict[str, Any]:
    """A case's state ({scope: {key: value}}) as ADK session state (prefixed keys)."""
    out: dict[str, Any] = {}
    for scope, values in scoped.items():
        if not isinstance(values, dict):
            out[scope] = values
            continue
        for key, value in values.items():
            out[ADK_PREFIXES.get(scope, "") + key] = value
    return out


def scoped_state(flat: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """ADK session state as a case's state: the inverse of ``adk_state``."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        scope = next((s for s, p in ADK_PREFIXES.items() if key.startswith(p)), None)
        out.setdefault(scope or "session", {})[key[len(ADK_PREFIXES[scope]):] if scope else key] = value
    return out


def _adk_key(dotted: str) -> str:
    """A trace's state key ("user.name") as ADK's ("user:name")."""
    scope, _, key = dotted.partition(".")
    return ADK_PREFIXES.get(scope, "") + key if scope != "session" else key


def _dotted(adk_key: str) -> str:
    """An ADK state key ("user:name") as a trace's ("user.name")."""
    for scope, prefix in ADK_PREFIXES.items():
        if adk_key.startswith(prefix):
            return f"{scope}.{adk_key[len(prefix):]}"
    return f"session.{adk_key}"


def refuse_code_execution(agent: Any, path: str, *, field: str = "agent.adk") -> None:
    """An agent with a code executor anywhere in its tree runs model-written code during
    evaluation (locally, or in the provider's sandbox for a built-in one): refused unless
    the config passes it through."""
    found = [f"{type(node.code_executor).__name__} on {getattr(node, 'name', '?')!r}"
             for node in _walk(agent) if getattr(node, "code_executor", None) is not None]
    if found:
        raise ConfigError(
            f"the ADK agent {path} runs model-written code during evaluation (a code executor: "
            f"{', '.join(found)}): refused, as nothing runs real code unless the config says "
            "so", field=field,
            hint="Remove the code executor for evaluation, or pass code execution through "
            "explicitly:\n  agent: {adk: " + path + ", allow_code_execution: true}")


def instruct_agent(root: Any, path: str, name: str | None = None, *,
                   field: str = "agent.adk") -> Any:
    """The LlmAgent of ``root``'s tree whose instruction is the versioned prompt: the one
    ``name``d (``agent.prompt_agent``), else the root when it is an LlmAgent, else the tree's
    only LlmAgent. A tree with several and no name is refused naming them, as is a custom
    root (cycle cannot see which agents its own ``_run_async_impl`` runs, nor how)."""
    from google.adk.agents import LlmAgent

    kind = type(root).__name__
    if not isinstance(root, (LlmAgent, *_workflows())):
        raise ConfigError(
            f"the ADK agent {path} is a custom {kind}: cycle cannot see what its own "
            "_run_async_impl runs, so it cannot route its model calls and tools", field=field,
            hint="Name an LlmAgent (Agent) or one of ADK's workflow agents ("
            + ", ".join(t.__name__ for t in _workflows())
            + ") as the root; the custom agent may be their sub-agent (a Workflow's node).")
    llms = [node for node in _walk(root) if isinstance(node, LlmAgent)]
    names = ", ".join(repr(node.name) for node in llms) or "none"
    if name is not None:
        named = [node for node in _walk(root) if getattr(node, "name", None) == name]
        chosen = next((n for n in named if isinstance(n, LlmAgent)), named[0] if named else None)
        if isinstance(chosen, LlmAgent):
            return chosen
        what = (f"is a {type(chosen).__name__}, which takes no instruction" if chosen
                else "is not in its tree")
        raise ConfigError(f"the prompt agent {name!r} of the ADK agent {path} {what}",
                          field="agent.prompt_agent",
                          hint=f"Name one of its LlmAgents: {names}.")
    if isinstance(root, LlmAgent):
        return root
    if len(llms) == 1:
        return llms[0]
    if not llms:
        raise ConfigError(f"the ADK agent {path} is a {kind} with no LlmAgent in its tree: "
                          "none takes the versioned prompt as its instruction", field=field,
                          hint="Give the workflow an LlmAgent (Agent) to take the prompt.")
    raise ConfigError(
        f"the ADK agent {path} is a {kind} with {len(llms)} LlmAgents ({names}): cycle "
        "cannot tell which one's instruction is the versioned prompt", field=field,
        hint="Say which in cycle.yaml:\n  agent: {adk: " + path + ", prompt_agent: "
        + llms[0].name + "}")


def _workflows() -> tuple[type, ...]:
    """ADK's workflow agents, and ADK 2's graph ``Workflow``: they run their sub-agents (a
    Workflow its graph's nodes) in an order of ADK's own, so every model call is still one
    of an LlmAgent of the tree, which cycle routes."""
    from google.adk.agents import LoopAgent, ParallelAgent, SequentialAgent

    return (SequentialAgent, ParallelAgent, LoopAgent, *_graph_workflow())


@cache
def _tool_node_class() -> type:
    """ADK's Workflow tool node (a tool as a graph node), or a class no node is."""
    try:
        from google.adk.workflow._tool_node import _ToolNode
    except ImportError:
        return type("NoToolNode", (), {})
    return _ToolNode


@cache
def _graph_workflow() -> tuple[type, ...]:
    """ADK's graph ``Workflow`` (google.adk.workflow, ADK 2), or nothing on an ADK without it."""
    try:
        from google.adk.workflow import Workflow
    except ImportError:
        return ()
    return (Workflow,)


def load_adk_agent(path: str, *, field: str = "agent.adk") -> Any:
    """The ADK agent at ``package.module:name``; a clear ConfigError when google-adk is not
    installed, the path does not import, or what it names is not an ADK agent."""
    try:
        from google.adk.agents import BaseAgent
    except ImportError:
        raise ConfigError("agent.adk needs google-adk, which is not installed", field=field,
                          hint=INSTALL_HINT) from None
    from cycle.imports import import_object

    # ADK logs what a tool callback raises with its traceback; cycle reports it once, as the
    # iteration's error (a level the user set on the logger is kept)
    adk_log = logging.getLogger("google_adk")
    if adk_log.level == logging.NOTSET:
        adk_log.setLevel(logging.CRITICAL)
    agent = import_object(path, what=field)
    roots = (BaseAgent, *_graph_workflow())
    if callable(agent) and not isinstance(agent, roots):
        agent = agent()  # a factory: def make_agent() -> Agent
    if not isinstance(agent, roots):
        raise ConfigError(f"{path} is a {type(agent).__name__}, not an ADK agent", field=field,
                          hint="Name an ADK agent (google.adk.agents.Agent, LlmAgent, ...), a "
                          "Workflow (google.adk.workflow), or a function returning one: "
                          "package.module:root_agent.")
    return agent


def _walk(agent: Any) -> list[Any]:
    """The agent and every node of its tree, depth first, each once: sub-agents, and a
    Workflow's graph nodes (ADK's own notion of a node's static children, where the ADK
    has it: a Workflow's nodes, a parallel worker's wrapped node, node tools)."""
    out: list[Any] = []
    seen: set[int] = set()
    stack = [agent]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        children = getattr(node, "_iter_static_children", None)
        stack.extend(reversed(list(children() if children else
                                   getattr(node, "sub_agents", None) or ())))
    return out


class AdkTool(Struct, frozen=True):
    """One tool of an ADK agent: its declaration as cycle's ToolDef, its real function."""

    definition: ToolDef
    function: Any


def adk_tools(agent: Any) -> list[AdkTool]:
    """The function tools of an agent and its sub-agents, declared as the model sees them.
    Toolsets (MCP and the like) list their tools only at run time: they are not here, so
    their calls are answered as unknown tools."""
    from google.adk.tools import BaseTool, FunctionTool

    out: dict[str, AdkTool] = {}
    for node in _walk(agent):
        # an agent's tools, and a Workflow's tool node's tool (``_ToolNode.tool``)
        node_tool = getattr(node, "tool", None)
        for item in [*(getattr(node, "tools", None) or ()),
                     *([node_tool] if isinstance(node_tool, BaseTool) else [])]:
            tool = item if isinstance(item, BaseTool) else FunctionTool(item) if callable(item) else None
            if tool is None:
                continue
            decl = tool._get_declaration()  # ADK's own way to declare a tool
            if decl is None:
                continue
            func = getattr(tool, "func", None)
            out[tool.name] = AdkTool(
                ToolDef(name=tool.name, description=decl.description or "",
                        parameters=_json_schema(decl),
                        # where the real function is (passthrough runs the object itself)
                        function=f"{func.__module__}:{func.__qualname__}" if func else None),
                func)
    return list(out.values())


def _json_schema(decl: Any) -> dict[str, Any]:
    if decl.parameters_json_schema:
        return dict(decl.parameters_json_schema)
    if decl.parameters is not None:
        return decl.parameters.json_schema.model_dump(mode="json", exclude_none=True)
    return {"type": "object", "properties": {}}


# -- the model: cycle's Model behind ADK's BaseLlm -----------------------------------------


#: the iteration the agent runs for (a context variable: ADK runs its calls in tasks)
_current: contextvars.ContextVar[Iteration] = contextvars.ContextVar("cycle_adk_iteration")


def _messages(request: Any) -> list[Message]:
    """An ADK LlmRequest's system instruction and contents as cycle's messages."""
    out: list[Message] = []
    system = request.config.system_instruction if request.config else None
    if system is not None:
        text = system if isinstance(system, str) else "".join(
            p.text or "" for p in getattr(system, "parts", None) or ())
        if text:
            out.append(Message.system(text))
    for content in request.contents or ():
        parts = content.parts or []
        text = "".join(p.text or "" for p in parts if p.text and not p.thought)
        calls = tuple(ToolCall(id=p.function_call.id or f"call_{i}", name=p.function_call.name or "",
                               arguments=dict(p.function_call.args or {}))
                      for i, p in enumerate(parts) if p.function_call)
        responses = [p.function_response for p in parts if p.function_response]
        if content.role == "model":
            out.append(Message.assistant(text, calls))
        elif responses:
            out += [Message.tool(json.dumps(r.response, ensure_ascii=False, default=str),
                                 tool_call_id=r.id, name=r.name) for r in responses]
        else:
            out.append(Message.user(text))
    return out


def _tool_defs(request: Any, descriptions: Mapping[str, str]) -> list[ToolDef]:
    out = []
    for tool in (request.config.tools if request.config else None) or ():
        for decl in getattr(tool, "function_declarations", None) or ():
            out.append(ToolDef(name=decl.name, parameters=_json_schema(decl),
                               description=descriptions.get(decl.name, decl.description or "")))
    return out


@cache
def _llm_class() -> type:
    """``CycleLlm``: built on first use, so that importing this module costs no ADK import
    until an ADK agent is really run."""
    from google.adk.models import BaseLlm, LlmResponse
    from google.genai import types
    from pydantic import PrivateAttr

    class CycleLlm(BaseLlm):  # type: ignore[misc, valid-type]
        """An ADK model whose calls are cycle's ``Model.generate``."""

        _cycle: Model = PrivateAttr()
        #: the prompt's generation options and tool descriptions (the agent's, not a call's)
        _config: GenerateConfig = PrivateAttr()
        _descriptions: dict[str, str] = PrivateAttr()
        #: the LlmAgent whose calls these are (each has its own CycleLlm): the trace names it
        _agent: str | None = PrivateAttr(default=None)

        async def generate_content_async(  # type: ignore[override]
            self, llm_request: Any, stream: bool = False,
        ) -> AsyncGenerator[Any, None]:
            it = _current.get()
            turn = max(i for i, e in enumerate(it.trace) if e.kind == "user")
            step = sum(1 for e in it.trace[turn:] if e.kind == "model")
            out = await self._cycle.generate(
                _messages(llm_request), tools=_tool_defs(llm_request, self._descriptions),
                config=self._config, iteration=it.iteration, role="agent",
                scope=it.scope_of_step(step))
            it.tally.add(out, it.trace, it.started, agent=self._agent)
            parts = ([types.Part(text=out.text)] if out.text else []) + [
                types.Part(function_call=types.FunctionCall(id=c.id, name=c.name,
                                                            args=dict(c.arguments)))
                for c in out.tool_calls]
            yield LlmResponse(
                content=types.Content(role="model", parts=parts or [types.Part(text="")]),
                usage_metadata=types.GenerateContentResponseUsageMetadata(
                    prompt_token_count=out.usage.input_tokens,
                    candidates_token_count=out.usage.output_tokens,
                    total_token_count=out.usage.total_tokens),
                turn_complete=True)

    return CycleLlm


#: ADK's own control flow, not side effects: they run under evaluation without a mock
#: (a hand-off to a sub-agent; a LoopAgent's step ending the loop)
TRANSFER = "transfer_to_agent"
EXIT_LOOP = "exit_loop"


async def _before_tool(tool: Any, args: dict[str, Any], tool_context: Any) -> dict[str, Any] | None:
    """ADK's before-tool callback: the mock answers and the real tool never runs (its
    answer replaces the call); the mock's state changes reach ADK's session state. A
    passed-through tool gets ADK's ToolContext; what it writes to the state lands in
    the case's state and the trace. ``transfer_to_agent`` (a hand-off to a sub-agent)
    and ``exit_loop`` are ADK's own: they run, and the trace records who handed off to
    whom, or who ended the loop."""
    it = _current.get()
    call_id = tool_context.function_call_id or f"call_{len(it.trace)}"
    if tool.name in (TRANSFER, EXIT_LOOP):
        result = {"from": tool_context.agent_name}
        if tool.name == TRANSFER:
            result["to"] = str(args.get("agent_name", ""))
        it.trace.append(TraceEvent(
            kind="tool_result", at=time.monotonic() - it.started, tool=tool.name,
            call_id=call_id, arguments=dict(args), result=result))
        return None  # ADK runs its own control flow
    call = ToolCall(id=call_id, name=tool.name, arguments=dict(args))
    before = dict(tool_context.state.to_dict())
    assert it.toolbox is not None  # an ADK agent's iterations always have the tools
    events, _shown = await it.toolbox.call(call, tool_context=tool_context)
    after = tool_context.state.to_dict()
    written = {_dotted(k): v for k, v in after.items() if k not in before or before[k] != v}
    it.trace += events
    if written:  # a passed-through tool wrote ADK state: the case's state and trace keep it
        it.trace += it.toolbox.record_state(written)
    for event in events[1:]:
        for key, value in (event.changes or {}).items():
            tool_context.state[_adk_key(key)] = value
    outcome = events[0]
    if outcome.kind == "tool_error":
        return {"error": outcome.error}
    return outcome.result if isinstance(outcome.result, dict) else {"result": outcome.result}


@cache
def _plugin_class() -> type:
    """``CyclePlugin``: ADK's plugins see every model and tool call of an invocation, also
    those no LlmAgent of the tree makes, which the per-agent model and callback miss."""
    from google.adk.plugins import BasePlugin

    class CyclePlugin(BasePlugin):  # type: ignore[misc, valid-type]
        """A Workflow's tool node answers from the mocks (no model asks; ADK runs it with
        the plugins' callbacks only); an LlmAgent cycle did not route (one a function
        node runs itself, with ``ctx.run_node``) is refused before its call."""

        def __init__(self, tool_nodes: list[Any]) -> None:
            super().__init__(name="cycle")
            self._tools = {id(tool) for tool in tool_nodes}

        async def before_tool_callback(self, *, tool: Any, tool_args: dict[str, Any],
                                       tool_context: Any) -> dict[str, Any] | None:
            if id(tool) not in self._tools:
                return None  # an LlmAgent's call: its own callback (cycle's) answers it
            return await _before_tool(tool, tool_args, tool_context)

        async def before_model_callback(self, *, callback_context: Any,
                                        llm_request: Any) -> Any:
            # ADK's own record of who calls, looked for rather than assumed (private): an
            # ADK that moved it loses this refusal, never the calls cycle routes
            context = getattr(callback_context, "_invocation_context", None)
            agent = getattr(context, "agent", None)
            if agent is not None and not isinstance(getattr(agent, "model", None), _llm_class()):
                name = getattr(agent, "name", "?")
                raise ConfigError(
                    f"the LlmAgent {name!r} is not in the ADK agent's tree (a function node "
                    "ran it itself, with ctx.run_node): cycle could not route its model "
                    "calls and tools, so its call was refused before it was made",
                    field="agent.adk",
                    hint=f"Make {name!r} a node of the Workflow's edges (or a sub-agent), "
                    "so that cycle finds it before the run.")
            return None

    return CyclePlugin


def _telemetry() -> Any:
    """ADK's telemetry settings for an agent's runs, decided once. Left unset, ADK reads
    seven environment variables again on every span, and by default turns each request's
    whole history into experimental GenAI attributes even when no OpenTelemetry provider
    records them: a third of an ADK tool call's CPU. So when nothing records (no tracer
    or logger provider set), ADK's stable, lighter path; when the user records, ADK's own
    defaults, as they would have them."""
    from google.adk.telemetry.context import TelemetryConfig
    from opentelemetry import _logs, trace

    # the API package's own providers (the proxy until one is set, the no-op) record nothing
    recording = any(not type(provider).__module__.startswith(("opentelemetry.trace",
                                                               "opentelemetry._logs"))
                    for provider in (trace.get_tracer_provider(), _logs.get_logger_provider()))
    return TelemetryConfig() if recording else TelemetryConfig(
        genai_semconv_stability_opt_in="stable")


class AdkAgent(TurnAgent):
    """An ADK agent run by ADK's Runner, its model calls, instruction and tools cycle's."""

    def __init__(self, path: str, prompt: Prompt, model: Model, *, owns_model: bool = False,
                 mocks: Mapping[str, MockSpec] | None = None,
                 max_steps: int = DEFAULT_MAX_STEPS, allow_code_execution: bool = False,
                 prompt_agent: str | None = None,
                 user_model: Callable[[str], Model] | None = None,
                 user_agents: Mapping[str, UserAgentSpec] | None = None) -> None:
        """``allow_code_execution``: run an agent with a code executor (refused otherwise);
        ``prompt_agent``: the LlmAgent whose instruction the prompt is (``instruct_agent``)."""
        if prompt.examples:
            # the session holds the conversation, and it starts with the case's message:
            # the examples would be silently left out
            raise unsent_examples(f"the ADK agent {path}")
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService

        self.path = path
        self.prompt = prompt
        self.model = model
        self._owns_model = owns_model
        self.name = f"adk:{path} on {model.name}"
        self.offline = model.offline
        self.waited_on = f"the ADK agent {path} on its model {model.name}"
        from google.adk.agents import LlmAgent
        from google.adk.apps import App

        original = load_adk_agent(path)
        if not allow_code_execution:
            refuse_code_execution(original, path)
        found = adk_tools(original)
        super().__init__(tools=merged_tools(prompt.tools, found), mocks=mocks,
                         functions={t.definition.name: t.function for t in found if t.function},
                         max_steps=max_steps, user_model=user_model, user_agents=user_agents)
        config = generate_config(prompt.params)
        descriptions = {t.name: t.description for t in self.tools}
        # one copy of the agent tree, with cycle's model and tool callback on every LlmAgent
        # (a workflow's steps too) and the prompt as the chosen one's instruction
        with warnings.catch_warnings():
            # ADK's workflow agents warn when made: the user's tree warned already, and
            # cycle's copy of it is no use of theirs to warn about again
            warnings.simplefilter("ignore", DeprecationWarning)
            # a Workflow's graph shares its nodes between edges: a deep copy keeps that
            self.agent = (copy.deepcopy(original) if isinstance(original, _graph_workflow())
                          else original.clone())
        for node in _walk(self.agent):
            if isinstance(node, LlmAgent):
                # one CycleLlm an LlmAgent, so that its calls' trace events name it
                node.model = llm = _llm_class()(model=model.name)
                llm._cycle, llm._config, llm._descriptions = model, config, descriptions
                llm._agent = node.name
                node.before_tool_callback = _before_tool
        instruct_agent(self.agent, path, prompt_agent).instruction = _instruction
        self._sessions = InMemorySessionService()
        # the plugin sees every call of the run (a Workflow's tool nodes, an agent run by
        # a function node); App is ADK's way to give a root (an agent or a Workflow) one
        tool_nodes = [node.tool for node in _walk(self.agent)
                      if isinstance(node, _tool_node_class())]
        app = App(name="cycle", root_agent=self.agent,
                  plugins=[_plugin_class()(tool_nodes)])
        self._runner = Runner(app=app, session_service=self._sessions)
        self._telemetry = _telemetry()

    def opening(self, case: TestCase) -> list[Message]:
        return prompt_messages(self.prompt, case)

    def wants_toolbox(self, case: TestCase) -> bool:
        return True  # the before-tool callback answers every call, declared or not

    def condition_model(self) -> str:
        return self.model.name

    async def begin(self, it: Iteration) -> None:
        """A fresh ADK session for the iteration, holding the case's state; every user
        turn is said in it."""
        it.session = (_current.set(it), await self._sessions.create_session(
            app_name="cycle", user_id="cycle", state=adk_state(it.case.state)))

    async def end(self, it: Iteration) -> None:
        token, session = it.session
        _current.reset(token)
        await self._sessions.delete_session(app_name="cycle", user_id="cycle",
                                            session_id=session.id)

    async def take_turn(self, it: Iteration) -> str | None:
        from google.adk.agents.run_config import RunConfig
        from google.genai import types

        _token, session = it.session
        answer: str | None = None
        try:
            async for event in self._runner.run_async(
                    user_id="cycle", session_id=session.id,
                    run_config=RunConfig(max_llm_calls=it.max_steps,
                                         telemetry=self._telemetry),
                    new_message=types.Content(role="user", parts=[types.Part(text=it.said)])):
                said = [p.text for p in (event.content.parts or ()) if p.text is not None
                        and not p.thought] if event.content else []
                # a workflow's answer is the last final response it emits; one with no text
                # (exit_loop's answer ends the loop) is not an answer
                if event.is_final_response() and said:
                    answer = "".join(said)
                elif getattr(event, "output", None) is not None and not said:
                    # a Workflow node's output (a function node's return value, as the
                    # next node gets it): the last node's is the workflow's answer
                    answer = _output_text(event.output)
        except Exception as e:
            from google.adk.agents.invocation_context import LlmCallsLimitExceededError

            # ADK wraps what its callbacks and models raise: cycle's own first, as they are
            # (a refused budget or a failed login stops the run, as for every kind of agent)
            ours = _cause(e, CycleError)
            if ours is not None:
                raise ours from None
            if _cause(e, LlmCallsLimitExceededError) is not None:
                return None  # the step limit
            raise EvalError(f"ADK agent {self.path} raised {e.__class__.__name__}: "
                            f"{scrub(str(e), environment_secrets())}") from e
        if answer is None:  # judged as "", it would have been a failure it never earned
            raise EvalError(f"ADK agent {self.path} ended the turn with no final response "
                            "(no event of its run was final: a sub-agent that said nothing, "
                            "a callback that ended the invocation)")
        return whole(answer)

    async def aclose(self) -> None:
        await super().aclose()
        if self._owns_model:
            await self.model.aclose()


def _cause(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first error of ``kind`` in ``error``'s chain of causes."""
    seen: set[int] = set()
    node: BaseException | None = error
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        if isinstance(node, kind):
            return node
        node = node.__cause__ or node.__context__
    return None


def _output_text(output: Any) -> str:
    """A Workflow node's output as the turn's answer: a string as it is, else its JSON."""
    if isinstance(output, str):
        return output
    dump = getattr(output, "model_dump", None)  # a node's output schema: a pydantic model
    return json.dumps(dump(mode="json") if callable(dump) else output, ensure_ascii=False,
                      default=str)


def _instruction(_context: Any) -> str:
    """The prompt agent's instruction: the versioned prompt's system for this case (an
    instruction provider, so ADK does not template it again)."""
    first = _current.get().messages[0]
    return first.content if first.role == "system" else ""


def merged_tools(prompt_tools: Sequence[ToolDef], agent_tools: Sequence[AdkTool]) -> list[ToolDef]:
    """What the model is shown: the agent's tools, with the prompt's descriptions."""
    described = {t.name: t.description for t in prompt_tools if t.description}
    return [t.definition.model_copy(update={"description": described[t.definition.name]})
            if t.definition.name in described else t.definition for t in agent_tools]
