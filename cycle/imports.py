"""Importing user code by path (``package.module:name``): checks, agents, mocks, tools,
stop predicates. One function, so that every bad path reads the same.

A module of a project's own (``checks.py`` beside its cycle.yaml) was imported by the
name the user wrote through ``sys.path``, which two projects share in one process (a
pytest session running both, a Python API user): the second project's ``checks`` was the
first one's, its checks giving the first one's verdicts. So what knows its project (a
check: ``project``) imports such a module by its file instead (``module_at``).

How: each folder holding such modules is a package of its own, made up for it
(``_cycle_project_<folder>__<hash of its path>``, its ``__path__`` that one folder), and
a file in it is that package's submodule (``checks.py`` is
``_cycle_project_demo__1a2b….checks``): two projects' ``checks`` are two modules, each
imported once a process (``sys.modules`` caches it, as any import). A meta-path finder
(``_Finder``) answers for those names only, finding the ``.py`` file on disk itself (no
directory listing cached: a file written a moment ago is found) and loading it with
``_Loader``, which gives the module a ``__builtins__`` of its folder's (``_Builtins``,
the real builtins but for ``__import__``). So a plain-name import in a project's module
(``import helpers``, ``from helpers import x``, a file ``helpers.py`` or a package
``helpers/`` in the same folder), at load or inside a function called later, resolves in
that folder's package: each project gets its own ``helpers``, never one found in
``sys.modules`` under the plain name. ``sys.modules`` is looked at before any finder,
which is why the hook is ``__import__`` and not a finder for the plain name. A name
with no file in the folder (``json``, an installed package) imports as always; a module
of the folder already imported by its plain name from that very file (the folder on
``sys.path``, the user's agent importing it) is that module, not a second copy.
``sys.path`` is never changed. Not covered: ``importlib.import_module("helpers")``
called by the project's code (it bypasses ``__import__``), and a folder's module
pickled into another process (its made-up package exists in this one only).
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, PrivateAttr, ValidationInfo, model_validator

from cycle.errors import ConfigError


class OfProject(BaseModel):
    """A config model naming Python objects by import path (a check, a mock): it keeps the
    folder (resolved) of the cycle.yaml it was read for (the validation context's
    ``project``), so that a module of that folder's own is imported as that project's."""

    _project: Path | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _in_project(self, info: ValidationInfo) -> OfProject:
        if info.context and info.context.get("project"):
            self._project = info.context["project"]
        return self

    @property
    def project(self) -> Path | None:
        return self._project


_PREFIX = "_cycle_project_"
_folders: dict[str, Path] = {}  # a made-up package's name -> its folder (resolved)


class _Builtins(dict):
    """A folder's modules' builtins: the real ones (looked up live, so that a patched
    ``builtins.open`` is seen) but ``__import__``, stored here (CPython looks it up in
    the dict itself), which resolves a plain name of a file in the folder there."""

    def __init__(self, folder: Path) -> None:
        super().__init__(__import__=functools.partial(_import, folder))

    def __missing__(self, key: str) -> Any:
        try:
            return getattr(builtins, key)
        except AttributeError:
            raise KeyError(key) from None


class _Loader(importlib.machinery.SourceFileLoader):
    """A source file of a project's folder, run with that folder's ``__builtins__``."""

    def __init__(self, fullname: str, path: str, folder: Path) -> None:
        super().__init__(fullname, path)
        self.folder = folder

    def exec_module(self, module: ModuleType) -> None:
        module.__dict__["__builtins__"] = _builtins(self.folder)
        super().exec_module(module)


class _Finder:
    """Finds a project folder's made-up package and its modules (``sys.meta_path``'s
    first; any other name is not its own, answered in one dict look-up)."""

    @classmethod
    def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(_PREFIX):
            return None
        top, _, rest = fullname.partition(".")
        folder = _folders.get(top)
        if folder is None:
            return None
        if not rest:
            spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
            spec.submodule_search_locations = [str(folder)]
            return spec
        tail = rest.rpartition(".")[2]
        for where in path or [str(folder)]:
            for file, package in ((Path(where) / tail / "__init__.py", True),
                                  (Path(where) / f"{tail}.py", False)):
                if file.is_file():
                    return importlib.util.spec_from_file_location(
                        fullname, file, loader=_Loader(fullname, str(file), folder),
                        submodule_search_locations=[str(file.parent)] if package else None)
        # not source (a compiled extension, a folder without __init__.py): as Python finds it
        return importlib.machinery.PathFinder.find_spec(fullname, path)


@functools.cache
def _builtins(folder: Path) -> _Builtins:
    return _Builtins(folder)


@functools.cache
def _package(folder: Path) -> str:
    """The made-up package of ``folder`` (resolved), its finder installed."""
    name = (_PREFIX + re.sub(r"\W", "_", folder.name) + "__"
            + hashlib.sha1(str(folder).encode()).hexdigest()[:12])
    _folders[name] = folder
    return name


def _finding() -> None:
    if _Finder not in sys.meta_path:
        sys.meta_path.insert(0, _Finder)  # type: ignore[arg-type]


def _import(folder: Path, name: str, globals: Any = None, locals: Any = None,
            fromlist: Any = (), level: int = 0) -> ModuleType:
    """``__import__`` for a module of ``folder``: a plain name of a file there is the
    folder's own module; anything else, relative imports too, as Python imports it."""
    if level == 0:
        top = name.partition(".")[0]
        if _own_file(top, folder) is not None:
            module = _own_module(name, folder)
            # `from a.b import x` binds from a.b; `import a.b` binds a
            return module if fromlist or top == name else _own_module(top, folder)
    return builtins.__import__(name, globals, locals, fromlist, level)


