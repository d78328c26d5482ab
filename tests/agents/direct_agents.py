"""Python agents that call their declared tools directly, not through the tools handle."""

from __future__ import annotations

import json

from tests.agents import realtools
from tests.agents.realtools import lookup, refund


def refunds_directly(inp: dict) -> str:
    """Sync (runs in a worker thread): the name this module imported."""
    return json.dumps(refund(inp["order"], amount=5))


def refunds_by_attribute(inp: dict) -> str:
    """Through the module attribute, looked up at call time."""
    return json.dumps(realtools.refund(order=inp["order"]))


async def looks_up_directly(inp: dict) -> str:
    return json.dumps(await lookup(inp["order"]))


async def refunds_from_async_code(inp: dict) -> str:
    return json.dumps(refund(inp["order"]))


def swallows_failures(inp: dict) -> str:
    """Catches whatever the tool raises and claims success."""
    try:
        refund(inp["order"])
    except Exception:  # noqa: BLE001, S110 - the point of the test
        pass
    return "mocked: all good"
