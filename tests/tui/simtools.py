"""Real tool functions for the simulate tests (imported by path from a prompt file)."""

import os

CALLS: list[str] = []


def find_order(order: str) -> dict:
    """The real order system: it raises for an order it does not know."""
    CALLS.append(order)
    if order == "keyed":  # a tool whose error quotes the environment's key
        raise PermissionError(f"the order system refused the key {os.environ['SHOP_API_KEY']}")
    if not order.startswith("A-"):
        raise LookupError(f"no order {order}")
    return {"order": order, "status": "shipped"}
