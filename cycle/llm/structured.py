"""Structured output helpers: schemas in, validated objects out.

- :func:`schema_of` turns a pydantic model or a JSON schema into the schema
  sent to the provider and a validator for the answer.
- :func:`strict_schema` gives the OpenAI ``strict`` form of a schema when the
  schema allows it (every object closed and every property required).

A pydantic model validates its answers itself (pydantic-core, compiled); a
JSON-schema dict is checked by ``jsonschema``, the one validator of JSON
schemas in cycle (the ``json_schema`` check uses it too).
"""

from __future__ import annotations

import copy
import json
import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

Validator = Callable[[Any], Any]


#: derived schemas by the identity of the schema they came from (see _cached); small
#: and bounded: a process uses a handful of schemas, each on every call
_CACHE_SIZE = 256
_schema_cache: OrderedDict[int, tuple[Any, Any, Any]] = OrderedDict()
_strict_cache: OrderedDict[int, tuple[Any, Any, Any]] = OrderedDict()


def _cached(cache: OrderedDict[int, tuple[Any, Any, Any]], source: Any,
            build: Callable[[Any], Any]) -> Any:
    """``build(source)``, computed once per schema object.

    Keyed by identity; the entry keeps the source alive (so its id is not
    reused) and a snapshot of it, compared on every hit (a deep ``==``, done in
    C): a schema dict changed in place since is derived again, never served stale.
    """
    key = id(source)
    entry = cache.get(key)
    if entry is not None and entry[0] is source and (
        isinstance(source, type) or entry[1] == source
    ):
        cache.move_to_end(key)
        return entry[2]
    value = build(source)
    snapshot = source if isinstance(source, type) else copy.deepcopy(source)
    cache[key] = (source, snapshot, value)
    if len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)
    return value


def schema_of(schema: type[BaseModel] | dict[str, Any]) -> tuple[dict[str, Any], Validator]:
    """The JSON schema for ``schema`` and a function that validates a decoded answer.

    Derived once per schema (a model class, or a dict not changed since): a
    structured call pays no schema work. The returned schema is shared: do not
    change it.
    """
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return _cached(_schema_cache, schema, _model_schema)
    if isinstance(schema, dict):
        return _cached(_schema_cache, schema, _dict_schema)
    raise TypeError(f"schema must be a pydantic model class or a JSON schema dict, got {schema!r}")


def _model_schema(model: type[BaseModel]) -> tuple[dict[str, Any], Validator]:
    def validate_model(value: Any) -> Any:
        try:
            return model.model_validate(value)
        except ValidationError as e:
            raise ValueError(_pydantic_errors(e)) from e

    return model.model_json_schema(), validate_model


def _dict_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], Validator]:
    from jsonschema.validators import validator_for  # loaded with the first dict schema

    frozen = copy.deepcopy(schema)
    checker = validator_for(frozen)(frozen)

    def validate_dict(value: Any) -> Any:
        errors = list(checker.iter_errors(value))
        if errors:
            raise ValueError("; ".join(_where(e.absolute_path) + e.message for e in errors[:5]))
        return value

    return frozen, validate_dict


def _where(path: Any) -> str:
    parts = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
    return f"${parts}: "


def _pydantic_errors(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?```\s*$", re.DOTALL)


def parse_json(text: str) -> Any:
    """Decode a model's JSON answer, tolerating a surrounding ```json fence."""
    match = _FENCE.match(text)
    if match:
        text = match.group(1)
    return json.loads(text)


# -- strict form -------------------------------------------------------------


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The schema with ``additionalProperties: false`` on every object, or None if
    it cannot be strict (an optional property, an open map, a free-form object).

    Computed once per schema (see ``schema_of``); the result is shared: do not change it.
    """
    return _cached(_strict_cache, schema, _strict)


def _strict(schema: dict[str, Any]) -> dict[str, Any] | None:
    result = copy.deepcopy(schema)
    return result if _make_strict(result) else None


def _make_strict(node: Any) -> bool:
    if isinstance(node, list):
        return all(_make_strict(item) for item in node)
    if not isinstance(node, dict):
        return True
    types = node.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types)
    if is_object or "properties" in node:
        props = node.get("properties")
        if not props:
            return False
        if set(node.get("required", [])) != set(props):
            return False
        extra = node.get("additionalProperties", False)
        if extra is not False:
            return False
        node["additionalProperties"] = False
    for key, value in node.items():
        if key in ("properties", "$defs", "definitions"):
            if not all(_make_strict(v) for v in value.values()):
                return False
        elif (
            isinstance(value, (dict, list))
            and key not in ("enum", "const", "default", "examples")
            and not _make_strict(value)
        ):
            return False
    return True
