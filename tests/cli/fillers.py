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


def fills_the_disk_once(ctx) -> bool:
    """A check that fills the store's disk the first time it runs (round 0 of a cycle)."""
    filler = os.path.join(DISK, "filler")
    once = os.path.join(os.path.dirname(DISK), "filled-once")  # beside the disk, not on it
    if not os.path.exists(once):
        open(once, "w").close()
        with open(filler, "wb") as f:  # to the last byte: no page is left to write
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
    return True
