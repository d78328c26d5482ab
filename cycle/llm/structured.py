"""Structured output helpers: schemas in, validated objects out.

- :func:`schema_of` turns a pydantic model or a JSON schema into the schema
  sent to the provider and a validator for the answer.
- :func:`strict_schema` gives the OpenAI ``strict`` form of a schema when the
  schema allows it (every object closed and every property required).
- :func:`validate` checks a value against the JSON-schema subset providers
  support for structured output (no extra dependency).
- :func:`example_for` builds a value valid for a schema (the loopback server
  and the scripted model answer with it).
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
    frozen = copy.deepcopy(schema)

    def validate_dict(value: Any) -> Any:
        errors = validate(value, frozen)
        if errors:
            raise ValueError("; ".join(errors[:5]))
        return value

    return frozen, validate_dict


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


# -- validation --------------------------------------------------------------

_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool)
    or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def validate(value: Any, schema: dict[str, Any], *, root: dict[str, Any] | None = None,
             path: str = "$") -> list[str]:
    """Errors of ``value`` against ``schema`` (empty when valid)."""
    root = schema if root is None else root
    if "$ref" in schema:
        schema = _resolve(schema["$ref"], root)
    errors: list[str] = []
    for key in ("anyOf", "oneOf"):
        if key in schema:
            branches = [validate(value, s, root=root, path=path) for s in schema[key]]
            if all(branches):
                errors.append(f"{path}: matches none of the allowed forms ({branches[0][0]})")
            return errors
    for sub in schema.get("allOf", []):
        errors += validate(value, sub, root=root, path=path)
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: must be {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: must be one of {schema['enum']!r}, got {value!r}")
    types = schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else list(types)
        if not any(_TYPES.get(t, lambda v: True)(value) for t in allowed):
            errors.append(f"{path}: expected {' or '.join(allowed)}, got {type(value).__name__}")
            return errors
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f"{path}: missing required property {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                errors += validate(item, props[name], root=root, path=f"{path}.{name}")
            elif extra is False:
                errors.append(f"{path}: unexpected property {name!r}")
            elif isinstance(extra, dict):
                errors += validate(item, extra, root=root, path=f"{path}.{name}")
    if isinstance(value, list):
        if "items" in schema and isinstance(schema["items"], dict):
            for i, item in enumerate(value):
                errors += validate(item, schema["items"], root=root, path=f"{path}[{i}]")
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: needs at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: allows at most {schema['maxItems']} items")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']} characters")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: does not match {schema['pattern']!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: above the maximum {schema['maximum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            errors.append(f"{path}: must be above {schema['exclusiveMinimum']}")
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            errors.append(f"{path}: must be below {schema['exclusiveMaximum']}")
    return errors


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"only local $ref are supported, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


# -- examples ----------------------------------------------------------------


def example_for(schema: dict[str, Any], *, root: dict[str, Any] | None = None,
                depth: int = 0) -> Any:
    """A value valid for ``schema`` (simple and deterministic)."""
    root = schema if root is None else root
    if depth > 12:
        return None
    if "$ref" in schema:
        return example_for(_resolve(schema["$ref"], root), root=root, depth=depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            # prefer a non-null branch: more useful as an example
            branches = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return example_for(branches[0], root=root, depth=depth + 1)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for sub in schema["allOf"]:
            merged.update(_resolve(sub["$ref"], root) if "$ref" in sub else sub)
        return example_for(merged, root=root, depth=depth + 1)
    types = schema.get("type")
    kind = types if isinstance(types, str) else next(
        (t for t in (types or []) if t != "null"), None
    )
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        out: dict[str, Any] = {}
        for name, sub in schema.get("properties", {}).items():
            out[name] = example_for(sub, root=root, depth=depth + 1)
        return out
    if kind == "array":
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        count = max(1, int(schema.get("minItems", 1)))
        if "maxItems" in schema:
            count = min(count, int(schema["maxItems"]))
        return [example_for(items or {}, root=root, depth=depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        if low is not None and high is not None:
            value = (low + high) / 2
        elif low is not None:
            value = low + 1
        elif high is not None:
            value = high - 1
        else:
            value = 1
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    text = "example"
    min_len = int(schema.get("minLength", 0))
    if len(text) < min_len:
        text = text * (min_len // len(text) + 1)
    if "maxLength" in schema:
        text = text[: int(schema["maxLength"])]
    return text
