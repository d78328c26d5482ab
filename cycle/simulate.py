"""``cycle simulate``: a person plays the agent's model, and the session becomes a golden trace.

Seed 002's simulator run. The person chooses an agent (the prompt of a cycle.yaml with its
tools, or an ADK agent), types the user's query, then acts as the model: picks a declared
tool, fills its arguments (validated against the tool's JSON schema before anything runs),
sees the output or the error, and at last writes the final response. Tools answer exactly
as in evaluation: through the config's mocks, and the real function only where a mock
says ``passthrough`` (nothing with side effects runs unless the config says so).

The session follows the seed's state machine (SELECTING_AGENT -> AWAITING_QUERY -> ACTIVE
-> COMPLETED) and history model (user query, tool call, tool output, tool error with type,
message and traceback, final response; timestamps; call ids correlated), with its
validation rules. A completed session is exported: appended to an ADK EvalSet file
(created when missing; seed 002's ``eval_set_id``, ``name``, ``description`` and
``eval_id``) and, when asked, to a cycle case file as a case with the expected trajectory
and final response (the same checks ``cycle import adk`` writes). An unfinished session is
never exported. Both files are written whole or not at all.

The screen is ``cycle.tui.screens.simulate``; this module holds everything but drawing and
reading a cycle.yaml (``cycle.assemble.simulate.config_agent``).
"""

from __future__ import annotations

import json
import os
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

from msgspec import Struct, field
from pydantic import BaseModel, Field

from cycle.agents.tools import Toolbox, UnmockedToolError, schema_problem
from cycle.cases import append_to_case_file, load_case_file
from cycle.errors import ConfigError, CycleError
from cycle.formats.adk import (
    Content,
    EvalCase,
    FunctionCall,
    FunctionResponse,
    IntermediateData,
    Invocation,
    append_cases,
    case_from_evalset,
    load_evalset,
    snake,
)
from cycle.llm.http import environment_secrets, scrub
from cycle.mocks import MockSpec
from cycle.records import ToolCall, ToolDef

# -- the seed's model ----------------------------------------------------------------------


class SessionState(Enum):
    SELECTING_AGENT = "selecting_agent"
    AWAITING_QUERY = "awaiting_query"
    ACTIVE = "active"
    COMPLETED = "completed"


class UserQuery(BaseModel):
    type: Literal["user_query"] = "user_query"
    content: str
    timestamp: datetime = Field(default_factory=datetime.now)


class ToolCallEntry(BaseModel):
    type: Literal["tool_call"] = "tool_call"
    tool_name: str
    arguments: dict[str, Any]
    call_id: str
    timestamp: datetime = Field(default_factory=datetime.now)


class ToolOutput(BaseModel):
    type: Literal["tool_output"] = "tool_output"
    call_id: str
    result: Any
    duration_ms: float
    timestamp: datetime = Field(default_factory=datetime.now)


class ToolErrorEntry(BaseModel):
    type: Literal["tool_error"] = "tool_error"
    call_id: str
    error_type: str
    error_message: str
    traceback: str | None = None
    duration_ms: float
    timestamp: datetime = Field(default_factory=datetime.now)


class FinalResponse(BaseModel):
    type: Literal["final_response"] = "final_response"
    content: str
    timestamp: datetime = Field(default_factory=datetime.now)


HistoryEntry = Annotated[UserQuery | ToolCallEntry | ToolOutput | ToolErrorEntry | FinalResponse,
                         Field(discriminator="type")]


