"""Whether a conversation's end condition holds after an answer of the agent."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from msgspec import Struct
from pydantic import BaseModel, Field

from cycle.aio import call_user_function
from cycle.imports import import_object
from cycle.query import MISSING, lookup, matches
from cycle.records import Message, TraceEvent
from cycle.records.reading import json_in
from cycle.records.scope import NO_SCOPE, CallScope
from cycle.records.transcript import transcript_lines

if TYPE_CHECKING:
    from cycle.cases import EndCondition
    from cycle.llm.model import Model

SCHEMA_NAME = "cycle_condition"


class ConversationState(Struct, frozen=True):
    """What an end condition (and a ``custom`` one) may look at."""

    case_id: str
    turn: int
    answer: str
    state: dict[str, Any]
    trace: Sequence[TraceEvent]


class ConditionAnswer(BaseModel):
    """A model's decision on a natural-language end condition."""

    met: bool = Field(description="Whether the condition holds now.")
    reason: str = Field("", description="Why, in a sentence.")


def _structured(answer: str) -> Any:
    try:
        return json_in(answer)
    except ValueError:
        return MISSING


async def holds(cond: EndCondition, now: ConversationState, *,
                model: Callable[[str | None], Model], iteration: int,
                scope: CallScope = NO_SCOPE) -> bool:
    """Whether ``cond`` holds now. ``model(name)`` gives the model a natural-language
    condition asks (its own, or the default)."""
    if cond.state_matches is not None:
        return matches(now.state, cond.state_matches)
    if cond.field_set is not None:
        return lookup(_structured(now.answer), cond.field_set) not in (MISSING, None)
    if cond.field_value is not None:
        return lookup(_structured(now.answer), cond.field_value.field) == cond.field_value.equals
    if cond.natural_language is not None:
        nl = cond.natural_language
        said = "\n".join(transcript_lines(now.trace))
        out = await model(nl.model).generate_structured(
            [Message.system("You decide whether a condition holds in a conversation between "
                            "a user and an assistant. Answer only from the conversation."),
             Message.user(f"Condition: {nl.condition}\n\nConversation:\n```json\n"
                          + json.dumps({"condition": nl.condition, "transcript": said.splitlines()},
                                       ensure_ascii=False) + "\n```")],
            ConditionAnswer, name=SCHEMA_NAME, iteration=iteration, role="condition",
            scope=scope)
        return bool(out.parsed.met)
    if cond.custom is not None:
        fn = import_object(cond.custom, what="end_when.custom")
        return bool(await call_user_function(fn, now, what=f"end_when.custom {cond.custom}"))
    if cond.not_ is not None:
        return not await holds(cond.not_, now, model=model, iteration=iteration, scope=scope)
    every = cond.all_of is not None
    parts = cond.all_of if every else cond.any_of
    # free conditions first, and stop at the first that decides: a paid natural-language
    # condition is asked only when the state, the answer's fields and the functions
    # could not settle it (an any: whose free part held asked the model every turn)
    for part in sorted(parts or [], key=_asks_a_model):
        if await holds(part, now, model=model, iteration=iteration, scope=scope) != every:
            return not every
    return every


def _asks_a_model(cond: EndCondition) -> bool:
    return any(c.natural_language is not None for c in cond.walk())