@functools.cache
def _own_file(top: str, project: Path) -> Path | None:
    """The file of the module ``top`` in the folder ``project``, if it has one (cached:
    a check imports its function at every case, a module its neighbours at every call)."""
    for file in (project / top / "__init__.py", project / f"{top}.py"):
        if file.is_file():
            return file
    return None


def _own_module(name: str, folder: Path) -> ModuleType:
    """The module ``name`` (``helpers``, ``rules.case``) of ``folder``'s own files."""
    return _import_module(name, folder)


def module_name(name: str, project: Path | None) -> str:
    """The name the module ``name`` is imported by for ``project``: a module of the
    project's own is its folder's package's (``_cycle_project_shop__1a2b.tools``), unless
    already imported by its plain name from that folder (by its agent, say: one module);
    any other keeps its name."""
    top = name.partition(".")[0]
    if project is None or _own_file(top, project) is None:
        return name
    plain = sys.modules.get(top)
    if plain is not None and (getattr(plain, "__file__", None) or "").startswith(
            f"{project}{os.sep}"):
        return name
    return f"{_package(project)}.{name}"


def qualified(path: str, project: Path | None) -> str:
    """The import path ``path`` (``module:name``) with its module named as it is imported
    for ``project`` (``module_name``): one name per function, whichever project's. What a
    project's agent reaches by ``from tools import lookup`` is the function cycle's
    interception must replace (cycle.agents.intercept)."""
    name, colon, attr = path.partition(":")
    return f"{module_name(name, project)}{colon}{attr}" if name else path


def module_at(file: Path) -> ModuleType:
    """The module of ``file`` (a ``.py`` file, or a package's ``__init__.py``), imported
    once a process as a module of its folder's made-up package (see above): never
    another file of the same name, and its plain-name imports of the files beside it
    are those files. A missing file is an ImportError naming it."""
    file, folder, name, spelled = _placed(file)
    module = sys.modules.get(name)
    if module is not None:
        return module
    if not file.is_file():
        raise ImportError(f"no file {file}: write it, or fix the path that names it")
    _finding()
    if spelled:
        return importlib.import_module(name)
    # a stem an import cannot spell (``my.checks.py``): loaded by its file, under its name
    spec = importlib.util.spec_from_file_location(
        name, file, loader=_Loader(name, str(file), folder))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


@functools.cache
def _placed(file: Path) -> tuple[Path, Path, str, bool]:
    """``file`` resolved, its folder, its module's name in the folder's package, and
    whether an import can spell its stem (cached: a check may load its function at every
    case, and resolving walks the path on disk)."""
    file = file.resolve()
    package = file.name == "__init__.py"
    folder = file.parent.parent if package else file.parent
    stem = file.parent.name if package else file.stem
    if "." in stem:  # not a name an import can spell
        return (file, folder, f"{_package(folder)}.{re.sub(r'[^0-9A-Za-z_]', '_', stem)}__file",
                False)
    return file, folder, f"{_package(folder)}.{stem}", True


def _import_module(name: str, project: Path | None) -> ModuleType:
    """``importlib.import_module(name)``, but for a module of ``project``'s own, its
    folder's (``module_name`` tells which, once)."""
    qualified_name = module_name(name, project)
    if qualified_name != name:
        _finding()
    return importlib.import_module(qualified_name)


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
            file = getattr(module, "__file__", None)
            raise ConfigError(
                f"module '{module_name}' has no '{attr}'" + (f" ({file})" if file else ""),
                field=what, hint=f"Define {attr} in it, or fix the name after the colon.",
            ) from e
    return obj
