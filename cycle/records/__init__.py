"""Plain records: the values every layer of cycle passes around.

Messages and usage, prompts and their versions, agent answers, verdicts,
iteration and run results, suggestions, runs, cycles and rounds. All are
frozen pydantic models (validated when loaded, serialised as they are), but for
``RunResult``, a msgspec Struct that reads its results from the store when asked;
this package imports nothing of cycle but itself, and everything above
imports it.

Each name is imported from its module when first asked for (PEP 562): a run
never loads the cycle and suggestion records, and ``cycle run`` starts that
much sooner.
"""

from __future__ import annotations

import importlib
from typing import Any

#: each record's module, by name
_HOMES: dict[str, str] = {
    name: module
    for module, names in {
        "cycles": ("CycleRow", "JudgeKappa", "RoundRow", "RunRow", "ScreenRow"),
        "messages": ("Message", "Role", "ToolCall", "ToolDef", "Usage"),
        "prompt": ("Example", "Prompt"),
        "results": (
            "AgentResult",
            "CaseStats",
            "IterationResult",
            "MemberFigure",
            "MemberVerdict",
            "PanelFigure",
            "ResultSource",
            "RoleUsage",
            "RunResult",
            "Stats",
            "Status",
            "SuiteStats",
            "Verdict",
            "WithPeople",
        ),
        "suggestions": (
            "PRIORITY_ORDER",
            "Decision",
            "EditType",
            "Priority",
            "RejectedSuggestion",
            "ReviewRequest",
            "StoredSuggestion",
            "Suggestion",
            "SuggestionType",
        ),
        "scope": ("NO_SCOPE", "CallScope"),
        "trace": ("KINDS", "EventKind", "Trace", "TraceEvent"),
        "versions": (
            "ALL_PROMPTS",
            "BUILTIN_PROMPTS",
            "HEAD",
            "IMPROVER_PROMPT_ID",
            "JUDGE_PROMPT_ID",
            "PRODUCTION",
            "SOURCES",
            "LabelMove",
            "PromptSummary",
            "Protection",
            "Source",
            "Version",
        ),
    }.items()
    for name in names
}


def __getattr__(name: str) -> Any:
    module = _HOMES.get(name)
    if module is None:
        raise AttributeError(f"module 'cycle.records' has no attribute '{name}'")
    value = getattr(importlib.import_module(f"cycle.records.{module}"), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted(_HOMES)
