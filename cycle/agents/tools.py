"""Tools during evaluation: mocks that are safe by default, and the case's state.

During evaluation no tool runs real code unless the config says so. Each tool
call is answered by its mock, chosen per suite (``tools.mocks`` in cycle.yaml)
and overridable per case (``mocks:`` in the case)::

    tools:
      max_steps: 8                                   # model turns before 'terminated'
      mocks:
        lookup_order: {value: {status: shipped}}     # a fixed value
        roll_dice: {sequence: [3, 5, 1]}             # one per call (the last repeats)
        weather:                                     # argument patterns -> values
          match:
            - {args: {city: Paris}, value: sunny}
            - {args: {city: "^Lon"}, match: regex, value: rainy}
            - {value: unknown}                       # no args: matches any call
        refund: {function: mypkg.mocks:refund}       # fn(arguments, ToolContext)
        charge_card: {error: "card declined"}        # the tool fails (how does the agent cope?)
        search_docs: {passthrough: true}             # the real function: the only way code runs

A mock may change the case's state (``state: {session.refunded: true}``, or a
function returning ``with_state(value, {...})``). The state is a dict of scopes
(``session``, ``user``, or any other name); a key without a scope is
``session``'s. Every change is recorded in the trace.

A call to a tool that has no mock is an error of that iteration, naming the
tool, the case and the YAML that would mock it.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from cycle.aio import UserFunctionError, at_once, call_user_function, in_thread
from cycle.errors import (
    AuthenticationError,
    BudgetExceededError,
    ConfigError,
    CycleError,
    EvalError,
    MissingCredentialsError,
)
from cycle.llm.http import environment_secrets, scrub, whole
from cycle.mocks import MockSpec
from cycle.records import ToolCall, ToolDef
from cycle.records.trace import TraceEvent

DEFAULT_SCOPE = "session"


class ToolContext(Struct, frozen=True):
    """What a mock function may look at besides the arguments (a limited view)."""

    call_id: str
    tool: str
    case_id: str
    #: a copy of the case's state: change it with ``with_state``, not in place
    state: dict[str, Any]
    now: datetime


class StateChange(Struct, frozen=True):
    """A tool's value together with changes to the case's state (``with_state``)."""

    value: Any
    changes: dict[str, Any] = field(default_factory=dict)


def with_state(value: Any, changes: Mapping[str, Any]) -> StateChange:
    """Return ``value`` from a mock function and apply ``changes`` ("scope.key" -> value)."""
    return StateChange(value, dict(changes))


def unmocked_hint(tool: str) -> str:
    """The YAML that would mock ``tool`` (shown in the error)."""
    return (f"Mock it in cycle.yaml:\n  tools:\n    mocks:\n      {tool}: {{value: ...}}\n"
            f"or in the case: mocks: {{{tool}: {{value: ...}}}}; to run the real function "
            f"instead: {tool}: {{passthrough: true}}.")


class UnmockedToolError(EvalError):
    """A tool was called that has no mock (nothing runs for real unless the config says so)."""


def no_user_agent(case_id: str, tool: str) -> UnmockedToolError:
    """The error of a tool that asks the user when no user agent answers it."""
    return UnmockedToolError(
        f"case '{case_id}' called tool '{tool}', which asks the user, but no user agent "
        "answers it",
        hint=f"Name one in cycle.yaml:\n  tools:\n    user_agents:\n      {tool}: "
        f"{{script: [yes]}}\n(or a function, or a model), or in the case: "
        f"user_agents: {{{tool}: ...}}.")


def _set(state: dict[str, Any], key: str, value: Any) -> str:
    scope, _, rest = key.partition(".")
    if not rest:
        scope, rest = DEFAULT_SCOPE, key
    node = state.setdefault(scope, {})
    parts = rest.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value
    return f"{scope}.{rest}"


def import_callable(path: str, *, what: str, project: Path | None = None) -> Callable[..., Any]:
    """The function at ``path``; ``project``: as ``cycle.imports.import_object``'s."""
    from cycle.imports import import_object

    fn = import_object(path, what=what, project=project)
    if not callable(fn):
        raise ConfigError(f"{path} is not callable", field=what)
    return fn  # type: ignore[no-any-return]


