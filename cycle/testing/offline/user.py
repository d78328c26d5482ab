"""The offline simulated user: a deterministic person with a goal (``cycle_user`` requests).

It reads the ```json block of the request (persona, goal, facts, the conversation so
far) and answers, in this order:

1. the assistant's last message asks for something the user knows (a word of a fact's
   name, such as "order" for ``order_number``) that the user has not said yet: it says it
   ("My order number is A-1.");
2. the assistant's last message meets the goal (it holds most of the goal's words, or a
   word that shares their stem, and a word that confirms: approved, done, refunded...):
   it thanks and is done;
3. it has not said its goal yet: it says it ("I would like to get a refund.");
4. otherwise it gives the next fact it has not given, or, with nothing left, gives up
   politely and is done.
"""

from __future__ import annotations

import re
from typing import Any

from cycle.testing.offline import schema as js

_CONFIRM = re.compile(
    r"\b(approved|done|processed|refunded|issued|sent|booked|confirmed|cancelled|completed|"
    r"reset|on its way|will be back)\b", re.IGNORECASE)
_STOP = frozenset({"the", "a", "an", "to", "my", "for", "and", "get", "have", "with", "of",
                   "be", "is", "it", "on", "in", "back"})
_ALIASES = {"answer": ("message", "text", "reply"), "done": ("done", "finished", "goal_met")}


def _words(text: str) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOP and len(w) > 2}


def play(block: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    """The user's next turn, shaped to ``schema``."""
    conversation = [c for c in block.get("conversation") or [] if isinstance(c, dict)]
    facts = block.get("facts") if isinstance(block.get("facts"), dict) else {}
    goal = str(block.get("goal") or "")
    said = " ".join(str(c.get("text", "")) for c in conversation if c.get("role") == "user")
    last = next((str(c.get("text", "")) for c in reversed(conversation)
                 if c.get("role") == "assistant"), "")
    ungiven = [(k, v) for k, v in facts.items() if str(v) not in said]
    message, done = "", False
    asked = [(k, v) for k, v in ungiven
             if any(part in last.lower() for part in str(k).lower().split("_") if len(part) > 2)]
    goal_words = _words(goal)
    if asked:
        key, value = asked[0]
        message = f"My {str(key).replace('_', ' ')} is {value}."
    elif goal_words and len(goal_words & _words(last)) * 2 >= len(goal_words) \
            and _CONFIRM.search(last):
        message, done = "Thank you, that is all I needed.", True
    elif goal and goal.lower() not in said.lower():
        message = f"I would like to {goal.rstrip('.')}."
    elif ungiven:
        key, value = ungiven[0]
        message = f"Also, my {str(key).replace('_', ' ')} is {value}."
    else:
        message, done = "I see. Thank you anyway.", True
    answer = {"message": message, "done": done}
    if not schema:
        return answer
    return js.fill({"answer": message, "done": done}, _ALIASES, schema, schema)
