"""Importing user code by path (``package.module:name``): checks, agents, mocks, tools,
stop predicates. One function, so that every bad path reads the same.

A module of a project's own (``checks.py`` beside its cycle.yaml) is imported by the
name the user wrote through ``sys.path``, which two projects share in one process (a
pytest session running both, a Python API user): the second project's ``checks`` was the
first one's, its checks giving the first one's verdicts. What knows its project (a
check: ``project``) imports such a module by its file instead (``module_at``), under a
name made of its path; a package's own modules with it (``from .rules import x``). What
such a module imports by a plain name (``import helpers``, a file beside it) is still
imported through ``sys.path``, shared by that name.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import re
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from cycle.errors import ConfigError


def module_at(file: Path) -> ModuleType:
    """The module of ``file`` (a ``.py`` file, or a package's ``__init__.py``), imported
    once a process under a name of its own made of its path (``checks__1a2b...``): never
    another file of the same name. Its folder comes first on ``sys.path`` while it runs,
    so that its imports of the files beside it find them."""
    file, name = _named(file)
    if name in sys.modules:
        return sys.modules[name]
    package = file.name == "__init__.py"
    spec = importlib.util.spec_from_file_location(
        name, file, submodule_search_locations=[str(file.parent)] if package else None)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    folder = str(file.parent.parent if package else file.parent)
    sys.modules[name] = module  # before it runs, as an import does: its relative imports
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.path.remove(folder)  # the first one: the one put there
    return module


@functools.cache
def _named(file: Path) -> tuple[Path, str]:
    """``file`` resolved, and the module name made of its path (cached: a check loads its
    function at every case, and resolving walks the path on disk)."""
    file = file.resolve()
    stem = file.parent.name if file.name == "__init__.py" else file.stem
    return file, re.sub(r"\W", "_", stem) + "__" + hashlib.sha1(str(file).encode()).hexdigest()[:12]


@functools.cache
def _own_file(top: str, project: Path) -> Path | None:
    """The file of the module ``top`` in the folder ``project``, if it has one (cached:
    a check imports its function at every case)."""
    for file in (project / top / "__init__.py", project / f"{top}.py"):
        if file.is_file():
            return file
    return None


def _import_module(name: str, project: Path | None) -> ModuleType:
    """``importlib.import_module(name)``, but for a module of ``project``'s own, imported
    by its file (``module_at``)."""
    top, dot, rest = name.partition(".")
    own = _own_file(top, project) if project is not None else None
    if own is None:
        return importlib.import_module(name)
    plain = sys.modules.get(name)
    if plain is not None and (getattr(plain, "__file__", None) or "").startswith(
            f"{project}{os.sep}"):
        return plain  # this project's, imported by its name (by its agent, say): one module
    module = module_at(own)
    return importlib.import_module(f"{module.__name__}.{rest}") if dot else module


def import_object(path: str, *, what: str, project: Path | None = None) -> Any:
    """Import ``package.module:attribute``; a bad path is a ConfigError naming it.
    ``project``: the folder (resolved) of the cycle.yaml that names it: a module of its
    own there is that project's, whatever another project imported by the same name."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigError(
            f"'{path}' is not an import path", field=what, hint="Write it as package.module:name."
        )
    try:
        module = _import_module(module_name, project)
    except ImportError as e:
        raise ConfigError(f"cannot import module '{module_name}': {e}", field=what) from e
    except SyntaxError as e:  # the user's own file: where it does not compile
        raise ConfigError(
            f"cannot import module '{module_name}': {e.msg} ({e.filename}, line {e.lineno})",
            field=what, hint="Fix the file, then run again.") from e
    except Exception as e:  # the module's own code raised as it loaded: theirs, not ours
        frame = traceback.extract_tb(e.__traceback__)[-1]
        raise ConfigError(
            f"cannot import module '{module_name}': loading it raised "
            f"{type(e).__name__}: {e} ({frame.filename}, line {frame.lineno})",
            field=what, hint="Fix the module, then run again (--debug shows the traceback).",
        ) from e
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            raise ConfigError(f"module '{module_name}' has no '{attr}'", field=what) from e
    return obj
