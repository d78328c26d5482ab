"""The one place a cycle.yaml becomes objects: models, budget, cache, cases, agent,
judge, improver, stop condition, and the ``Runner`` and ``Loop`` built from them.

    loaded = load_config("cycle.yaml")
    suite = build_suite(loaded, store=store, bus=bus)          # a run
    loop = build_loop(loaded, store=store, reviewer=reviewer)  # a cycle

Below this package nothing reads a config file: ``Runner`` and ``Loop`` take objects.
The names are imported when first used: ``cycle run`` never imports the loop, the
improver or their prompts (about 0.1 s of start-up).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cycle.assemble.config import CycleConfig, LoadedConfig, load_config, load_prompt
    from cycle.assemble.cycle import build_loop, prepare
    from cycle.assemble.improve import ImproveConfig, load_improve_config
    from cycle.assemble.suite import Suite, build_suite, open_cache, validate_suite

_MODULE = {
    "CycleConfig": "config", "LoadedConfig": "config", "load_config": "config",
    "load_prompt": "config", "build_loop": "cycle", "prepare": "cycle",
    "ImproveConfig": "improve", "load_improve_config": "improve", "Suite": "suite",
    "build_suite": "suite", "open_cache": "suite", "validate_suite": "suite",
}

__all__ = [
    "CycleConfig", "ImproveConfig", "LoadedConfig", "Suite", "build_loop", "build_suite",
    "load_config", "load_improve_config", "load_prompt", "open_cache", "prepare",
    "validate_suite",
]


def __getattr__(name: str) -> Any:
    if name not in _MODULE:
        raise AttributeError(f"module 'cycle.assemble' has no attribute {name!r}")
    return getattr(importlib.import_module(f"cycle.assemble.{_MODULE[name]}"), name)
