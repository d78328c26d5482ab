"""Shaping the offline model's answers to whatever JSON schema the caller asked for.

The judge and improver roles know *what* they want to say (a score and a
reason per criterion, a list of suggestions); these helpers put it under the
property names and types the requested schema declares, so the answer
validates even when a caller renames a field or adds a required one.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def deref(schema: Schema | None, root: Schema | None) -> Schema:
    """Follow ``$ref`` (``#/$defs/...``) and unwrap ``anyOf``/``oneOf`` with a null branch."""
    seen = 0
    node: Schema = schema or {}
    while seen < 20:
        seen += 1
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/") and root is not None:
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            node = target if isinstance(target, dict) else {}
            continue
        branches = node.get("anyOf") or node.get("oneOf")
        if isinstance(branches, list) and branches and "type" not in node:
            non_null = [b for b in branches if isinstance(b, dict) and b.get("type") != "null"]
            node = non_null[0] if non_null else branches[0]
            continue
        break
    return node


def kind(schema: Schema) -> str | None:
    """The schema's JSON type (the first non-null one when it lists several)."""
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    if t is None and "properties" in schema:
        return "object"
    if t is None and "enum" in schema and schema["enum"]:
        return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(
            type(schema["enum"][0]), None)
    return t


def properties(schema: Schema, root: Schema) -> dict[str, Schema]:
    """An object schema's properties, dereferenced."""
    props = schema.get("properties") or {}
    return {k: deref(v, root) for k, v in props.items() if isinstance(v, dict)}


def example(schema: Schema | None, root: Schema | None) -> Any:
    """A minimal value that validates against ``schema`` (required fields only)."""
    node = deref(schema, root)
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return node["enum"][0]
    if "default" in node:
        return node["default"]
    t = kind(node)
    if t == "object":
        props = properties(node, root or node)
        return {k: example(props[k], root) for k in node.get("required", []) if k in props}
    if t == "array":
        n = int(node.get("minItems", 0) or 0)
        return [example(node.get("items"), root) for _ in range(n)]
    if t == "integer":
        return int(node.get("minimum", 0) or 0)
    if t == "number":
        return float(node.get("minimum", 0) or 0)
    if t == "boolean":
        return False
    if t == "null":
        return None
    if t == "string":
        return "x" * int(node.get("minLength", 0) or 0)
    return None


def coerce(value: Any, schema: Schema, root: Schema) -> Any:
    """Fit a plain value to a scalar/array schema: enums, number types, lists."""
    node = deref(schema, root)
    enum = node.get("enum")
    if enum:
        if value in enum:
            return value
        lowered = {str(e).lower(): e for e in enum}
        return lowered.get(str(value).lower(), enum[0])
    t = kind(node)
    if t == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        top = node.get("maximum")
        if top == 10 and value > 10:  # a 0-10 scale asked for: say it on that scale
            return round(value / 10)
        return round(value)
    if t == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if t == "string" and isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if t == "string" and not isinstance(value, str):
        return "" if value is None else str(value)
    if t == "array" and not isinstance(value, list):
        return [] if value in (None, "") else [value]
    if t == "boolean" and not isinstance(value, bool):
        return bool(value)
    return value


def fill(concepts: dict[str, Any], aliases: dict[str, tuple[str, ...]], schema: Schema,
         root: Schema) -> dict[str, Any]:
    """An object for ``schema`` built from named concepts.

    ``aliases`` maps each concept to the property names that may carry it
    (``"score": ("score", "rating", "value")``). Properties that name no
    concept get a minimal value when required and are left out otherwise.
    """
    node = deref(schema, root)
    props = properties(node, root)
    if not props:
        # an open object: say it in our own words
        return dict(concepts)
    by_property = {alias: concept for concept, names in aliases.items() for alias in names}
    out: dict[str, Any] = {}
    required = set(node.get("required", []))
    for name, sub in props.items():
        concept = by_property.get(name.lower())
        if concept is not None and concept in concepts:
            out[name] = coerce(concepts[concept], sub, root)
        elif name in required:
            out[name] = example(sub, root)
    return out


def frame(schema: Schema, preferred: str) -> tuple[dict[str, Any], str, Schema]:
    """The answer object ``schema`` asks for (filled with example values), the key of
    its main container (``preferred`` when the schema has it, else its first
    property) and that container's schema, dereferenced against ``schema``."""
    top = deref(schema, schema)
    props = properties(top, schema)
    key = preferred if preferred in props else next(iter(props), preferred)
    out = example(top, schema) if props else {}
    return (out if isinstance(out, dict) else {}), key, props.get(key, {})