class SimulationError(CycleError):
    """A step the session's state does not allow, or input it refuses (nothing recorded);
    ``field``: the form field or input at fault."""

    def __init__(self, message: str, *, field: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.field = field


# -- the agents a person may play ----------------------------------------------------------


class SimulatedAgent(Struct):
    """An agent to play (seed 002's SimulatedAgentConfig): its tools, how they answer, and
    where its golden traces go."""

    name: str
    tools: list[ToolDef]
    mocks: dict[str, MockSpec]
    eval_set_path: Path
    cases_path: Path | None = None
    #: tool name -> its real function or import path (for passthrough)
    functions: dict[str, Any] = field(default_factory=dict)
    #: where it comes from, shown when choosing ("cycle.yaml", "adk:pkg:agent")
    source: str = ""

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ConfigError("a simulated agent needs a name")
        self.eval_set_path = resolve(self.eval_set_path)
        self.cases_path = resolve(self.cases_path) if self.cases_path is not None else None

    def how(self, tool: str) -> str | None:
        """How ``tool`` answers ("mock: value", "real function"), or None when it cannot
        run here (no mock, and no passthrough)."""
        mock = self.mocks.get(tool)
        if mock is None or mock.ask_user:
            return None
        return "real function (passthrough)" if mock.passthrough else f"mock: {mock.kind}"


def resolve(path: str | Path) -> Path:
    """A relative path is relative to the working directory (seed 002)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else Path.cwd() / p


def _writable(path: Path, what: str) -> None:
    if path.exists():
        if path.is_dir():
            raise ConfigError(f"{path} is a folder", field=what, hint="Name a file.")
        if not os.access(path, os.W_OK):
            raise ConfigError(f"{path} is not writable", field=what,
                              hint="Fix its permissions, or name another file.")
        return
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise ConfigError(f"cannot create {path}: {folder} is not a writable folder", field=what,
                          hint="Name a file in a folder you can write to.")


def check_targets(agent: SimulatedAgent) -> None:
    """The export files can be written, and what is there already is an EvalSet and a case
    file (checked before a session starts: a session is not lost at its end)."""
    _writable(agent.eval_set_path, "--evalset")
    if agent.eval_set_path.exists():
        load_evalset(agent.eval_set_path)
    if agent.cases_path is not None:
        _writable(agent.cases_path, "--cases")
        if agent.cases_path.exists():
            load_case_file(agent.cases_path)


# -- the tool form ------------------------------------------------------------------------


def field_kind(schema: Mapping[str, Any]) -> str:
    """How a form asks for one property: "string", "integer", "number", "boolean", "enum",
    or "json" (arrays, objects and anything else, typed as JSON)."""
    if "enum" in schema:
        return "enum"
    kind = schema.get("type")
    if kind is None:  # Optional[X] as pydantic writes it: anyOf [X, null]
        options = [s for s in schema.get("anyOf", ()) if s.get("type") != "null"]
        if len(options) == 1:
            return field_kind(options[0])
    return kind if kind in ("string", "integer", "number", "boolean") else "json"


def form_fields(tool: ToolDef) -> list[tuple[str, dict[str, Any], bool]]:
    """The tool's arguments as form fields: (name, schema, required), in declared order."""
    params = tool.parameters or {}
    required = set(params.get("required", ()))
    return [(name, dict(schema), name in required)
            for name, schema in (params.get("properties") or {}).items()]


def parse_form(tool: ToolDef, values: Mapping[str, str | bool | None]) -> dict[str, Any]:
    """The arguments a filled form gives: each value typed by its schema (an empty optional
    field is left out). A value that does not fit raises SimulationError naming the field;
    ``Simulation.call`` checks the whole against the tool's schema."""
    arguments: dict[str, Any] = {}
    for name, schema, required in form_fields(tool):
        raw = values.get(name)
        kind = field_kind(schema)
        if kind == "boolean":
            if raw is not None:
                arguments[name] = bool(raw)
            continue
        text = "" if raw is None else str(raw)
        if not text.strip():
            if required:
                raise SimulationError(f"{name}: required", field=name)
            continue
        try:
            if kind == "integer":
                arguments[name] = int(text)
            elif kind == "number":
                arguments[name] = float(text)
            elif kind == "json":
                arguments[name] = json.loads(text)
            elif kind == "enum":
                choices = schema["enum"]
                arguments[name] = next((c for c in choices if str(c) == text), text)
            else:
                arguments[name] = text
        except ValueError:
            what = {"integer": "a whole number", "number": "a number"}.get(kind, "valid JSON")
            raise SimulationError(f"{name}: {text!r} is not {what}", field=name) from None
    return arguments


# -- a session ---------------------------------------------------------------------------


class Exported(Struct, frozen=True):
    eval_id: str
    eval_set_path: Path
    cases_path: Path | None


class Simulation:
    """One session after another on the given agents (the screen drives it)."""

    def __init__(self, agents: Sequence[SimulatedAgent], *,
                 clock: Callable[[], float] = time.time) -> None:
        if not agents:
            raise ConfigError("no agent to simulate",
                              hint="Run cycle simulate in a folder with cycle.yaml, or name an "
                              "ADK agent: cycle simulate --adk package.module:root_agent.")
        self.agents = {a.name: a for a in agents}
        self._clock = clock
        self.new_session()

    def new_session(self) -> None:
        self.state = SessionState.SELECTING_AGENT
        self.agent: SimulatedAgent | None = None
        self.history: list[HistoryEntry] = []
        self.session_id = uuid.uuid4().hex[:12]
        self.start_timestamp = self._clock()
        self._toolbox: Toolbox | None = None
        #: the environment's keys, masked in a tool's exception as the toolbox masks them
        #: in what the model is shown (read when a session begins)
        self._secrets: tuple[str, ...] = ()
        self._calls = 0
        if len(self.agents) == 1:
            self.select(next(iter(self.agents)))

    def _expect(self, *states: SessionState) -> None:
        if self.state not in states:
            raise SimulationError(f"not now: the session is {self.state.value}")

    def select(self, name: str) -> SimulatedAgent:
        self._expect(SessionState.SELECTING_AGENT)
        agent = self.agents.get(name)
        if agent is None:
            raise SimulationError(f"no agent {name!r} (agents: {', '.join(self.agents)})")
        check_targets(agent)
        self.agent = agent
        self.state = SessionState.AWAITING_QUERY
        return agent

    def begin(self, query: str) -> None:
        """The user's query: the session is active."""
        self._expect(SessionState.AWAITING_QUERY)
        if not query.strip():
            raise SimulationError("type the user's query first", field="query")
        assert self.agent is not None
        self.start_timestamp = self._clock()
        self._secrets = environment_secrets()
        self._toolbox = Toolbox(self.agent.tools, self.agent.mocks, case_id=self.session_id,
                                functions=self.agent.functions, secrets=self._secrets)
        self.history.append(UserQuery(content=query))
        self.state = SessionState.ACTIVE

    def tool(self, name: str) -> ToolDef:
        assert self.agent is not None
        found = next((t for t in self.agent.tools if t.name == name), None)
        if found is None:
            raise SimulationError(f"the agent has no tool {name!r}")
        return found

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutput | ToolErrorEntry:
        """Run one tool call through the mocks; the call and its outcome join the history.
        Arguments that break the tool's schema, or a tool that cannot run here (no mock),
        raise SimulationError and record nothing."""
        self._expect(SessionState.ACTIVE)
        assert self.agent is not None and self._toolbox is not None
        tool = self.tool(name)
        problem = schema_problem(arguments, tool)
        if problem is not None:
            raise SimulationError(problem, field="arguments")
        call = ToolCall(id=f"{self.session_id}_call_{self._calls + 1}", name=name,
                        arguments=arguments)
        try:
            events, _shown = await self._toolbox.call(call)
        except UnmockedToolError as e:
            raise SimulationError(e.message, hint=e.hint) from None
        self._calls += 1
        self.history.append(ToolCallEntry(tool_name=name, arguments=arguments, call_id=call.id))
        outcome = events[0]
        took = outcome.duration * 1000
        entry: ToolOutput | ToolErrorEntry
        if outcome.kind == "tool_result":
            entry = ToolOutput(call_id=call.id, result=outcome.result, duration_ms=took)
        else:
            # the exception as raised (the trace's error is masked already): its message
            # and traceback are shown and exported, so the environment's keys go first
            failure = self._toolbox.last_failure
            entry = ToolErrorEntry(
                call_id=call.id, duration_ms=took,
                error_type=type(failure).__name__ if failure else "ToolError",
                error_message=scrub(str(failure), self._secrets) if failure else outcome.error or "",
                traceback=scrub("".join(traceback.format_exception(failure)), self._secrets)
                if failure else None)
        self.history.append(entry)
        return entry

    def finish(self, response: str) -> Exported:
        """The final response: the session is complete and exported."""
        self._expect(SessionState.ACTIVE)
        if not response.strip():
            raise SimulationError("write the final response first", field="response")
        assert self.agent is not None
        self.history.append(FinalResponse(content=response))
        self.state = SessionState.COMPLETED
        try:
            return self._export()
        except CycleError:
            self.history.pop()  # the session stays open: fix the file and submit again
            self.state = SessionState.ACTIVE
            raise

    def eval_case(self, eval_id: str | None = None) -> EvalCase:
        """The session as an ADK eval case (seed 002's GoldenTraceBuilder)."""
        if self.state is not SessionState.COMPLETED:
            raise SimulationError("only a completed session becomes an eval case")
        _validate(self.history)
        query = next(e for e in self.history if isinstance(e, UserQuery))
        final = next(e for e in reversed(self.history) if isinstance(e, FinalResponse))
        names = {e.call_id: e.tool_name for e in self.history if isinstance(e, ToolCallEntry)}
        uses = [FunctionCall(id=e.call_id, name=e.tool_name, args=e.arguments)
                for e in self.history if isinstance(e, ToolCallEntry)]
        responses = [FunctionResponse(
            id=e.call_id, name=names[e.call_id],
            response={"result": e.result} if isinstance(e, ToolOutput) else
            {"error": {"type": e.error_type, "message": e.error_message}})
            for e in self.history if isinstance(e, ToolOutput | ToolErrorEntry)]
        invocation = Invocation(
            invocation_id=f"{self.session_id}_inv_0",
            user_content=Content.of(query.content, "user"),
            final_response=Content.of(final.content, "model"),
            intermediate_data=IntermediateData(tool_uses=uses, tool_responses=responses),
            creation_timestamp=self.start_timestamp)
        return EvalCase(eval_id=eval_id or self._eval_id(set()), conversation=[invocation],
                        creation_timestamp=self.start_timestamp)

    def _eval_id(self, taken: set[str]) -> str:
        """``{snake_case agent name}_{ISO time of the start}`` (seed 002); a second session
        started in the same second gets ``_2``, ``_3``..."""
        assert self.agent is not None
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.start_timestamp))
        base = f"{snake(self.agent.name)}_{stamp}"
        n, eval_id = 1, base
        while eval_id in taken:
            n += 1
            eval_id = f"{base}_{n}"
        return eval_id

    def _export(self) -> Exported:
        assert self.agent is not None
        agent = self.agent
        taken: set[str] = set()
        if agent.eval_set_path.exists():
            taken = {c.eval_id for c in load_evalset(agent.eval_set_path).eval_cases}
        existing_cases = None
        if agent.cases_path is not None and agent.cases_path.exists():
            existing_cases = agent.cases_path.read_text(encoding="utf-8")
            taken |= {c.id for c in load_case_file(agent.cases_path)}
        case = self.eval_case(self._eval_id(taken))
        if agent.cases_path is not None:  # the case file first: it is the one that can fail
            append_to_case_file(agent.cases_path, [case_from_evalset(case)])
        try:
            append_cases(agent.eval_set_path, [case], name=agent.name)
        except CycleError:
            if agent.cases_path is not None:  # both or neither
                _restore(agent.cases_path, existing_cases)
            raise
        return Exported(case.eval_id, agent.eval_set_path, agent.cases_path)


