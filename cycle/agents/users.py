"""Simulated users: a model playing a person with a goal (seed 003's aiUser), and the
user agents that answer tools asking the user (seed 000).

Each turn the user model sees its persona, its goal, what it knows, and the
conversation so far, and answers with its next message and whether its goal is met
(a structured call, ``cycle_user``). It is sampled again for every iteration (the
iteration is in the cache key), so repeats are fresh conversations.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from cycle.agents.tools import StateChange, no_user_agent
from cycle.aio import call_user_function
from cycle.imports import import_object
from cycle.llm.http import environment_secrets, scrub, whole
from cycle.mocks import UserAgentSpec
from cycle.prompts.template import render
from cycle.records import Message, ToolCall, TraceEvent
from cycle.records.scope import NO_SCOPE, CallScope

if TYPE_CHECKING:
    from cycle.cases import SimulatedUser
    from cycle.llm.model import Model

SCHEMA_NAME = "cycle_user"

USER_SYSTEM = """\
You play a person talking to an assistant, to test the assistant. Stay in character: \
answer as the person would, briefly, one message at a time, and give what you know when \
the assistant asks for it. Never play the assistant. When your goal is met (or clearly \
cannot be), say a last short message and set done to true."""

USER_MESSAGE = """\
Who you are: {persona}
Your goal: {goal}
What you know (give it when asked): {facts}

The conversation so far is below, "user" being you. Write your next message.
```json
{block}
```"""


class UserTurn(BaseModel):
    """The simulated user's answer."""

    message: str = Field(description="What the user says next.")
    done: bool = Field(description="True when the user's goal is met (the conversation ends).")


def said_so_far(conversation: Sequence[TraceEvent]) -> list[dict[str, str]]:
    """The conversation as the user sees it: ``[{role, text}]``, itself being "user"."""
    return [{"role": "user" if e.kind == "user" else "assistant", "text": e.text}
            for e in conversation if e.kind == "user" or (e.kind == "model" and e.text)]


class FunctionUserPlayer:
    """Plays a ``FunctionUser``: the function decides the next message."""

    def __init__(self, function: str, *, secrets: tuple[str, ...] | None = None) -> None:
        self.path = function
        self.function = import_object(function, what="conversation.user.function")
        #: the environment's keys, masked in what the function says (as in what a Python
        #: agent or a tool says): its turn is sent to the models and kept in the trace
        self._secrets = environment_secrets() if secrets is None else secrets

    async def next_turn(self, conversation: Sequence[TraceEvent], *, iteration: int,
                        scope: CallScope = NO_SCOPE, state: dict[str, Any] | None = None) -> UserTurn:
        value = await call_user_function(self.function, said_so_far(conversation),
                                         dict(state or {}),
                                         what=f"conversation user function {self.path}")
        if value is None:
            return UserTurn(message="", done=True)
        if isinstance(value, tuple):
            message, done = value
            return UserTurn(message=whole(scrub(str(message), self._secrets)), done=bool(done))
        # (a lone surrogate made whole here, where it enters: the requests built from the
        # conversation are not looked at again, cycle.llm.model.well_formed)
        return UserTurn(message=whole(scrub(str(value), self._secrets)), done=False)


class UserSimulator:
    """Plays one ``SimulatedUser`` with a model, its templates filled from the case."""

    def __init__(self, spec: SimulatedUser, model: Model,
                 variables: Mapping[str, Any] | None = None) -> None:
        self.spec = spec
        self.model = model
        filled = dict(variables or {})
        self.persona = render(spec.persona, filled, field="conversation.user.persona")
        self.goal = render(spec.goal, filled, field="conversation.user.goal")
        self.system = (render(spec.system, filled, field="conversation.user.system")
                       if spec.system else USER_SYSTEM)
        self._format = (import_object(spec.format_history,
                                      what="conversation.user.format_history")
                        if spec.format_history else None)

    async def messages(self, conversation: Sequence[TraceEvent]) -> list[Message]:
        said = said_so_far(conversation)
        if self._format is not None:
            block = str(await call_user_function(
                self._format, said, what=f"format_history {self.spec.format_history}"))
        else:
            block = json.dumps({"persona": self.persona, "goal": self.goal,
                                "facts": self.spec.facts, "conversation": said},
                               ensure_ascii=False)
        facts = json.dumps(self.spec.facts, ensure_ascii=False) if self.spec.facts else "nothing"
        return [Message.system(self.system), Message.user(USER_MESSAGE.format(
            persona=self.persona, goal=self.goal, facts=facts, block=block))]

    async def next_turn(self, conversation: Sequence[TraceEvent], *, iteration: int,
                        scope: CallScope = NO_SCOPE, state: dict[str, Any] | None = None) -> UserTurn:
        out = await self.model.generate_structured(
            await self.messages(conversation), UserTurn, name=SCHEMA_NAME, iteration=iteration,
            role="user_sim", scope=scope)
        parsed = out.parsed
        assert isinstance(parsed, UserTurn)
        return parsed


