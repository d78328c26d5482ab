"""Tools declared by a prompt: by hand (name, description, JSON-schema parameters) or
from a Python function (``function: package.module:name``), whose schema comes from
its signature and whose descriptions come from its docstring, through pydantic.

    tools:
      - name: lookup_order
        description: Find an order by its number.
        parameters: {type: object, properties: {order: {type: string}}, required: [order]}
      - function: shop.tools:refund      # name, description and parameters from the code

A function tool is imported with the prompt file's folder, the folder above it and
the working directory on ``sys.path``. Declaring a function never runs it: during
evaluation a tool runs only through its mock, or its real function when the mock
says ``passthrough``.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import Field, create_model

from cycle.errors import ConfigError
from cycle.imports import import_object
from cycle.records import ToolDef

#: what providers accept as a function name (OpenAI and Gemini alike)
TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


def check_parameters(schema: Any, *, tool: str) -> None:
    """Raise ValueError unless ``schema`` is a valid JSON schema of an object."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict):
        raise ValueError(f"tool '{tool}': parameters must be a JSON schema (a mapping)")  # noqa: TRY004
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(root)"
        raise ValueError(f"tool '{tool}': parameters are not a valid JSON schema: "
                         f"{where}: {e.message}") from None
    if schema.get("type", "object") != "object":
        raise ValueError(f"tool '{tool}': parameters must describe an object (type: object)")


def _docs(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The first paragraph of the docstring, and per-argument descriptions from an
    ``Args:`` (Google) or ``Parameters`` section."""
    doc = inspect.getdoc(fn) or ""
    summary = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    args: dict[str, str] = {}
    section = False
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.lower().rstrip(":") in ("args", "arguments", "parameters", "params"):
            section = True
            continue
        if section:
            if not stripped or set(stripped) <= {"-"}:
                continue
            m = _ARG_LINE.match(line)
            if m:
                args[m.group(1).lstrip("*")] = m.group(2).strip()
            elif not line.startswith((" ", "\t")):
                section = False
    return summary, args


def tool_from_function(fn: Callable[..., Any], path: str, *, name: str | None = None,
                       description: str | None = None) -> ToolDef:
    """A tool declaration from a Python function's signature and docstring."""
    summary, arg_docs = _docs(fn)
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, Field(default, description=arg_docs.get(pname)))
    model = create_model(f"{fn.__name__}_arguments", **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    return ToolDef(name=name or fn.__name__, description=description or summary,
                   parameters=schema, function=path)


def import_tool_function(path: str, *, base: Path | None) -> Callable[..., Any]:
    """Import ``package.module:name`` for a tool, with the prompt's folders on the path."""
    roots = [str(Path.cwd())]
    if base is not None:
        roots = [str(base), str(base.parent), *roots]
    for root in reversed(roots):
        if root not in sys.path:
            sys.path.insert(0, root)
    try:
        obj = import_object(path, what="function")
    except ConfigError as e:
        raise ValueError(e.message + (f" ({e.hint})" if e.hint else "")) from None
    if not callable(obj):
        raise ValueError(f"'{path}' is not a function")  # noqa: TRY004
    return obj  # type: ignore[no-any-return]


def check_unique(tools: Iterable[ToolDef]) -> None:
    seen: set[str] = set()
    for t in tools:
        if t.name in seen:
            raise ValueError(f"two tools are named '{t.name}'")
        seen.add(t.name)
