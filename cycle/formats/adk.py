"""Google ADK EvalSets (``*.evalset.json``), read and written without ADK installed.

An EvalSet holds eval cases; each case is a conversation of invocations (the user's
content, the expected final response, and the intermediate data: the tool uses with their
arguments, and the tool responses) and a session input (app name, user id, initial state).
ADK writes its field names in snake_case (``model_dump_json``) and accepts camelCase; both
are read here, snake_case is written.

Import (``cases_from_evalset``): an eval case becomes a cycle case: its id, the first user
content as the input, the next ones as scripted follow-ups, the last final response as
``expected``, the session state as the case's state (``user:`` and ``app:`` keys in those
scopes, the rest in ``session``), and the expected tool uses as trace checks: the trajectory
(``tool_order``, exact: ADK's tool trajectory score compares the whole sequence) and one
``tool_called`` per use with its arguments (exact). A case without tool uses expects none
(``only_tools: []``).

Export: a suite's cases (``evalset_case``, the inverse of the import for the fields both
sides have) or a run's recorded traces (``evalset_case_from_trace``: each case's
representative iteration: what the user said, the tool calls and their results or errors,
the final answer). ``append_cases`` writes an EvalSet file with ADK's append semantics: the
file is created with seed 002's ``eval_set_id``/``name``/``description`` when missing,
cases are appended when it exists, and an ``eval_id`` already there is an error.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from cycle.agents.adk import adk_state, scoped_state
from cycle.cases import TestCase
from cycle.errors import ConfigError
from cycle.records import IterationResult

#: the criteria an imported case's tool uses become (ids, so that an export finds them)
TRAJECTORY = "adk_trajectory"
TOOL_ARGS = "adk_tool_"



def _camel(name: str) -> AliasChoices:
    head, *rest = name.split("_")
    return AliasChoices(name, head + "".join(w.title() for w in rest))


class _Model(BaseModel):
    # ADK's own fields we do not use are kept, so that a file read and written loses nothing
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Part(_Model):
    text: str | None = None


class Content(_Model):
    parts: list[Part] = Field(default_factory=list)
    role: str | None = None

    @property
    def text(self) -> str:
        return "".join(p.text or "" for p in self.parts)

    @classmethod
    def of(cls, text: str, role: str) -> Content:
        return cls(parts=[Part(text=text)], role=role)


class FunctionCall(_Model):
    id: str | None = None
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class FunctionResponse(_Model):
    id: str | None = None
    name: str
    response: dict[str, Any] = Field(default_factory=dict)


class IntermediateData(_Model):
    tool_uses: list[FunctionCall] = Field(default_factory=list,
                                          validation_alias=_camel("tool_uses"))
    tool_responses: list[FunctionResponse] = Field(default_factory=list,
                                                   validation_alias=_camel("tool_responses"))


class Invocation(_Model):
    invocation_id: str = Field("", validation_alias=_camel("invocation_id"))
    user_content: Content = Field(validation_alias=_camel("user_content"))
    final_response: Content | None = Field(None, validation_alias=_camel("final_response"))
    intermediate_data: IntermediateData | None = Field(
        None, validation_alias=_camel("intermediate_data"))
    creation_timestamp: float = Field(0.0, validation_alias=_camel("creation_timestamp"))


class SessionInput(_Model):
    app_name: str = Field("", validation_alias=_camel("app_name"))
    user_id: str = Field("", validation_alias=_camel("user_id"))
    state: dict[str, Any] = Field(default_factory=dict)


class EvalCase(_Model):
    eval_id: str = Field(validation_alias=_camel("eval_id"))
    conversation: list[Invocation] = Field(default_factory=list)
    session_input: SessionInput | None = Field(None, validation_alias=_camel("session_input"))
    creation_timestamp: float = Field(0.0, validation_alias=_camel("creation_timestamp"))


class EvalSet(_Model):
    eval_set_id: str = Field(validation_alias=_camel("eval_set_id"))
    name: str | None = None
    description: str | None = None
    eval_cases: list[EvalCase] = Field(default_factory=list, validation_alias=_camel("eval_cases"))
    creation_timestamp: float = Field(0.0, validation_alias=_camel("creation_timestamp"))

    def dump(self) -> str:
        return self.model_dump_json(indent=2, exclude_none=True) + "\n"


# -- reading ---------------------------------------------------------------------------


def load_evalset(path: str | Path) -> EvalSet:
    """An EvalSet file; a missing or malformed one is a ConfigError naming it."""
    from cycle.yamlload import parse_json_text, read_text

    p = Path(path)
    text = read_text(p)
    data = parse_json_text(text, str(p))
    try:
        return EvalSet.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ConfigError(f"not an ADK EvalSet: {where}: {first['msg']}", file=str(p),
                          hint="An EvalSet is {eval_set_id, eval_cases: [{eval_id, "
                          "conversation: [{user_content, final_response, "
                          "intermediate_data}]}]}.") from None


def _tool_uses(case: EvalCase) -> list[FunctionCall]:
    return [u for inv in case.conversation for u in
            (inv.intermediate_data.tool_uses if inv.intermediate_data else [])]


def case_from_evalset(case: EvalCase) -> dict[str, Any]:
    """One eval case as a cycle case (the mapping a case file holds)."""
    if not case.conversation:
        raise ConfigError(f"eval case '{case.eval_id}' has no conversation",
                          hint="Each eval case needs at least one invocation with user_content.")
    turns = [inv.user_content.text for inv in case.conversation]
    out: dict[str, Any] = {"id": case.eval_id, "input": turns[0]}
    final = case.conversation[-1].final_response
    if final is not None and final.text:
        out["expected"] = final.text
    if len(turns) > 1:
        out["conversation"] = {"follow_ups": turns[1:], "max_turns": len(turns)}
    state = case.session_input.state if case.session_input else {}
    if state:
        out["state"] = scoped_state(state)
    uses = _tool_uses(case)
    criteria: list[dict[str, Any]] = []
    if uses:
        criteria.append({"id": TRAJECTORY, "check": {
            "type": "tool_order", "tools": [u.name for u in uses], "mode": "exact"}})
        criteria += [{"id": f"{TOOL_ARGS}{i + 1}", "check": {
            "type": "tool_called", "tool": u.name, "args": u.args, "match": "exact"}}
            for i, u in enumerate(uses)]
    else:
        criteria.append({"id": TRAJECTORY, "check": {"type": "only_tools", "tools": []}})
    out["criteria"] = criteria
    return out


def cases_from_evalset(evalset: EvalSet) -> list[dict[str, Any]]:
    """Every eval case as a cycle case; the ids must be unique (they are cycle's case ids)."""
    seen: set[str] = set()
    out = []
    for case in evalset.eval_cases:
        if case.eval_id in seen:
            raise ConfigError(f"eval_id '{case.eval_id}' appears twice in the EvalSet")
        seen.add(case.eval_id)
        out.append(case_from_evalset(case))
    return out


# -- writing ---------------------------------------------------------------------------


def _expected_uses(case: TestCase) -> list[FunctionCall]:
    """The tool uses a case's criteria expect: the imported form (the trajectory and each
    use's arguments), else any tool_called checks, in order."""
    checks = [c.check for c in case.criteria if c.check is not None]
    by_args = [c for c in checks if getattr(c, "type", "") in ("tool_called", "tool_use")]
    order = next((c for c in checks if getattr(c, "type", "") == "tool_order"), None)
    if order is not None:
        args = [dict(c.args or {}) for c in by_args]
        names = list(order.tools)  # type: ignore[attr-defined]
        if [c.tool for c in by_args] == names:  # type: ignore[attr-defined]
            return [FunctionCall(name=n, args=a) for n, a in zip(names, args, strict=True)]
        return [FunctionCall(name=n) for n in names]
    return [FunctionCall(name=c.tool, args=dict(c.args or {})) for c in by_args]  # type: ignore[attr-defined]


def evalset_case(case: TestCase, user_message: str) -> EvalCase:
    """A suite's case as an eval case. ``user_message``: what the agent is sent first (the
    case's input rendered through the prompt's user template)."""
    now = time.time()
    turns = [user_message]
    if case.conversation is not None:
        turns += case.conversation.user_turns()
    invocations = [Invocation(invocation_id=f"{case.id}_inv_{i}",
                              user_content=Content.of(text, "user"), creation_timestamp=now)
                   for i, text in enumerate(turns)]
    last = invocations[-1]
    if case.expected is not None:
        expected = case.expected if isinstance(case.expected, str) else json.dumps(case.expected)
        last.final_response = Content.of(expected, "model")
    last.intermediate_data = IntermediateData(tool_uses=_expected_uses(case))
    session = SessionInput(state=adk_state(case.state)) if case.state else None
    return EvalCase(eval_id=case.id, conversation=invocations, session_input=session,
                    creation_timestamp=now)


def evalset_case_from_trace(result: IterationResult, eval_id: str) -> EvalCase:
    """A recorded iteration as an eval case: one invocation per user turn, with the tool
    calls made in it, their results or errors, and the answer that ended it."""
    invocations: list[Invocation] = []
    started = time.time()
    for event in result.trace:
        if event.kind == "user":
            invocations.append(Invocation(
                invocation_id=f"{eval_id}_inv_{len(invocations)}",
                user_content=Content.of(event.text, "user"),
                intermediate_data=IntermediateData(), creation_timestamp=started + event.at))
        elif not invocations:
            continue
        elif event.kind == "model":
            data = invocations[-1].intermediate_data
            assert data is not None
            data.tool_uses += [FunctionCall(id=c.id, name=c.name, args=dict(c.arguments))
                               for c in event.tool_calls]
            if event.text:
                invocations[-1].final_response = Content.of(event.text, "model")
        elif event.kind in ("tool_result", "tool_error"):
            data = invocations[-1].intermediate_data
            assert data is not None
            response = ({"result": event.result} if event.kind == "tool_result"
                        else {"error": {"type": "ToolError", "message": event.error or ""}})
            data.tool_responses.append(FunctionResponse(id=event.call_id, name=event.tool or "",
                                                        response=response))
    if not invocations:  # a plain answer with no trace: the input and the output
        invocations.append(Invocation(
            invocation_id=f"{eval_id}_inv_0", creation_timestamp=started,
            user_content=Content.of(result.input if isinstance(result.input, str)
                                    else json.dumps(result.input), "user"),
            final_response=Content.of(result.output, "model"),
            intermediate_data=IntermediateData(tool_uses=[
                FunctionCall(id=c.id, name=c.name, args=dict(c.arguments))
                for c in result.tool_calls])))
    return EvalCase(eval_id=eval_id, conversation=invocations, creation_timestamp=started)


def snake(name: str) -> str:
    """Seed 002's naming: CamelCase and anything else to snake_case."""
    out = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    return re.sub(r"[^a-z0-9_]", "_", out)


def append_cases(path: Path, cases: Sequence[EvalCase], *, name: str) -> EvalSet:
    """Append ``cases`` to the EvalSet at ``path`` (created, named after ``name``, when
    missing); an eval_id already in the file is an error and nothing is written."""
    if path.exists():
        evalset = load_evalset(path)
    else:
        evalset = EvalSet(
            eval_set_id=f"{snake(name)}_evals", name=f"{name} Evaluation Set",
            description=f"Golden traces captured via cycle for {name}",
            creation_timestamp=time.time())
    have = {c.eval_id for c in evalset.eval_cases}
    clash = [c.eval_id for c in cases if c.eval_id in have]
    if clash:
        raise ConfigError(f"eval_id {', '.join(repr(x) for x in clash[:5])} already in the "
                          "EvalSet", file=str(path),
                          hint="Remove them from the file, or write to another file.")
    evalset.eval_cases.extend(cases)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(evalset.dump(), encoding="utf-8")
    tmp.replace(path)  # whole or not at all
    return evalset
