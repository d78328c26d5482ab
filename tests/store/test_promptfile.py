"""Prompt files: canonical YAML that round-trips exactly; errors name file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cycle.errors import ConfigError, TemplateError
from cycle.prompts.files import dump_prompt, load_prompt_file, parse_prompt, save_prompt_file
from cycle.records import Prompt

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["support-reply.yaml", "summarize.yaml"])
def test_example_prompt_files_load_and_dump_byte_for_byte(name: str):
    path = ROOT / "prompts" / name
    loaded = load_prompt_file(path)
    assert loaded.version == "1.0.0"
    assert dump_prompt(loaded.prompt, loaded.version) == path.read_text()


def test_multiline_strings_are_literal_blocks_and_come_back_exactly(tmp_path: Path):
    tricky = Prompt(
        id="t",
        system="Line one\n  indented line\n\nafter a blank line",  # no final newline
        user_template="{{ input }}\n\n\n",  # several final newlines
        params={"temperature": 0.5, "model": "offline:default", "stop": ["\n\n"]},
        metadata={"owner": "ann", "notes": "a: colon, # hash, 'quotes'"},
    )
    text = dump_prompt(tricky, "2.1.0")
    assert "system: |" in text and "user_template: |" in text
    path = tmp_path / "t.yaml"
    save_prompt_file(path, tricky, "2.1.0")
    back = load_prompt_file(path)
    assert back.prompt == tricky and back.version == "2.1.0"
    assert list(back.prompt.params) == ["temperature", "model", "stop"]  # order kept
    assert dump_prompt(back.prompt, back.version) == text


def test_long_lines_are_never_folded():
    p = Prompt(id="t", system="word " * 100)
    assert parse_prompt(dump_prompt(p)).prompt.system == p.system


def test_empty_fields_are_left_out():
    text = dump_prompt(Prompt(id="t"))
    assert yaml.safe_load(text) == {"id": "t", "user_template": "{{ input }}"}


def test_unknown_key_names_file_line_and_field(tmp_path: Path):
    path = write(tmp_path, "id: t\nsystem: hi\nuser_tempalte: x\n")
    with pytest.raises(ConfigError) as e:
        load_prompt_file(path)
    assert f"{path}:3 (user_tempalte)" in str(e.value) and "unknown key" in str(e.value)


def test_wrong_type_names_its_line(tmp_path: Path):
    path = write(tmp_path, "id: t\nuser_template: hi\nparams:\n  - model\n")
    with pytest.raises(ConfigError) as e:
        load_prompt_file(path)
    assert f"{path}:3 (params)" in str(e.value)


def test_missing_id(tmp_path: Path):
    path = write(tmp_path, "system: hi\n")
    with pytest.raises(ConfigError) as e:
        load_prompt_file(path)
    assert "(id)" in str(e.value) and "missing" in str(e.value)


def test_version_read_as_a_number_says_to_quote_it(tmp_path: Path):
    path = write(tmp_path, "id: t\nversion: 1.0\n")
    with pytest.raises(ConfigError) as e:
        load_prompt_file(path)
    assert f"{path}:2 (version)" in str(e.value) and "1.0.0" in str(e.value)
    path = write(tmp_path, "id: t\nversion: one\n")
    with pytest.raises(ConfigError, match="version"):
        load_prompt_file(path)


def test_template_that_does_not_compile_names_the_line_in_the_file(tmp_path: Path):
    path = write(tmp_path, "id: t\nsystem: fine\nuser_template: |\n  Hello\n  {% if x %}\n  unclosed\n")
    with pytest.raises(TemplateError) as e:
        load_prompt_file(path)
    assert e.value.file == str(path) and e.value.field == "user_template"
    assert e.value.line is not None and 5 <= e.value.line <= 7
    assert "does not compile" in str(e.value)


def test_one_line_template_error_points_at_its_key(tmp_path: Path):
    path = write(tmp_path, "id: t\nsystem: 'Hi {{ name '\n")
    with pytest.raises(TemplateError) as e:
        load_prompt_file(path)
    assert f"{path}:2 (system)" in str(e.value)


def test_not_yaml_and_not_a_mapping(tmp_path: Path):
    with pytest.raises(ConfigError) as e:
        load_prompt_file(write(tmp_path, "id: t\nsystem: [unclosed\n"))
    assert "not valid YAML" in str(e.value)
    with pytest.raises(ConfigError, match="mapping"):
        load_prompt_file(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(ConfigError, match="file not found"):
        load_prompt_file(tmp_path / "missing.yaml")


def test_bad_indentation_and_a_tab_name_their_line(tmp_path: Path):
    with pytest.raises(ConfigError) as e:
        load_prompt_file(write(tmp_path, "id: t\nsystem: hi\n  user_template: x\n"))
    assert f"{tmp_path / 'p.yaml'}:3" in str(e.value) and "not valid YAML" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_prompt_file(write(tmp_path, "id: t\n\tsystem: hi\n"))
    assert ":2" in str(e.value) and "tab" in str(e.value)


@pytest.mark.parametrize(
    ("text", "line", "field", "says"),
    [
        ("id: 'has space!'\n", 1, "id", "letters, digits"),
        ("id: t\nsystem: 5\n", 2, "system", "as text"),
        ("id: t\nsystem: yes\n", 2, "system", "quote"),
        ("id: t\nmetadata: [1]\n", 2, "metadata", "mapping"),
        ("id: t\nparams: 3\n", 2, "params", "params is a mapping"),
        ("id: t\nparams:\n  temperature: hot\n", 3, "params.temperature", "from 0 to 2"),
        ("id: t\nparams:\n  model: offline:default\n  temperature: 3\n", 4, "params.temperature", "from 0 to 2"),
        ("id: t\nparams:\n  max_tokens: 1.5\n", 3, "params.max_tokens", "whole number"),
        ("id: t\nparams:\n  stop: [1]\n", 3, "params.stop", "list of texts"),
        ("id: t\nparams:\n  model: gpt-4o\n", 3, "params.model", "openai:gpt-4o"),
        ("id: t\nparams:\n  model: nosuch:thing\n", 3, "params.model", "known providers: gemini, offline, openai"),
    ],
)
def test_a_wrong_value_names_file_line_field_and_the_fix(tmp_path: Path, text, line, field, says):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_prompt_file(path)
    assert (e.value.file, e.value.line, e.value.field) == (str(path), line, field)
    assert str(e.value).startswith(f"{path}:{line} ({field}): ")
    assert says in str(e.value)
    assert "PromptParams" not in str(e.value) and "Value error" not in str(e.value)


def test_params_come_back_exactly_as_written(tmp_path: Path):
    text = ("id: t\nuser_template: '{{ input }}'\nparams:\n  model: offline:default\n  temperature: 1\n"
            "  max_tokens: 300\n  stop: '###'\n  custom_option:\n    nested: true\n")
    loaded = load_prompt_file(write(tmp_path, text))
    assert loaded.prompt.params == {"model": "offline:default", "temperature": 1, "max_tokens": 300,
                                    "stop": "###", "custom_option": {"nested": True}}
    assert type(loaded.prompt.params["temperature"]) is int  # not turned into 1.0
    assert dump_prompt(loaded.prompt) == text


@pytest.mark.parametrize("text", ["x\x85y", "a\nnext\x85line\n", "end\x85"])
def test_a_next_line_character_survives_the_round_trip(text: str):
    p = Prompt(id="t", system=text, metadata={"note": text})
    assert parse_prompt(dump_prompt(p)).prompt == p
