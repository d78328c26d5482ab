"""Functions that fill a test's small mounted disk while a run or cycle runs (the disk
fills up after the check before paying, as another process on the machine would fill
it). They refuse any folder that is not a mount point: never the machine's own disk."""

from __future__ import annotations

import os
import shutil


def _disk() -> str:
    """The small disk the test mounted (read at each call: a module is imported once per
    session, and an earlier test's disk is gone, its folder on the real disk again)."""
    disk = os.environ["CYCLE_TEST_DISK"]
    if not os.path.ismount(disk):
        raise RuntimeError(f"{disk} is not a mounted test disk: refusing to fill it")
    return disk


def fills_the_disk(inp) -> str:
    disk = _disk()
    filler = os.path.join(disk, "filler")
    if not os.path.exists(filler):
        free = shutil.disk_usage(disk).free
        with open(filler, "wb") as f:
            f.write(b"\0" * max(free - 64 * 1024, 0))
    return "a long answer " * 20_000


def fills_the_disk_once(ctx) -> bool:
    """A check that fills the store's disk the first time it runs (round 0 of a cycle)."""
    disk = _disk()
    filler = os.path.join(disk, "filler")
    once = os.path.join(os.path.dirname(disk), "filled-once")  # beside the disk, not on it
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
