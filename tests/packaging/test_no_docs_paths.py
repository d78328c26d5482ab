"""What cycle tells a user stands on its own: no message, hint or help text names a file
of docs/, which an installed wheel does not have (the module docstring of ``cycle``, read
by ``help(cycle)``, neither)."""

from __future__ import annotations

import ast
from pathlib import Path

import cycle

ROOT = Path(cycle.__file__).parent


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def test_no_string_cycle_shows_a_user_names_a_docs_file():
    named = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        skip = _docstrings(tree) if path != ROOT / "__init__.py" else set()
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in skip and "docs/" in node.value):
                named.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert named == []
