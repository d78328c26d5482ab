"""Schema helpers: strict form, validation, examples."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from cycle.llm.structured import parse_json, schema_of, strict_schema
from cycle.testing.examples import example_for


class Item(BaseModel):
    name: str
    tags: list[str]


class Wrapper(BaseModel):
    items: list[Item]
    note: str | None


class Optional_(BaseModel):
    name: str
    extra: int = 0


def test_strict_when_every_property_is_required():
    strict = strict_schema(Wrapper.model_json_schema())
    assert strict is not None
    assert strict["additionalProperties"] is False
    assert strict["$defs"]["Item"]["additionalProperties"] is False


def test_not_strict_with_optional_property_or_open_map():
    assert strict_schema(Optional_.model_json_schema()) is None
    open_map = {"type": "object", "properties": {"v": {"type": "object",
                "additionalProperties": {"type": "integer"}}}, "required": ["v"]}
    assert strict_schema(open_map) is None


def test_examples_validate_against_their_schema():
    for schema in (Wrapper.model_json_schema(), Optional_.model_json_schema(),
                   {"type": "array", "items": {"type": "integer", "minimum": 3}, "minItems": 2}):
        _, check = schema_of(schema)
        assert check(example_for(schema)) == example_for(schema)


def test_validation_errors_name_the_path():
    _, check = schema_of(Wrapper.model_json_schema())
    with pytest.raises(ValueError) as e:
        check({"items": [{"name": 1, "tags": []}], "note": None})
    assert str(e.value) == "$.items[0].name: 1 is not of type 'string'"
    with pytest.raises(ValueError, match=r"\$: 'note' is a required property"):
        check({"items": []})


def test_parse_json_tolerates_fences():
    assert parse_json('```json\n{"a": 1}\n```') == {"a": 1}
