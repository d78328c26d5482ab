"""The offline world's tools: which tool the agent calls, and the one habit the improver
can teach it: check before acting.

The agent calls the tool the question asks for (its *goal*: a tool whose name shares
a word with the question, else with the whole user message). Before the goal it
calls a *checker* when both of these hold:

- the system prompt asks to check first: "check ... before", "verify ... before",
  "look ... up ... before" in one clause, not negated ("never check before" does
  not count);
- another tool's description says it checks: "check" or "verify" in it.

So neither edit alone changes what the agent does; together they do. The improver
reads a failed ``tool_order`` check ("calls: refund; expected lookup_order ->
refund") and proposes both: the directive for the system prompt and a sentence for
the first tool's description.

A second habit, for conversations: *collect before acting*. When the system prompt
asks for it ("ask ... for ... before", not negated) and a call would go out with a
required argument the user has not given, the agent asks for the missing details
instead ("Could you give me the order and the reason, please?"). The improver
proposes it when a low case's transcript shows a call with an empty argument.
"""

from __future__ import annotations

import re
from typing import Any

CHECK_FIRST = re.compile(
    r"\b(check|verify|look\s+(?:\w+\s+){0,3}up)\b[^.!?;\n]*\bbefore\b", re.IGNORECASE)
CHECKER = re.compile(r"\b(check|verif)", re.IGNORECASE)
_NEGATION = re.compile(r"\b(never|don'?t|do not|no need to)\b[^.!?;\n]*$", re.IGNORECASE)
_EXPECTED = re.compile(r"expected ([\w.-]+(?: -> [\w.-]+)+) \((?:in_order|exact)\)")

COLLECT_FIRST = re.compile(r"\bask\b[^.!?;\n]*\b(for|about)\b[^.!?;\n]*\bbefore\b", re.IGNORECASE)
_EMPTY_ARGUMENT = re.compile(r"^assistant -> ([\w.-]+)\(.*\b\w+=(?:,|\))")
COLLECT_DIRECTIVE = ("Ask the customer for every detail a tool needs (such as the order "
                     "number and the reason) before you call it.")
DIRECTIVE = "Check the order before you act on it: look it up first."
CHECKER_SENTENCE = "Call it first to check an order before a refund or any other change."


def _asks(pattern: re.Pattern[str], system: str) -> bool:
    """Whether the system prompt holds ``pattern`` in a clause that does not negate it."""
    return any(not _NEGATION.search(system[: m.start()]) for m in pattern.finditer(system or ""))


def asks_to_check_first(system: str) -> bool:
    """Whether the system prompt asks to check before acting (and does not negate it)."""
    return _asks(CHECK_FIRST, system)


def _append(system: str, directive: str) -> tuple[str, str]:
    """(current_value, suggested_value) adding ``directive`` after the prompt's last line,
    or appending it when that line is not unique in the prompt."""
    last = system.rstrip().splitlines()[-1].strip() if system.strip() else ""
    if last and system.count(last) == 1:
        return last, f"{last} {directive}"
    return "", directive


def asks_to_collect_first(system: str) -> bool:
    """Whether the system prompt asks to collect missing details before calling a tool."""
    return _asks(COLLECT_FIRST, system)


def collect_suggestions(prompt: dict[str, Any], cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The edit that makes the agent ask for missing details, when a low case's transcript
    shows a tool called with an empty argument."""
    system = str(prompt.get("system") or "")
    ids = [str(c.get("id")) for c in cases
           if any(_EMPTY_ARGUMENT.match(str(line)) for line in c.get("transcript") or [])]
    if not ids or asks_to_collect_first(system):
        return []
    tools = sorted({m.group(1) for c in cases for line in c.get("transcript") or []
                    for m in [_EMPTY_ARGUMENT.match(str(line))] if m})
    current, suggested = _append(system, COLLECT_DIRECTIVE)
    return [{
        "type": "system_prompt", "priority": "high",
        "current_value": current, "suggested_value": suggested,
        "reasoning": (f"In {len(ids)} low-scoring case(s) the agent called {', '.join(tools)} "
                      "with an argument left empty instead of asking the customer for it."),
        "expected_improvement": f"complete tool calls on {len(ids)} case(s)",
        "target_cases": ids,
    }]


def is_checker(description: str) -> bool:
    return CHECKER.search(description or "") is not None


def expected_orders(cases: list[dict[str, Any]]) -> list[list[str]]:
    """The tool orders failed ``tool_order`` checks asked for, from the verdicts' reasoning."""
    out: list[list[str]] = []
    for case in cases:
        for v in case.get("verdicts") or []:
            m = _EXPECTED.search(str(v.get("reasoning", ""))) if isinstance(v, dict) else None
            if m:
                order = m.group(1).split(" -> ")
                if order not in out:
                    out.append(order)
    return out


def trajectory_suggestions(prompt: dict[str, Any], cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The edits that make the agent call the first tool of a failed order before the rest."""
    system = str(prompt.get("system") or "")
    tools = {t.get("name"): t for t in prompt.get("tools") or [] if isinstance(t, dict)}
    ids = [str(c.get("id")) for c in cases if expected_orders([c])]
    out: list[dict[str, Any]] = []
    for order in expected_orders(cases):
        first = tools.get(order[0])
        if first is None:
            continue
        why = (f"In {len(ids)} low-scoring case(s) the agent called {order[-1]} without calling "
               f"{order[0]} first, as the tool_order check expects.")
        if not asks_to_check_first(system):
            current, suggested = _append(system, DIRECTIVE)
            out.append({
                "type": "system_prompt", "priority": "high",
                "current_value": current, "suggested_value": suggested,
                "reasoning": why + " The system prompt never asks to check before acting.",
                "expected_improvement": f"passes tool_order on {len(ids)} case(s)",
                "target_cases": ids,
            })
        description = str(first.get("description") or "")
        if not is_checker(description):
            out.append({
                "type": "tool_description", "tool": order[0], "priority": "high",
                "current_value": description,
                "suggested_value": f"{description} {CHECKER_SENTENCE}".strip(),
                "reasoning": why + f" Nothing in {order[0]}'s description says it is the check.",
                "expected_improvement": f"passes tool_order on {len(ids)} case(s)",
                "target_cases": ids,
            })
        break  # one order at a time: the next round sees what changed
    return out
