"""The collector of a process the ``cycle`` command owns, tuned for a run.

    heap.own()             # cycle.cli.main: the command owns its process; collector off
    heap.settle()          # a run has loaded: freeze what loading left, collect rarely
    heap.resume()          # a command that never settles: collector back on
    heap.import_module(n)  # a provider's SDK, on a fresh stack, frozen with the rest

In any other process (a test's CliRunner, a script, pytest's plugin) ``settle`` and
``resume`` leave the caller's collector alone. Figures: benchmarks/RESULTS.md, start-up.
"""

from __future__ import annotations

import gc
import importlib
import sys
import threading
from types import ModuleType

#: allocations between young collections (CPython's default is 700). A run
#: allocates and drops many small containers per model call (SDK models, httpx
#: headers, verdicts); collecting them 14 times less often lets most die by
#: reference count before a collection ever walks them (benchmarks/RESULTS.md)
YOUNG_THRESHOLD = 10_000

_owned = False
_settled = False


def own() -> None:
    """The ``cycle`` command owns this process. Loading (the modules, the config, the
    cases) allocates a great deal and frees almost none of it: the collector's 200-odd
    passes over it cost about 30 ms of start-up and found some 670 objects of
    import-time garbage, however many cases. It is off until loading is done:
    ``settle``, or ``resume`` for a command that does not settle."""
    global _owned
    _owned = True
    gc.disable()
    _trim_eagerly()


#: bytes of free memory at the top of glibc's heap that it keeps rather than returns
TRIM_THRESHOLD = 768 * 1024
#: blocks larger than this get a mapping of their own, returned the moment they are freed
MMAP_THRESHOLD = 384 * 1024


def _trim_eagerly() -> None:
    """Fix glibc's thresholds (what ``MALLOC_TRIM_THRESHOLD_`` and
    ``MALLOC_MMAP_THRESHOLD_`` do). Left dynamic, each large block freed raises both, up to
    32 MB: after a run's batched writes and reads free their buffers, later large blocks
    come from the heap instead of their own mappings and the heap's free top stays mapped.
    A 20,000-case run peaked at 105 MB dynamic and 101 MB fixed (benchmarks/RESULTS.md,
    scale).

    The mmap threshold is above asyncio's socket read (256 KB, shrunk to what arrived):
    at glibc's default (128 KB, which a fixed trim threshold pins) every read was an mmap,
    an mremap and a munmap, 3 system calls and a page fault an answer, some 30 us of a
    call's 2.5 ms at 16 calls in flight (benchmarks/RESULTS.md, issue 40, session 27). The
    trim threshold is above what such a read leaves free at the heap's top, so that the
    next read does not grow the heap again. Nothing on another C library."""
    if sys.platform != "linux":
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: libc's among them
    except (OSError, AttributeError):  # musl has no mallopt
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def resume() -> None:
    """Turn the collector back on, as ever (a command that loads no suite)."""
    if _owned:
        gc.enable()


def settle() -> None:
    """Tune the collector for a long run, once everything is loaded.

    What loading left alive (the SDKs' modules and models, the config, the cases,
    a few hundred thousand objects) lives until the process exits: ``gc.freeze``
    moves it to a permanent generation that full collections skip. With the larger
    young threshold this took a 2,000-case run's collector pauses from about 200 ms
    to 80 ms, and its longest from 100 ms to 40 ms. No collection first: one cost
    20-35 ms of start-up and found no garbage to keep out of the frozen generation,
    at 1, 1,000 or 20,000 cases.
    """
    global _settled
    if not _owned:
        return
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    gc.enable()
    _settled = True


def import_module(name: str) -> ModuleType:
    """``importlib.import_module``, for a module as large as a provider's SDK (imported
    by the first live call that needs it: a run whose answers all come from the cache or
    the journal never loads it).

    The import allocates some 100,000 objects that live as long as the process: the
    collector is paused while it runs (its passes over them would find nothing), and
    once the process has settled, what the import added is frozen with the rest, so
    that the run's collections never walk it (2% of a one-case run's instructions, by
    callgrind)."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _import_on_a_fresh_stack(name)
    finally:
        if collecting:
            if _settled:
                # freezes the few objects of the calls in flight too: the acyclic ones
                # are freed as ever, a cyclic one would stay (once, a handful of calls)
                gc.freeze()
            gc.enable()


def _import_on_a_fresh_stack(name: str) -> ModuleType:
    """Import ``name`` in a thread of its own while the caller waits for it.

    CPython 3.11 keeps a thread's Python frames in 16 KB chunks, mapped when a call needs
    a new one and unmapped as soon as it returns. A run's first live call comes deep in
    the main thread's stack, near the end of its first chunk, and the openai SDK's import
    crossed that edge 6,214 times (strace: a 16 KB mmap and a munmap each; 299 this way),
    about 50 ms of a run's start-up (benchmarks/RESULTS.md, issue 40, session 26). A new
    thread's stack starts empty. The caller must not be importing a module itself (its
    import lock would be held): the SDKs are imported by calls, never at import time."""
    done: list[ModuleType | BaseException] = []

    def load() -> None:
        try:
            done.append(importlib.import_module(name))
        except BaseException as error:  # noqa: BLE001 - raised again in the caller
            done.append(error)

    thread = threading.Thread(target=load, name="cycle-import", daemon=True)
    thread.start()
    thread.join()
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]
