"""Check functions that return what user code really returns at its edges (imported by
tests/cli/test_aggregation_edges.py through a python check)."""

from __future__ import annotations

from cycle.judge.checks import CheckOutcome


def ratio_of_nothing(ctx) -> float:
    """A share of zero items: numpy's 0/0, a NaN."""
    return float("nan")


def overflowing(ctx) -> CheckOutcome:
    return CheckOutcome(250.0, "counted twice")
