"""Placeholders for an IN list of any length, in few shapes.

A statement is compiled once per distinct text and kept in the connection's statement
cache (Python's sqlite3 keeps 128). An IN list of n placeholders is a new text for every
n, and one of hundreds of placeholders is tens of kilobytes compiled: a long run that
writes and reads batches of every size filled that cache with them (9 MB outside Python's
heap for 166 sizes, measured), memory a run held to its end. So a list is padded to the
next power of two by repeating its last value, which changes nothing an IN matches: at
most ten shapes up to 512.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def in_list(values: Sequence[Any]) -> tuple[str, list[Any]]:
    """The placeholders of ``values`` (one or more) for ``IN (...)``, and the values to
    bind to them."""
    n = len(values)
    size = 1 << (n - 1).bit_length()
    return ",".join("?" * size), [*values, *[values[-1]] * (size - n)]
