"""A value valid for a JSON schema: what the loopback server and the scripted model
answer a structured request with when nothing more specific is scripted."""

from __future__ import annotations

from typing import Any


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


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"only local $ref are supported, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node
