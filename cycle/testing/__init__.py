"""Fakes that are part of the product: a scripted model and a loopback provider server.

Names load lazily so that ``python -m cycle.testing.server`` does not import
the server module twice.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "script": "cycle.testing.scripted",
    "unscript": "cycle.testing.scripted",
    "clear_scripts": "cycle.testing.scripted",
    "Script": "cycle.testing.scripted",
    "ScriptedAPI": "cycle.testing.scripted",
    "LoopbackServer": "cycle.testing.server",
    "Fault": "cycle.testing.server",
    "Reply": "cycle.testing.server",
    "ChatRequest": "cycle.testing.server",
}

__all__ = [
    "ChatRequest", "Fault", "LoopbackServer", "Reply", "Script", "ScriptedAPI",
    "clear_scripts", "script", "unscript",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cycle.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
