"""Importing user code by path (``package.module:name``): checks, agents, mocks, tools,
stop predicates. One function, so that every bad path reads the same."""

from __future__ import annotations

import importlib
import traceback
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
    except SyntaxError as e:  # the user's own file: where it does not compile
        raise ConfigError(
            f"cannot import module '{module_name}': {e.msg} ({e.filename}, line {e.lineno})",
            field=what, hint="Fix the file, then run again.") from e
    except Exception as e:  # the module's own code raised as it loaded: theirs, not ours
        frame = traceback.extract_tb(e.__traceback__)[-1]
        raise ConfigError(
            f"cannot import module '{module_name}': loading it raised "
            f"{type(e).__name__}: {e} ({frame.filename}, line {frame.lineno})",
            field=what, hint="Fix the module, then run again (--debug shows the traceback).",
        ) from e
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            raise ConfigError(f"module '{module_name}' has no '{attr}'", field=what) from e
    return obj
