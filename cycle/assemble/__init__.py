"""The one place a cycle.yaml becomes objects: models, budget, cache, cases, agent,
judge, improver, stop condition, and the ``Runner`` and ``Loop`` built from them.

    loaded = load_config("cycle.yaml")
    suite = build_suite(loaded, store=store, bus=bus)          # a run
    loop = build_loop(loaded, store=store, reviewer=reviewer)  # a cycle

Below this package nothing reads a config file: ``Runner`` and ``Loop`` take objects.
"""

from cycle.assemble.config import CycleConfig, LoadedConfig, load_config, load_prompt
from cycle.assemble.cycle import build_loop, prepare
from cycle.assemble.improve import ImproveConfig, load_improve_config
from cycle.assemble.suite import Suite, build_suite, open_cache, validate_suite

__all__ = [
    "CycleConfig", "ImproveConfig", "LoadedConfig", "Suite", "build_loop", "build_suite",
    "load_config", "load_improve_config", "load_prompt", "open_cache", "prepare",
    "validate_suite",
]
