"""cycle: an improvement-cycle orchestrator for LLM prompts, with versioning.

The public API is what ``__all__`` lists; everything else is internal.
"""

from cycle.errors import CycleError
from cycle.events import Event, EventBus
from cycle.improve.suggestion import Suggestion
from cycle.llm.base import GenerateConfig, Message, ModelOutput, ToolCall, ToolDef, Usage
from cycle.prompt import Prompt

__version__ = "0.1.0"

__all__ = [
    "CycleError",
    "Event",
    "EventBus",
    "GenerateConfig",
    "Message",
    "ModelOutput",
    "Prompt",
    "Suggestion",
    "ToolCall",
    "ToolDef",
    "Usage",
    "__version__",
]
