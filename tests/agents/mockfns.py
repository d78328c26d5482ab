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


def approver(prompt, context):
    """A user agent: approves refunds under 50, remembers it in the state."""
    import json

    args = json.loads(prompt)
    earlier = [t for t, _p, _a in context["session"]]
    if args.get("amount", 0) < 50:
        return with_state({"approved": True, "asked_before": earlier},
                          {"user.approvals": len(earlier) + 1})
    return {"approved": False}


def say_amount(arguments):
    return f"Do you approve a refund of {arguments['amount']} EUR?"


def yes_no(answer):
    return "yes" if answer.strip().lower().startswith("y") else "no"
