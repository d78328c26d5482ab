"""An agent that fills the disk of the reports while it runs (the disk fills up after
the check before paying, as another process on the machine would fill it)."""

from __future__ import annotations

import os
import shutil

DISK = os.environ.get("CYCLE_TEST_DISK", "")


def fills_the_disk(inp) -> str:
    filler = os.path.join(DISK, "filler")
    if not os.path.exists(filler):
        free = shutil.disk_usage(DISK).free
        with open(filler, "wb") as f:
            f.write(b"\0" * max(free - 64 * 1024, 0))
    return "a long answer " * 20_000
