"""A "real" tool module: each call leaves a mark (the side effect a mock must prevent)."""

from __future__ import annotations

RAN: list[str] = []


def refund(order: str, amount: float = 0.0) -> dict:
    RAN.append(f"refund {order}")
    return {"refunded": order, "real": True}


async def lookup(order: str) -> dict:
    RAN.append(f"lookup {order}")
    return {"order": order, "real": True}
