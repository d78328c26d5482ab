"""The offline agent: a canned answer, edited by the directives the system prompt gives.

It reads the facts (customer, order, question) from the user messages,
picks the canned resolution for the question's topic, and applies the
transform of every world feature the system prompt asks for. Given tools,
it calls the first tool whose name matches a word of the last user message,
once, before answering.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from cycle.records import Message, ToolCall, ToolDef
from cycle.testing.offline.world import Facts, answer, parse_facts

# words in tool names that say nothing about what the tool is for
_TOOL_VERBS = frozenset({
    "get", "set", "lookup", "look", "up", "find", "search", "check", "fetch", "query", "list",
    "read", "tool", "api", "do", "make", "run", "the", "a", "of", "by", "for",
})


@dataclass(frozen=True)
class AgentReply:
    """What the agent says, the tool calls it makes and which features it applied."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    applied: tuple[str, ...]


def _facts(messages: list[Message]) -> Facts:
    customer = order = None
    question = ""
    for m in messages:
        if m.role != "user":
            continue
        f = parse_facts(m.content)
        customer = f.customer or customer
        order = f.order or order
        question = f.question or question
    return Facts(customer=customer, order=order, question=question)


def _stem(word: str) -> str:
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def _tool_call(messages: list[Message], tools: list[ToolDef], facts: Facts) -> ToolCall | None:
    """A call to the tool the last user message asks for, unless a tool has answered since."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    if last_user is None or any(m.role == "tool" for m in messages[last_user:]):
        return None
    words = {_stem(w) for w in re.findall(r"[a-z]+", messages[last_user].content.lower())}
    for tool in tools:
        parts = {_stem(p) for p in re.split(r"[^a-z]+", tool.name.lower()) if len(p) >= 3}
        if (parts - _TOOL_VERBS) & words:
            args = _arguments(tool, facts)
            digest = hashlib.sha256(f"{tool.name}{args}".encode()).hexdigest()[:12]
            return ToolCall(id=f"call_offline_{digest}", name=tool.name, arguments=args)
    return None


def _arguments(tool: ToolDef, facts: Facts) -> dict[str, Any]:
    props = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    args: dict[str, Any] = {}
    for name, spec in props.items():
        key = name.lower()
        value: Any
        if "order" in key and facts.order:
            value = facts.order
        elif ("name" in key or "customer" in key) and facts.customer:
            value = facts.customer
        elif any(k in key for k in ("query", "question", "text", "message")):
            value = facts.question
        elif name in required:
            value = ""
        else:
            continue
        if isinstance(spec, dict) and spec.get("type") == "integer" and str(value).isdigit():
            value = int(value)
        args[name] = value
    return args


def respond(messages: list[Message], tools: list[ToolDef]) -> AgentReply:
    """The agent's reply to a conversation."""
    system = "\n".join(m.content for m in messages if m.role == "system")
    facts = _facts(messages)
    if tools:
        call = _tool_call(messages, tools, facts)
        if call is not None:
            return AgentReply("", (call,), ())
    text, applied = answer(system, facts)
    return AgentReply(text, (), tuple(applied))
