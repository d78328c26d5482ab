"""The offline agent: a canned answer, edited by the directives the system prompt gives.

It reads the facts (customer, order, question) from the user messages,
picks the canned resolution for the question's topic, and applies the
transform of every world feature the system prompt asks for. Given tools,
it calls the tool the question asks for (a word of its name in the question,
else in the last user message), once, and a checker tool before it when the
system prompt asks to check first (cycle.testing.offline.tools), then answers.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from cycle.records import Message, ToolCall, ToolDef
from cycle.testing.offline.tools import asks_to_check_first, is_checker
from cycle.testing.offline.world import Facts, answer, parse_facts

# words in tool names that say nothing about what the tool is for
_TOOL_VERBS = frozenset({
    "get", "set", "lookup", "look", "up", "find", "search", "check", "fetch", "query", "list",
    "read", "tool", "api", "do", "make", "run", "the", "a", "of", "by", "for",
})


# nouns nearly every support message has: they match a tool only when nothing else does
_WEAK_NOUNS = frozenset({"order", "account", "customer", "item", "product"})


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


def _words(text: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[a-z]+", text.lower())}


def _matching(tools: list[ToolDef], words: set[str]) -> ToolDef | None:
    """The first tool whose name shares a word with ``words``; a tool matched only by a
    word every support message has ("order") yields to one matched by a telling word."""
    weak = None
    for tool in tools:
        parts = {_stem(p) for p in re.split(r"[^a-z]+", tool.name.lower()) if len(p) >= 3}
        found = (parts - _TOOL_VERBS) & words
        if found - _WEAK_NOUNS:
            return tool
        if found and weak is None:
            weak = tool
    return weak


def _tool_call(messages: list[Message], tools: list[ToolDef], facts: Facts,
               system: str) -> ToolCall | None:
    """The next call this user turn needs: the checker first when the system prompt asks
    for one (see cycle.testing.offline.tools), then the goal tool; None once done."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    if last_user is None:
        return None
    called = {m.name for m in messages[last_user:] if m.role == "tool"}
    goal = _matching(tools, _words(facts.question)) or _matching(
        tools, _words(messages[last_user].content))
    if goal is None:
        return None
    plan = [goal]
    if asks_to_check_first(system):
        checker = next((t for t in tools if t is not goal and is_checker(t.description)), None)
        if checker is not None:
            plan.insert(0, checker)
    for tool in plan:
        if tool.name not in called:
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
        call = _tool_call(messages, tools, facts, system)
        if call is not None:
            return AgentReply("", (call,), ())
    text, applied = answer(system, facts)
    return AgentReply(text, (), tuple(applied))
