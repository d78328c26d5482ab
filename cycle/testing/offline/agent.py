"""The offline agent: a canned answer, edited by the directives the system prompt gives.

It reads the facts (customer, order, question) from the user messages,
picks the canned resolution for the question's topic, and applies the
transform of every world feature the system prompt asks for, and of every feature
the prompt's few-shot examples show (an answer of an example that greets, greets):
a model imitates its demonstrations. The examples' own messages give no facts. Given tools,
it calls the tool the question asks for (a word of its name in the question,
else in the last user message), once, and a checker tool before it when the
system prompt asks to check first (cycle.testing.offline.tools), then answers.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from msgspec import Struct

from cycle.records import Message, ToolCall, ToolDef
from cycle.testing.offline.tools import asks_to_check_first, asks_to_collect_first, is_checker
from cycle.testing.offline.world import _ORDER_NUMBER, Facts, answer, parse_facts

# words in tool names that say nothing about what the tool is for
_TOOL_VERBS = frozenset({
    "get", "set", "lookup", "look", "up", "find", "search", "check", "fetch", "query", "list",
    "read", "tool", "api", "do", "make", "run", "the", "a", "of", "by", "for",
})


# nouns nearly every support message has: they match a tool only when nothing else does
_WEAK_NOUNS = frozenset({"order", "account", "customer", "item", "product"})


class AgentReply(Struct, frozen=True):
    """What the agent says, the tool calls it makes and which features it applied."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    applied: tuple[str, ...]


_STATED = re.compile(r"\b(?:my|the) ([a-z][a-z ]{1,30}?) (?:is|was|are|were) ([^.!?]+)", re.IGNORECASE)


def _stated(text: str) -> dict[str, str]:
    """The details a user states in prose: "My order number is A-1." -> {order number: A-1}."""
    return {m.group(1).lower(): m.group(2).strip() for m in _STATED.finditer(text or "")}


def _facts(messages: list[Message]) -> tuple[Facts, dict[str, str]]:
    """What the user messages say, and the details stated in prose. A message that only
    states details ("My order number is A-1.") answers a question: it does not replace
    the user's request."""
    customer = order = None
    question = ""
    details: dict[str, str] = {}
    for m in messages:
        if m.role != "user":
            continue
        f = parse_facts(m.content)
        stated = _stated(m.content)
        details.update(stated)
        customer = f.customer or customer
        order = f.order or order or next(
            (found.group(1) for k, v in stated.items() if "order" in k
             for found in [_ORDER_NUMBER.search(v)] if found), None)
        if not (stated and _STATED.sub("", m.content).strip(" .,!?\n").lower() in ("", "also")):
            question = f.question or question
    return Facts(customer=customer, order=order, question=question), details


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
               details: dict[str, str], system: str) -> ToolCall | str | None:
    """The next call this user turn needs: the checker first when the system prompt asks
    for one (see cycle.testing.offline.tools), then the goal tool; None once done. When
    the system prompt asks to collect details first and a call would go out with a
    required argument unknown, the question that asks for them instead."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    if last_user is None:
        return None
    # a tool that answered earlier in the conversation is not called again; one that
    # failed may be retried in a later turn, with what the user has said since
    done = {m.name for m in messages[:last_user] if m.role == "tool" and not _failed(m)}
    called = done | {m.name for m in messages[last_user:] if m.role == "tool"}
    goal = _matching(tools, _words(facts.question)) or _matching(
        tools, _words(messages[last_user].content))
    if goal is None or goal.name in done:
        return None
    plan = [goal]
    if asks_to_check_first(system):
        checker = next((t for t in tools if t is not goal and is_checker(t.description)), None)
        if checker is not None:
            plan.insert(0, checker)
    plan = [t for t in plan if t.name not in called]
    if not plan:
        return None
    if asks_to_collect_first(system):
        missing = list(dict.fromkeys(
            name for tool in plan for name, value in _arguments(tool, facts, details).items()
            if value == "" and name in (tool.parameters.get("required") or [])))
        if missing:
            wanted = " and ".join(f"the {name.replace('_', ' ')}" for name in missing)
            return f"Could you give me {wanted}, please?"
    tool = plan[0]
    args = _arguments(tool, facts, details)
    digest = hashlib.sha256(f"{tool.name}{args}".encode()).hexdigest()[:12]
    return ToolCall(id=f"call_offline_{digest}", name=tool.name, arguments=args)


def _failed(message: Message) -> bool:
    """Whether a tool message reports a failure (cycle shows the model "error: ...")."""
    return message.content.startswith("error: ")


def _arguments(tool: ToolDef, facts: Facts, details: dict[str, str]) -> dict[str, Any]:
    props = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    args: dict[str, Any] = {}
    for name, spec in props.items():
        key = name.lower()
        said = next((v for k, v in details.items()
                     if set(k.split()) & set(key.split("_")) - {"the", "of", "id"}), None)
        value: Any
        if "order" in key and facts.order:
            value = facts.order
        elif ("name" in key or "customer" in key) and facts.customer:
            value = facts.customer
        elif said is not None and "order" not in key:
            value = said
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
    shown = tuple(m.content for m in messages if m.example and m.role == "assistant")
    messages = [m for m in messages if not m.example]
    facts, details = _facts(messages)
    if tools:
        call = _tool_call(messages, tools, facts, details, system)
        if isinstance(call, str):
            return AgentReply(call, (), ())
        if call is not None:
            return AgentReply("", (call,), ())
    text, applied = answer(system, facts, shown)
    return AgentReply(text, (), tuple(applied))
