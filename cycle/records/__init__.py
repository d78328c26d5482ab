"""Plain records: the values every layer of cycle passes around.

Messages and usage, prompts and their versions, agent answers, verdicts,
iteration and run results, suggestions, runs, cycles and rounds. All are
frozen pydantic models (validated when loaded, serialised as they are);
this package imports nothing of cycle but itself, and everything above
imports it.
"""

from cycle.records.cycles import CycleRow, RoundRow, RunRow
from cycle.records.messages import Message, Role, ToolCall, ToolDef, Usage
from cycle.records.prompt import Prompt
from cycle.records.results import (
    AgentResult,
    CaseStats,
    IterationResult,
    ResultSource,
    RoleUsage,
    RunResult,
    Stats,
    Status,
    SuiteStats,
    Verdict,
)
from cycle.records.suggestions import (
    PRIORITY_ORDER,
    Decision,
    Priority,
    RejectedSuggestion,
    ReviewRequest,
    StoredSuggestion,
    Suggestion,
    SuggestionType,
)
from cycle.records.trace import KINDS, EventKind, Trace, TraceEvent
from cycle.records.versions import (
    BUILTIN_PROMPTS,
    HEAD,
    IMPROVER_PROMPT_ID,
    JUDGE_PROMPT_ID,
    PRODUCTION,
    SOURCES,
    LabelMove,
    PromptSummary,
    Source,
    Version,
)

__all__ = [
    "BUILTIN_PROMPTS",
    "HEAD",
    "IMPROVER_PROMPT_ID",
    "JUDGE_PROMPT_ID",
    "KINDS",
    "PRIORITY_ORDER",
    "PRODUCTION",
    "SOURCES",
    "AgentResult",
    "CaseStats",
    "CycleRow",
    "Decision",
    "EventKind",
    "IterationResult",
    "LabelMove",
    "Message",
    "Priority",
    "Prompt",
    "PromptSummary",
    "RejectedSuggestion",
    "ResultSource",
    "ReviewRequest",
    "Role",
    "RoleUsage",
    "RoundRow",
    "RunResult",
    "RunRow",
    "Source",
    "Stats",
    "Status",
    "StoredSuggestion",
    "Suggestion",
    "SuggestionType",
    "SuiteStats",
    "ToolCall",
    "ToolDef",
    "Trace",
    "TraceEvent",
    "Usage",
    "Verdict",
    "Version",
]
