"""Simulated users: a model playing a person with a goal (seed 003's aiUser).

Each turn the user model sees its persona, its goal, what it knows, and the
conversation so far, and answers with its next message and whether its goal is met
(a structured call, ``cycle_user``). It is sampled again for every iteration (the
iteration is in the cache key), so repeats are fresh conversations.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from cycle.records import Message, TraceEvent

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

    def __init__(self, function: str) -> None:
        from cycle.imports import import_object

        self.path = function
        self.function = import_object(function, what="conversation.user.function")

    async def next_turn(self, conversation: Sequence[TraceEvent], *, iteration: int,
                        context: dict[str, Any], state: dict[str, Any] | None = None) -> UserTurn:
        import inspect

        value = self.function(said_so_far(conversation), dict(state or {}))
        if inspect.isawaitable(value):
            value = await value
        if value is None:
            return UserTurn(message="", done=True)
        if isinstance(value, tuple):
            message, done = value
            return UserTurn(message=str(message), done=bool(done))
        return UserTurn(message=str(value), done=False)


class UserSimulator:
    """Plays one ``SimulatedUser`` with a model."""

    def __init__(self, spec: SimulatedUser, model: Model) -> None:
        self.spec = spec
        self.model = model

    def messages(self, conversation: Sequence[TraceEvent]) -> list[Message]:
        said = said_so_far(conversation)
        block = json.dumps({"persona": self.spec.persona, "goal": self.spec.goal,
                            "facts": self.spec.facts, "conversation": said}, ensure_ascii=False)
        facts = json.dumps(self.spec.facts, ensure_ascii=False) if self.spec.facts else "nothing"
        return [Message.system(USER_SYSTEM), Message.user(USER_MESSAGE.format(
            persona=self.spec.persona, goal=self.spec.goal, facts=facts, block=block))]

    async def next_turn(self, conversation: Sequence[TraceEvent], *, iteration: int,
                        context: dict[str, Any], state: dict[str, Any] | None = None) -> UserTurn:
        out = await self.model.generate_structured(
            self.messages(conversation), UserTurn, name=SCHEMA_NAME, iteration=iteration,
            role="user_sim", context=context)
        parsed = out.parsed
        assert isinstance(parsed, UserTurn)
        return parsed
