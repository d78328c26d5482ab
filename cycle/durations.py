"""Durations as people write them in YAML: seconds, or "90s", "10m", "2h", "7d"."""

from __future__ import annotations

import re
from typing import Any

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d|day|days)?\s*$")
_UNIT = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600,
         "d": 86400, "day": 86400, "days": 86400}


def parse_duration(value: Any, where: str) -> float:
    """Seconds from a positive number or "90s" / "10m" / "2h" / "7d"; ValueError names ``where``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    m = _DURATION.match(str(value))
    if not m or float(m.group(1)) <= 0:
        raise ValueError(
            f"{where}: {value!r} is not a duration; write seconds or e.g. '90s', '10m', '2h', '7d'"
        )
    return float(m.group(1)) * _UNIT[m.group(2)]
