"""Runtime interception for Python agents (seed 000's "pit of success").

A Python agent may skip the ``tools`` handle and call its tool directly::

    from mypkg.tools import refund          # declared: {name: refund, function: mypkg.tools:refund}
    def agent(inp):
        return refund(order=inp["order"])   # during evaluation: answered by refund's mock

While an iteration runs, every tool declared by import path is answered by its mock
when reached through that path: the module attribute (``mypkg.tools.refund``, and so
every later ``from mypkg.tools import refund``) and the names the agent's own module
bound to the same function before cycle ran. An unmocked one is the same error of the
iteration as through the handle; the call and its answer are in the trace.

How: the first time a path is intercepted, its function is replaced, process-wide and
for good, by a dispatcher that looks up the iteration running in the current context
(a context variable: concurrent cases each see their own; a sync agent's worker thread
inherits its case's). Outside an iteration the dispatcher calls the real function, so
code that runs outside ``cycle`` is unchanged; it stays installed after the iteration,
so a timed-out agent's thread that runs on still reaches the mocks, never the real tool.

What cannot be intercepted: a copy of the function held anywhere else before cycle
imported it (another module's ``from mypkg.tools import refund``, a dict of handlers,
a bound method, a closure), code reached by other means (a subprocess, an HTTP call, a
module loaded twice), and an async agent calling a *sync* tool directly on the event
loop (that is refused: it would block every case; ``await tools.acall(...)`` it).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cycle.agents.tools import AgentTools
from cycle.errors import EvalError
from cycle.records import ToolDef

#: the running iteration's interception: function path -> (tool name, its AgentTools)
_active: contextvars.ContextVar[Mapping[str, tuple[str, AgentTools]] | None] = \
    contextvars.ContextVar("cycle_intercept", default=None)
#: function path -> its dispatcher (installed once per process)
_installed: dict[str, Callable[..., Any]] = {}
#: (path, id of the globals) already scanned: each agent module is scanned once per tool
_scanned: set[tuple[str, int]] = set()
_lock = threading.Lock()

REAL = "__cycle_real__"


def real_function(fn: Any) -> Any:
    """The real function behind a dispatcher (passthrough runs this, not the dispatcher)."""
    return getattr(fn, REAL, fn)


def _arguments(real: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> dict[str, Any]:
    """The call's arguments by name, as the tool's schema names them."""
    try:
        bound = inspect.signature(real).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{real.__qualname__}(): {e}") from None
    out: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        elif name != "tool_context":
            out[name] = value
    return out


def _dispatcher(path: str, real: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(real):
        @functools.wraps(real)
        async def adispatch(*args: Any, **kwargs: Any) -> Any:
            route = (_active.get() or {}).get(path)
            if route is None:
                return await real(*args, **kwargs)
            name, tools = route
            return await tools.acall(name, _arguments(real, args, kwargs))

        setattr(adispatch, REAL, real)
        return adispatch

    @functools.wraps(real)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        route = (_active.get() or {}).get(path)
        if route is None:
            return real(*args, **kwargs)
        name, tools = route
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return tools.call(name, _arguments(real, args, kwargs))  # a worker thread
        raise EvalError(
            f"the agent called {path} (tool '{name}') directly from async code: a sync tool "
            "cannot be answered from its mock there without blocking every case",
            hint=f"Call it as: await tools.acall({name!r}, ...) (def agent(inp, tools)), or "
            "make the agent a plain (sync) function, which runs in a worker thread.")

    setattr(dispatch, REAL, real)
    return dispatch


def _install(path: str, scan: Sequence[dict[str, Any]]) -> None:
    """Put the dispatcher for ``path`` at its module attribute and under every name in
    ``scan`` (module globals) bound to the same real function."""
    with _lock:
        module_name, _, attr = path.partition(":")
        module = sys.modules.get(module_name)
        if module is None:
            from cycle.imports import import_object

            import_object(path, what="tool function")
            module = sys.modules[module_name]
        *parents, leaf = attr.split(".")
        owner: Any = module
        for part in parents:
            owner = getattr(owner, part)
        current = getattr(owner, leaf)
        dispatcher = _installed.get(path)
        if dispatcher is None:
            if not callable(current):
                return
            dispatcher = _installed[path] = _dispatcher(path, real_function(current))
        real = getattr(dispatcher, REAL)
        if current is not dispatcher and real_function(current) is real:
            setattr(owner, leaf, dispatcher)
        for names in scan:
            for key, value in list(names.items()):
                if value is real:
                    names[key] = dispatcher


def interceptable(tools: Sequence[ToolDef], project: Path | None = None) -> dict[str, str]:
    """Function path -> tool name, for the declared tools that name a function; a path
    to a module of ``project``'s own named as that project's (``cycle.imports.qualified``),
    the one its agent reaches by a plain ``from tools import refund``: the dispatcher must
    sit on the function the agent holds, or the real tool would run unmocked."""
    from cycle.imports import qualified

    return {qualified(t.function, project): t.name for t in tools if t.function}


@contextmanager
def intercepting(paths: Mapping[str, str], tools: AgentTools,
                 agent: Callable[..., Any] | None = None) -> Iterator[None]:
    """For the block (an iteration of a Python agent): the tools at ``paths`` (function
    path -> tool name) answer through ``tools``, the iteration's mocks. ``agent``: its
    module's globals are scanned for names bound to those functions."""
    if not paths:
        yield
        return
    scan = [g] if isinstance(g := getattr(agent, "__globals__", None), dict) else []
    for path in paths:
        if path not in _installed or (scan and (path, id(scan[0])) not in _scanned):
            _install(path, scan)
            _scanned.update((path, id(g)) for g in scan)
    token = _active.set({path: (name, tools) for path, name in paths.items()})
    try:
        yield
    finally:
        _active.reset(token)