class Toolbox:
    """The tools of one case iteration: answers calls through mocks, keeps the state,
    and turns each call into trace events."""

    def __init__(
        self,
        tools: Sequence[ToolDef],
        mocks: Mapping[str, MockSpec],
        *,
        case_id: str,
        state: Mapping[str, Any] | None = None,
        functions: Mapping[str, str | Callable[..., Any]] | None = None,
        started: float | None = None,
        ask: Callable[[ToolCall, dict[str, Any]], Awaitable[Any]] | None = None,
        secrets: tuple[str, ...] | None = None,
    ) -> None:
        """``ask(call, state)``: answers a tool whose mock says ``ask_user`` (the case's
        user agents, see cycle.agents.users); ``secrets``: the environment's
        (``environment_secrets``, read here when not given)."""
        self.tools = {t.name: t for t in tools}
        self.mocks = dict(mocks)
        self.case_id = case_id
        self.state: dict[str, Any] = copy.deepcopy(dict(state or {}))
        #: tool name -> its real function, or its import path (for passthrough)
        self.functions = dict(functions or {})
        #: the environment's keys and tokens, which a tool's code may say (its result, its
        #: exception) as cycle never does: masked before the model sees them or they are kept
        self._secrets = environment_secrets() if secrets is None else secrets
        self._calls: dict[str, int] = {}
        #: the exception of the last call, when its tool raised one (its type and traceback,
        #: which cycle simulate shows; the trace keeps the message)
        self.last_failure: Exception | None = None
        self._ask = ask
        self._answered_by_users = set(getattr(ask, "specs", ()))
        self._started = started if started is not None else time.monotonic()

    def _now(self) -> float:
        return time.monotonic() - self._started

    def answers_inline(self, name: str) -> bool:
        """Whether a call of ``name`` is answered without awaiting anything (its mock is a
        value, a sequence, a table of rows or an error; or the call fails validation)."""
        mock = self.mocks.get(name)
        if mock is None:
            return name not in self.tools  # an unknown tool fails at once; else it may ask
        return mock.kind in _INLINE_KINDS

    async def call(self, call: ToolCall, *, tool_context: Any = None
                   ) -> tuple[list[TraceEvent], str]:
        """Answer one call: (its trace events, the text the model is shown).
        ``tool_context``: the framework's own context (ADK's ToolContext), handed to a
        passed-through real function that takes ``tool_context``."""
        began = time.monotonic()
        self.last_failure = None
        declared = self.tools.get(call.name)
        problem = None
        if declared is None:
            problem = f"there is no tool named {call.name!r} (tools: {', '.join(self.tools) or 'none'})"
        else:
            problem = schema_problem(call.arguments, declared)
        if problem is not None:
            return self._failed(call, problem, began)
        mock = self.mocks.get(call.name)
        if mock is None and call.name in self._answered_by_users:
            mock = _ASK  # a user agent is named for it: the tool asks the user
        if mock is None:
            raise UnmockedToolError(
                f"case '{self.case_id}' called tool '{call.name}', which has no mock "
                "(during evaluation no tool runs real code unless the config says so)",
                hint=unmocked_hint(call.name),
            )
        n = self._calls.get(call.name, 0)
        self._calls[call.name] = n + 1
        changes = dict(mock.state)
        try:
            # a lone surrogate in a result (or an exception's message) is no text any
            # encoder takes: the next call's cache key failed, and the iteration with it
            value = whole(scrub(await self._answer(mock, call, n, changes, tool_context),
                                self._secrets))
        except CycleError as e:
            # an unmocked tool, or a mock function, user agent or bridge that failed: an
            # error of the iteration naming it, never a tool error the agent could pass by
            e.message = scrub(e.message, self._secrets)
            raise
        except Exception as e:  # noqa: BLE001 - the tool failed: the model is told, as in production
            self.last_failure = e
            # a mock's own error is the user's words, as they wrote them; a function's
            # exception keeps its class, which says what kind of failure it was
            said = str(e) if isinstance(e, ToolFailure) else f"{e.__class__.__name__}: {e}"
            return self._failed(call, whole(scrub(said, self._secrets)), began, changes=changes)
        try:
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise EvalError(f"tool '{call.name}' of case '{self.case_id}' returned a value that "
                            f"cannot be serialised to JSON ({type(value).__name__}): {e}") from e
        events = [TraceEvent(kind="tool_result", at=self._now(), tool=call.name, call_id=call.id,
                             arguments=call.arguments, result=value,
                             duration=time.monotonic() - began)]
        events += self._apply(changes)
        return events, shown

    async def _answer(self, mock: MockSpec, call: ToolCall, n: int, changes: dict[str, Any],
                      tool_context: Any = None) -> Any:
        kind = mock.kind
        if kind == "value":
            return copy.deepcopy(mock.value)
        if kind == "sequence":
            assert mock.sequence is not None
            return copy.deepcopy(mock.sequence[min(n, len(mock.sequence) - 1)])
        if kind == "error":
            raise ToolFailure(str(mock.error))
        if kind == "ask_user":
            if self._ask is None:
                raise no_user_agent(self.case_id, call.name)
            try:
                value = await self._ask(call, copy.deepcopy(self.state))
            except (EvalError, BudgetExceededError, AuthenticationError, MissingCredentialsError):
                raise  # already named, or a run-wide stop the runner handles
            except Exception as e:  # its model is down, or its own code broke
                raise UserFunctionError(
                    f"the user agent answering tool '{call.name}' of case '{self.case_id}' "
                    f"failed: {e.__class__.__name__}: {e}") from e
            if isinstance(value, StateChange):
                changes.update(value.changes)
                return value.value
            return value
        if kind == "match":
            from cycle.records.reading import arguments_match

            assert mock.match is not None
            for rule in mock.match:
                if arguments_match(call.arguments, rule.args, match=rule.match):
                    changes.update(rule.state)
                    if rule.error is not None:
                        raise ToolFailure(rule.error)
                    return copy.deepcopy(rule.value)
            raise ToolFailure(f"no mock row matches the arguments {json.dumps(call.arguments)}")
        if kind == "function":
            assert mock.function is not None
            fn = import_callable(mock.function, what=f"tools.mocks.{call.name}.function",
                                 project=mock.project)
            ctx = ToolContext(call_id=call.id, tool=call.name, case_id=self.case_id,
                              state=copy.deepcopy(self.state), now=datetime.now(UTC))
            value = await call_user_function(
                fn, call.arguments, ctx,
                what=f"mock function {mock.function} of tool '{call.name}' (case '{self.case_id}')")
        else:  # passthrough: the real function, named by the tool's declaration
            path = self.functions.get(call.name)
            if path is None:
                raise ToolFailure(f"tool '{call.name}' has no Python function to pass through to")
            fn = path if callable(path) else import_callable(path, what=f"tool {call.name}",
                                                            project=mock.project)
            # the real function, not the dispatcher cycle.agents.intercept put in its place
            fn = getattr(fn, "__cycle_real__", fn)
            value = await _call(fn, call.arguments, tool_context)
        if isinstance(value, StateChange):
            changes.update(value.changes)
            return value.value
        return value

    def record_state(self, changes: Mapping[str, Any]) -> list[TraceEvent]:
        """Apply changes a tool made itself ("scope.key" -> value; an ADK tool writing
        ADK's state) to the case's state: the trace events that record them."""
        return self._apply(changes)

    def _apply(self, changes: Mapping[str, Any]) -> list[TraceEvent]:
        if not changes:
            return []
        applied = {_set(self.state, k, copy.deepcopy(v)): v for k, v in changes.items()}
        return [TraceEvent(kind="state", at=self._now(), changes=applied)]

    def _failed(self, call: ToolCall, error: str, began: float,
                changes: Mapping[str, Any] | None = None) -> tuple[list[TraceEvent], str]:
        events = [TraceEvent(kind="tool_error", at=self._now(), tool=call.name, call_id=call.id,
                             arguments=call.arguments, error=error,
                             duration=time.monotonic() - began)]
        events += self._apply(changes or {})
        return events, f"error: {error}"


