"""The public surface is exactly ``cycle.__all__``, and importing it stays light."""

import subprocess
import sys

import cycle


def test_all_names_exist_and_are_sorted():
    for name in cycle.__all__:
        assert hasattr(cycle, name), name
    assert list(cycle.__all__) == sorted(cycle.__all__)


def test_public_objects_come_from_cycle_modules():
    for name in cycle.__all__:
        obj = getattr(cycle, name)
        module = getattr(obj, "__module__", "cycle")
        assert module.startswith("cycle"), (name, module)


def test_import_does_not_load_sdks_or_the_tui():
    code = (
        "import sys, cycle; "
        "print(','.join(m for m in ('openai', 'google.genai', 'textual') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