def _validate(history: Sequence[HistoryEntry]) -> None:
    """Seed 002's rules: a user query first, a final response last, call ids unique, every
    output or error answering a call made before it."""
    if not history or not isinstance(history[0], UserQuery):
        raise SimulationError("the history must start with the user's query")
    if not isinstance(history[-1], FinalResponse):
        raise SimulationError("the history must end with the final response")
    calls: set[str] = set()
    for entry in history:
        if isinstance(entry, ToolCallEntry):
            if entry.call_id in calls:
                raise SimulationError(f"call id {entry.call_id} appears twice")
            calls.add(entry.call_id)
        elif isinstance(entry, ToolOutput | ToolErrorEntry) and entry.call_id not in calls:
            raise SimulationError(f"an outcome for call {entry.call_id}, which was not made")


def _restore(path: Path, text: str | None) -> None:
    if text is None:
        path.unlink(missing_ok=True)
    else:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)


# -- an agent from ADK ------------------------------------------------------------------


def adk_agent(path: str, *, eval_set_path: Path | None, cases_path: Path | None,
              mocks: Mapping[str, MockSpec] | None = None,
              passthrough: Sequence[str] = ()) -> SimulatedAgent:
    """An ADK agent by import path: its tools as the model sees them, answered by
    ``mocks`` (``passthrough``: these tools run their real function)."""
    from cycle.agents.adk import adk_tools, load_adk_agent

    agent = load_adk_agent(path, field="--adk")
    found = adk_tools(agent)
    tools = [t.definition for t in found]
    known = {t.name for t in tools}
    return SimulatedAgent(
        name=agent.name, tools=tools,
        mocks=with_passthrough({k: v for k, v in (mocks or {}).items() if k in known},
                                passthrough, tools),
        eval_set_path=eval_set_path or Path(f"{snake(agent.name)}.evalset.json"),
        cases_path=cases_path, source=f"adk:{path}",
        functions={t.definition.name: t.function for t in found if t.function})


def with_passthrough(mocks: Mapping[str, MockSpec], names: Sequence[str],
                      tools: Sequence[ToolDef]) -> dict[str, MockSpec]:
    """``mocks``, with the tools among ``names`` that the agent has running for real."""
    known = {t.name for t in tools}
    return {**mocks, **{n: MockSpec(passthrough=True) for n in names if n in known}}


def check_passthrough(names: Sequence[str], agents: Sequence[SimulatedAgent]) -> None:
    """Every tool named to pass through is a tool of some agent (a typo is not silent)."""
    known = {t.name for a in agents for t in a.tools}
    for name in names:
        if name not in known:
            raise ConfigError(f"--passthrough {name}: no agent has a tool {name!r}",
                              field="--passthrough",
                              hint=f"Tools: {', '.join(sorted(known)) or 'none'}.")
