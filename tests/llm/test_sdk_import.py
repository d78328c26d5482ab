"""A provider's SDK is imported by the first live call that needs it, with the collector
paused, and frozen with the rest of what loading left when the process settled its heap
(cycle.heap.settle). Counted in a fresh interpreter: the collector is per process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CODE = """
import gc, json, sys
from cycle import heap
if sys.argv[2] == "settled":
    heap.own()  # as the cycle command does
    heap.settle()
before = gc.get_freeze_count()
module = heap.import_module(sys.argv[1])
after = gc.get_freeze_count()
again = heap.import_module(sys.argv[1])
print(json.dumps({"enabled": gc.isenabled(), "frozen": after - before, "same": again is module,
                  "frozen again": gc.get_freeze_count() - after, "name": module.__name__}))
"""


def first_import(module: str, process: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", CODE, module, process], check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("module", ["openai", "google.genai.types"])
def test_a_settled_process_freezes_the_sdk_it_imports_once(module: str) -> None:
    seen = first_import(module, "settled")
    assert seen["name"] == module and seen["enabled"] is True and seen["same"] is True
    assert seen["frozen"] > 20_000  # the SDK's modules and models: never walked again
    assert seen["frozen again"] == 0  # already imported: nothing else is frozen


def test_a_process_that_did_not_settle_freezes_nothing() -> None:
    """A caller's own process (a script, pytest) keeps its collector as it was."""
    seen = first_import("openai", "unsettled")
    assert seen["enabled"] is True and seen["frozen"] == 0


def test_a_module_that_cannot_be_imported_raises_in_the_caller() -> None:
    """The import runs on a thread of its own (a fresh stack): its failure is the caller's,
    as importlib's would be, so that a missing SDK is named as ever."""
    from cycle import heap

    with pytest.raises(ModuleNotFoundError) as raised:
        heap.import_module("cycle_no_such_sdk.types")
    assert raised.value.name == "cycle_no_such_sdk"
