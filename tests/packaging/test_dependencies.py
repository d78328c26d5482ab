"""pyproject's dependencies against what cycle imports: a module cycle imports must come
from a distribution it declares (not one that happens to come with another), and a lower
bound must be a version cycle runs on. Both were wrong for a user whose environment held
older versions than the developers' (a fresh install picks the newest and hides it)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def _declared() -> dict[str, Requirement]:
    reqs = [Requirement(r) for r in PROJECT["dependencies"]]
    for extra, extras in PROJECT["optional-dependencies"].items():
        if extra != "dev":  # the dev extra is the test suite's, never a user's
            reqs += [Requirement(r) for r in extras]
    return {_name(r.name): r for r in reqs}


def _imported_top_modules() -> dict[str, str]:
    """Each top-level module cycle imports (outside the standard library) -> a file doing it."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "cycle").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "cycle" and top not in sys.stdlib_module_names:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


# the test suite's own, imported by modules that only the tests and pytest load
TEST_ONLY = {"pytest", "_pytest"}


def test_every_module_cycle_imports_comes_from_a_declared_distribution():
    # cycle.llm.tls imports httpcore2 and cycle.agents.agent httpx2: both came only with
    # the openai SDK of the day (an older one brought httpx), so `cycle doctor` failed
    # with "internal error: No module named 'httpcore2'" where openai 1.x was installed
    declared = _declared()
    dists = packages_distributions()
    missing = {}
    for top, where in _imported_top_modules().items():
        if top in TEST_ONLY:
            continue
        owners = {_name(d) for d in dists.get(top, [top])}
        if not owners & set(declared):
            missing[top] = (where, sorted(owners))
    assert missing == {}, "imported, not declared in pyproject.toml"


# The lowest version of each dependency cycle was seen to fail on, and what failed (a user's
# environment with the old bound satisfied): the declared bound must be above it.
FAILED_ON = {
    "textual": ("1.0.0", "the TUI's stylesheet: text-overflow, $text-accent are unknown"),
    "openai": ("3.14.0", "a gzip bomb is read whole, past max_response_mb (1.40: no httpx2)"),
    "google-genai": ("1.39.0", "Gemini batch jobs are never submitted (1.38: no aclose)"),
    "httpx2": ("2.12.0", "cycle doctor ended, now and then, with a traceback closing a stream"),
    "sqlite-utils": ("3.37", "No module named 'sqlite_utils.migrations': no store migrates"),
    "regex": ("2023.3.22", "the classic (a+)+ pattern runs into the timeout"),
    "opentelemetry-exporter-otlp-proto-http": ("1.39.1", "no collector: internal error"),
}


def test_no_declared_lower_bound_admits_a_version_cycle_failed_on():
    declared = _declared()
    admitted = {name: why for name, (version, why) in FAILED_ON.items()
                if declared[name].specifier.contains(Version(version))}
    assert admitted == {}
