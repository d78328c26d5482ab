"""Mock functions and real tool functions imported by path in the tests."""

from cycle.agents.tools import ToolContext, with_state

CALLS: list[str] = []


def refund(arguments: dict, ctx: ToolContext):
    """A mock: approves, and records the refund in the session state."""
    already = ctx.state.get("session", {}).get("refunded")
    if already:
        return {"ok": False, "reason": "already refunded"}
    return with_state({"ok": True, "amount": 20}, {"session.refunded": arguments["order"],
                                                    "user.refunds": 1})


def real_lookup(order: str, verbose: bool = False) -> dict:
    """Look an order up in the real system.

    Args:
        order: the order number, e.g. A-1
        verbose: include the history
    """
    CALLS.append(order)
    return {"order": order, "status": "shipped"}


def unserialisable(arguments: dict, ctx: ToolContext):
    return object()