_ASK = MockSpec(ask_user=True)
#: the mock kinds whose answer awaits nothing (see Toolbox.answers_inline)
_INLINE_KINDS = frozenset({"value", "sequence", "error", "match"})


class ToolFailure(Exception):
    """A mocked tool failing on purpose (``error:``): the model sees the message."""


class ToolError(Exception):
    """What a Python agent's tool call raises when the tool failed (the message says why)."""


class AgentTools:
    """The tools a Python agent is handed: every call goes through the case's mocks,
    exactly as a prompt agent's do, and into the trace. Nothing reaches a real tool
    unless its mock says passthrough.

        async def agent(inp, tools):               # async agents
            order = await tools.acall("lookup_order", order=inp["order"])
        def agent(inp, tools):                     # sync agents (run in a thread)
            order = tools.call("lookup_order", order=inp["order"])
    """

    def __init__(self, toolbox: Toolbox, loop: asyncio.AbstractEventLoop) -> None:
        self._toolbox = toolbox
        self._loop = loop
        self._counter = 0
        #: the trace events of the calls made so far
        self.events: list[TraceEvent] = []
        #: the calls made so far, in order
        self.calls: list[ToolCall] = []
        #: the iteration's error a call raised (an unmocked tool, a failing mock function or
        #: user agent): raised again after the agent returns, even if its code caught it
        self.fatal: EvalError | None = None

    @property
    def names(self) -> list[str]:
        return list(self._toolbox.tools)

    @property
    def state(self) -> dict[str, Any]:
        """A copy of the case's state as the tools left it."""
        return copy.deepcopy(self._toolbox.state)

    async def acall(self, name: str, arguments: Mapping[str, Any] | None = None, **kw: Any) -> Any:
        self._counter += 1
        call = ToolCall(id=f"call_{self._counter}", name=name, arguments={**(arguments or {}), **kw})
        self.calls.append(call)
        try:
            events, _shown = await self._toolbox.call(call)
        except EvalError as e:
            self.fatal = self.fatal or e
            raise
        self.events += events
        outcome = events[0]
        if outcome.kind == "tool_error":
            raise ToolError(outcome.error)
        return outcome.result

    def call(self, name: str, arguments: Mapping[str, Any] | None = None, **kw: Any) -> Any:
        """The synchronous form, for an agent running in a worker thread."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("an async agent awaits tools.acall(...); call() is for sync agents")
        if self._toolbox.answers_inline(name):
            # a mock that never awaits (a value, a sequence, a row, an error) is answered in
            # this thread: the two thread hops to the event loop and back would cost four
            # times the answer. The event loop only awaits this thread meanwhile, so nothing
            # else touches the case's toolbox.
            return at_once(self.acall(name, arguments, **kw), "a tool answered inline")
        return asyncio.run_coroutine_threadsafe(self.acall(name, arguments, **kw), self._loop).result()


async def _call(fn: Callable[..., Any], arguments: dict[str, Any], ctx: Any) -> Any:
    """Call a real tool (``fn(**arguments)``; with ``tool_context=ctx`` when it takes one,
    as ADK's tools do). What it raises is the tool failing, as in production."""
    if ctx is not None and _takes_tool_context(fn):
        arguments = {**arguments, "tool_context": ctx}
    if inspect.iscoroutinefunction(fn):
        result = fn(**arguments)
    else:
        # real code may block: a daemon worker thread, which a stuck call cannot keep alive
        result = await in_thread(functools.partial(fn, **arguments))
    if inspect.isawaitable(result):
        result = await result
    return result


def _takes_tool_context(fn: Callable[..., Any]) -> bool:
    try:
        return "tool_context" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


#: id(schema) -> (the schema, its checker); the entry keeps the schema alive, so its id is
#: not reused while it is here (a prompt's tools live as long as the run)
_validators: dict[int, tuple[dict[str, Any], Any]] = {}


def _validator(tool: ToolDef) -> Any:
    """The tool's schema checker, built once per schema (a run calls a tool many times)."""
    schema = tool.parameters
    entry = _validators.get(id(schema))
    if entry is None:
        from jsonschema.validators import validator_for

        entry = _validators[id(schema)] = (schema, validator_for(schema)(schema))
    return entry[1]


def schema_problem(arguments: dict[str, Any], tool: ToolDef) -> str | None:
    """Why the arguments break the tool's declared schema, or None."""
    import jsonschema

    checker = _validator(tool)
    if checker.is_valid(arguments):
        return None
    error = jsonschema.exceptions.best_match(checker.iter_errors(arguments))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(arguments)"
    return f"the arguments do not match the tool's schema: {where}: {error.message}"
