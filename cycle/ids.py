"""The clock and the ids of what cycle stores: one of each, so every row's time and
every run's and cycle's id read the same."""

from __future__ import annotations

import secrets
import uuid
from datetime import UTC, datetime


def now_iso() -> str:
    """Now, in UTC, as stored: ISO 8601 with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def new_run_id() -> str:
    """A short, sortable, unique run id: run-YYYYmmdd-HHMMSS-xxxxxx."""
    return "run-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def new_cycle_id() -> str:
    """A sortable, readable cycle id: ``c-20250101-120000-ab12cd``."""
    return datetime.now(UTC).strftime("c-%Y%m%d-%H%M%S-") + secrets.token_hex(3)
