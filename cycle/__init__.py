"""cycle: an improvement-cycle orchestrator for LLM prompts, with versioning.

    import cycle
    store = cycle.Store.open(".cycle/cycle.db")
    loaded = cycle.load_config("cycle.yaml")
    loop = cycle.build_loop(loaded, store=store, reviewer=cycle.AutoReviewer())
    result = asyncio.run(loop.run())

or, without a config file, ``cycle.Loop(start=..., cases=..., agent=..., judge=...,
improver=..., reviewer=..., store=..., stop=cycle.parse_stop({"max_rounds": 3}))``
(``help(cycle.Loop)`` says what each argument takes).

The public API is what ``__all__`` lists; everything else is internal and may
change. ``tests/test_public_api.py`` holds this surface.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cycle.agents import PromptAgent
    from cycle.agents.tools import ToolError, with_state
    from cycle.assemble import build_loop
    from cycle.assemble.config import CycleConfig, LoadedConfig, load_config
    from cycle.assemble.suite import Suite, build_suite
    from cycle.cases import TestCase, load_cases
    from cycle.errors import CycleError
    from cycle.evals.runner import Runner
    from cycle.events import Event, EventBus, JsonlSink
    from cycle.improve.apply import apply_suggestions
    from cycle.improve.improver import Improver
    from cycle.judge import Judge
    from cycle.judge.criteria import Criterion, CriterionConfig
    from cycle.llm.base import GenerateConfig, ModelAPI, ModelOutput
    from cycle.llm.budget import Budget
    from cycle.llm.cache import ResponseCache
    from cycle.llm.model import Model, ModelServices, RetryPolicy
    from cycle.llm.pricing import PriceTable
    from cycle.llm.registry import get_model, register_provider
    from cycle.loop import AutoReviewer, CycleResult, Loop, LoopSettings, PromptReviewer
    from cycle.loop.review import Reviewer
    from cycle.loop.stop import parse_stop
    from cycle.records import (
        CaseStats,
        Message,
        Prompt,
        ReviewRequest,
        RunResult,
        Stats,
        Suggestion,
        SuiteStats,
        ToolCall,
        ToolDef,
        Usage,
        Version,
    )
    from cycle.stats import describe, paired_difference
    from cycle.store import Store


#: public name -> the module it lives in; imported on first use (PEP 562), so that
#: ``import cycle`` (and the pytest plugin, and ``cycle --help``) loads nothing heavy
_WHERE: dict[str, str] = {
    "AutoReviewer": "cycle.loop",
    "Budget": "cycle.llm.budget",
    "CaseStats": "cycle.records",
    "Criterion": "cycle.judge.criteria",
    "CriterionConfig": "cycle.judge.criteria",
    "CycleConfig": "cycle.assemble.config",
    "CycleError": "cycle.errors",
    "CycleResult": "cycle.loop",
    "Event": "cycle.events",
    "EventBus": "cycle.events",
    "GenerateConfig": "cycle.llm.base",
    "Improver": "cycle.improve.improver",
    "JsonlSink": "cycle.events",
    "Judge": "cycle.judge",
    "LoadedConfig": "cycle.assemble.config",
    "Loop": "cycle.loop",
    "LoopSettings": "cycle.loop",
    "Message": "cycle.records",
    "Model": "cycle.llm.model",
    "ModelServices": "cycle.llm.model",
    "ModelAPI": "cycle.llm.base",
    "ModelOutput": "cycle.llm.base",
    "PriceTable": "cycle.llm.pricing",
    "Prompt": "cycle.records",
    "PromptAgent": "cycle.agents",
    "PromptReviewer": "cycle.loop",
    "ResponseCache": "cycle.llm.cache",
    "RetryPolicy": "cycle.llm.model",
    "ReviewRequest": "cycle.records",
    "Reviewer": "cycle.loop.review",
    "RunResult": "cycle.records",
    "Runner": "cycle.evals.runner",
    "Stats": "cycle.records",
    "Store": "cycle.store",
    "Suggestion": "cycle.records",
    "Suite": "cycle.assemble.suite",
    "SuiteStats": "cycle.records",
    "TestCase": "cycle.cases",
    "ToolCall": "cycle.records",
    "ToolDef": "cycle.records",
    "ToolError": "cycle.agents.tools",
    "Usage": "cycle.records",
    "Version": "cycle.records",
    "apply_suggestions": "cycle.improve.apply",
    "build_loop": "cycle.assemble",
    "build_suite": "cycle.assemble.suite",
    "describe": "cycle.stats",
    "get_model": "cycle.llm.registry",
    "load_cases": "cycle.cases",
    "load_config": "cycle.assemble.config",
    "paired_difference": "cycle.stats",
    "parse_stop": "cycle.loop.stop",
    "register_provider": "cycle.llm.registry",
    "with_state": "cycle.agents.tools",
}

__version__ = "0.1.0"

__all__ = [
    "AutoReviewer",
    "Budget",
    "CaseStats",
    "Criterion",
    "CriterionConfig",
    "CycleConfig",
    "CycleError",
    "CycleResult",
    "Event",
    "EventBus",
    "GenerateConfig",
    "Improver",
    "JsonlSink",
    "Judge",
    "LoadedConfig",
    "Loop",
    "LoopSettings",
    "Message",
    "Model",
    "ModelAPI",
    "ModelOutput",
    "ModelServices",
    "PriceTable",
    "Prompt",
    "PromptAgent",
    "PromptReviewer",
    "ResponseCache",
    "RetryPolicy",
    "ReviewRequest",
    "Reviewer",
    "RunResult",
    "Runner",
    "Stats",
    "Store",
    "Suggestion",
    "Suite",
    "SuiteStats",
    "TestCase",
    "ToolCall",
    "ToolDef",
    "ToolError",
    "Usage",
    "Version",
    "__version__",
    "apply_suggestions",
    "build_loop",
    "build_suite",
    "describe",
    "get_model",
    "load_cases",
    "load_config",
    "paired_difference",
    "parse_stop",
    "register_provider",
    "with_state",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'cycle' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
