"""The layers of cycle/, read from every module's imports (with ast), as the README's
"Where things are" draws them. Imports under TYPE_CHECKING and inside functions count:
a layer that needs a name from above it is in the wrong place, however it imports it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "cycle"

#: lowest first; a unit may import only units of its own rank or below
#: (a module of cycle/ is a unit by its top-level name: "cycle.llm", "cycle.cases", ...)
LAYERS: list[set[str]] = [
    {"cycle.errors", "cycle.environment", "cycle.aio", "cycle.heap", "cycle.safetext",
     "cycle.patterns", "cycle.authors"},
    {"cycle.records", "cycle.durations", "cycle.words", "cycle.ids"},
    {"cycle.events", "cycle.yamlload", "cycle.imports", "cycle.query", "cycle.stats"},
    {"cycle.llm"},
    {"cycle.prompts"},
    {"cycle.store"},
    {"cycle.judge"},
    {"cycle.cases", "cycle.mocks"},
    {"cycle.agents"},
    {"cycle.evals"},
    {"cycle.improve"},
    {"cycle.loop"},
    {"cycle.formats"},
    {"cycle.simulate"},  # cycle simulate's session: agents' tools, cases, ADK EvalSets
    {"cycle.assemble"},
    {"cycle.report", "cycle.progress"},
    {"cycle.tui"},
    {"cycle.cli", "cycle.__main__", "cycle.pytest_plugin"},
    {"cycle"},  # the package itself: the public API
]
#: the test support plugs in from the side: it may import what it fakes, nothing imports it
SIDE = {"cycle.testing"}
RANK = {unit: n for n, units in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        name = ".".join(rel.parts)
        out[name.removesuffix(".__init__")] = path
    return out


def imports_of(name: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            # "from cycle import events" imports the module cycle.events
            found |= {f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in ALL}
    return {m for m in found if m == "cycle" or m.startswith("cycle.")}


ALL = modules()
GRAPH = {name: imports_of(name, path) for name, path in ALL.items()}


def edges() -> list[tuple[str, str]]:
    return [(a, b) for a, targets in GRAPH.items() for b in targets
            if unit_of(a) != unit_of(b) and not (b == "cycle" and a.startswith("cycle."))]


def test_every_unit_has_a_layer():
    units = {unit_of(m) for m in ALL}
    assert units - set(RANK) - SIDE == set()


@pytest.mark.parametrize("rule", ["layers", "tui", "cli", "testing", "store", "llm", "records",
                                  "agents"])
def test_layer_rules(rule: str):
    bad = []
    for a, b in edges():
        ua, ub = unit_of(a), unit_of(b)
        if b == "cycle":
            continue
        if rule == "layers" and ua not in SIDE and ub not in SIDE and RANK[ub] > RANK[ua]:
            bad.append(f"{a} imports {b}, a layer above it")
        # the CLI is the face that opens the TUI; nothing of the core may
        if rule == "tui" and ub == "cycle.tui" and ua not in ("cycle.tui", "cycle.cli"):
            bad.append(f"{a} imports the TUI")
        if rule == "cli" and ub == "cycle.cli" and ua not in ("cycle.cli", "cycle.__main__"):
            bad.append(f"{a} imports the CLI")
        if rule == "testing" and ub in SIDE and ua not in SIDE:
            bad.append(f"{a} imports the test support (providers register by entry point)")
        if rule == "store" and ua == "cycle.store" and ub in (
                "cycle.evals", "cycle.judge", "cycle.improve", "cycle.loop", "cycle.report"):
            bad.append(f"{a} imports {b}")
        if rule == "llm" and ua == "cycle.llm" and ub not in (
                "cycle.records", "cycle.errors", "cycle.events", "cycle.heap"):
            bad.append(f"{a} imports {b}")
        # plain data and the helpers that read it: errors, and the user's patterns (argument
        # matching by regex)
        if rule == "records" and ua == "cycle.records" and ub not in ("cycle.errors",
                                                                       "cycle.patterns"):
            bad.append(f"{a} imports {b}")
        # how a case is played needs nothing of how it is judged (the trace helpers both
        # read are records); a case holds its criteria, so cases may
        if rule == "agents" and ua == "cycle.agents" and ub == "cycle.judge":
            bad.append(f"{a} imports {b}")
    assert bad == []


def test_no_import_cycle_between_units():
    graph: dict[str, set[str]] = {}
    for a, b in edges():
        graph.setdefault(unit_of(a), set()).add(unit_of(b))
    seen: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> list[str] | None:
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                return path + [node, nxt]
            if nxt not in seen:
                found = visit(nxt, path + [node])
                if found:
                    return found
        seen[node] = 2
        return None

    for start in sorted(graph):
        if start not in seen:
            cycle_path = visit(start, [])
            assert cycle_path is None, " -> ".join(cycle_path)


def test_the_rules_see_a_violation(tmp_path):
    """The reader itself: an upward import written anywhere in a module is found."""
    sample = tmp_path / "m.py"
    sample.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from cycle.loop import Loop\n\ndef f():\n    from ..tui import app\n")
    assert imports_of("cycle.store.m", sample) >= {"cycle.loop", "cycle.tui"}


def untyped_contexts(path: Path) -> list[str]:
    """Parameters named ``context`` typed as a free dict (``dict[str, Any]``): a call's
    scope is a CallScope, whose fields a reader and a type checker can see."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                hint = ast.unparse(a.annotation) if a.annotation is not None else ""
                if a.arg == "context" and hint.replace(" ", "").startswith("dict[str,Any]"):
                    found.append(f"{path.name}:{node.lineno} {node.name}({a.arg}: {hint})")
    return found


def test_no_untyped_call_context():
    assert [hit for path in ALL.values() for hit in untyped_contexts(path)] == []


def test_the_context_rule_sees_one(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("async def call(x, *, context: dict[str, Any] | None = None): ...\n")
    assert untyped_contexts(sample) == [
        "m.py:1 call(context: dict[str, Any] | None)"]
