"""Importing user code by path (``package.module:name``): checks, agents, mocks, tools,
stop predicates. One function, so that every bad path reads the same."""

from __future__ import annotations

import importlib
from typing import Any

from cycle.errors import ConfigError


def import_object(path: str, *, what: str) -> Any:
    """Import ``package.module:attribute``; a bad path is a ConfigError naming it."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigError(
            f"'{path}' is not an import path", field=what, hint="Write it as package.module:name."
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"cannot import module '{module_name}': {e}", field=what) from e
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            raise ConfigError(f"module '{module_name}' has no '{attr}'", field=what) from e
    return obj