ASK_SYSTEM = """\
You are the user of an assistant. The assistant's tool is asking you something; answer \
as the user would, briefly.{instructions}"""


class UserAgents:
    """The user side of one case iteration: answers the tools that ask the user, each
    through the user agent named for it. All of them share one session (what was asked
    and answered so far), so the simulated person stays consistent."""

    def __init__(self, specs: Mapping[str, UserAgentSpec], *, model: Callable[[str], Model],
                 case_id: str, iteration: int, scope: CallScope) -> None:
        self.specs = dict(specs)
        self._model = model
        self.case_id = case_id
        self.iteration = iteration
        self.scope = scope
        self._asked: dict[str, int] = {}
        #: (tool, what was asked, what was answered), in order
        self.session: list[tuple[str, str, Any]] = []

    async def __call__(self, call: ToolCall, state: dict[str, Any]) -> Any:
        spec = self.specs.get(call.name)
        if spec is None:
            raise no_user_agent(self.case_id, call.name)
        # what was asked and answered before this ask (parallel asks do not see each other,
        # however their bridges' threads interleave)
        before = list(self.session)
        who = f"the user agent for tool '{call.name}' (case '{self.case_id}')"
        prompt = (await call_user_function(
            import_object(spec.format_prompt, what="format_prompt"), call.arguments,
            what=f"format_prompt {spec.format_prompt} of {who}")
            if spec.format_prompt else json.dumps(call.arguments, ensure_ascii=False))
        n = self._asked.get(call.name, 0)
        self._asked[call.name] = n + 1
        if spec.script is not None:
            answer: Any = spec.script[min(n, len(spec.script) - 1)]
        elif spec.function is not None:
            fn = import_object(spec.function, what=f"user_agents.{call.name}.function")
            answer = await call_user_function(
                fn, prompt, {"tool": call.name, "arguments": call.arguments, "state": state,
                             "session": before},
                what=f"user agent function {spec.function} for tool '{call.name}' "
                f"(case '{self.case_id}')")
        else:
            assert spec.model is not None
            answer = await self._from_model(spec, call, prompt, before)
        value = answer.value if isinstance(answer, StateChange) else answer
        if spec.format_response:
            value = await call_user_function(
                import_object(spec.format_response, what="format_response"), value,
                what=f"format_response {spec.format_response} of {who}")
        self.session.append((call.name, prompt, value))
        return StateChange(value, answer.changes) if isinstance(answer, StateChange) else value

    async def _from_model(self, spec: UserAgentSpec, call: ToolCall, prompt: str,
                          before: list[tuple[str, str, Any]]) -> Any:
        extra = f" {spec.instructions}" if spec.instructions else ""
        earlier = "".join(f"Asked by {t}: {p}\nYou answered: {json.dumps(a, default=str)}\n"
                          for t, p, a in before)
        messages = [Message.system(ASK_SYSTEM.format(instructions=extra)),
                    Message.user(f"{earlier}The tool {call.name} asks: {prompt}")]
        model = self._model(str(spec.model))
        scope = self.scope.at(tool=call.name)
        if spec.schema_ is not None:
            out = await model.generate_structured(messages, spec.schema_, name="cycle_ask",
                                                  iteration=self.iteration, role="user_sim",
                                                  scope=scope)
            return out.parsed
        out = await model.generate(messages, iteration=self.iteration, role="user_sim",
                                   scope=scope)
        return out.text
