"""A case file read item by item: the same data and lines as PyYAML's safe loader, built
from the parser's events (cycle.yamlload._quick), and clear errors for values that
cannot be what they look like."""

import pytest
import yaml

from cycle import yamlload
from cycle.errors import ConfigError
from cycle.yamlload import iter_items, parse_yaml

#: every kind of value a case file holds, and what the quick builder leaves to PyYAML
DOCUMENTS = {
    "plain": "- id: a\n  input: {customer: C1, question: 'where is parcel 1?'}\n",
    "scalars": (
        "- {id: 1, n: 0x1F, o: 0o17, f: 1_000.5, e: 6.8523015e+5, inf: .inf, nan_: .NaN,\n"
        "   b: yes, b2: Off, t: true, nul: ~, nul2: null, empty: , d: 2002-12-14,\n"
        "   ts: 2001-12-14t21:59:43.10-05:00, sexa: 190:20:30, s: \"q\", s2: 'q2', plus: +12}\n"),
    "blocks": ("- id: b\n  text: |\n    line one\n    line two\n  folded: >\n    a\n    b\n"
               "  list: [1, two, 3.0, [x, {y: z}]]\n  nested:\n    - a: 1\n      b: [ ]\n"
               "    - {}\n"),
    "typed keys": "- id: c\n  1: int key\n  true: bool key\n  ~: null key\n  2001-01-01: d\n",
    "anchor": "- id: anchors\n  base: &b {x: 1}\n  other: 2\n- id: next\n  v: [1]\n",
    "tags": "- id: tagged\n  v: !!str 123\n  w: !!int '7'\n- id: after\n  v: {k: v}\n",
    "merge key": "- id: merge\n  <<: {x: 1}\n  y: 2\n",
    "equals key": "- id: eq\n  =: v\n",
    "complex key": "- id: complexkey\n  ? [a, b]\n  : v\n",
    "sets and pairs": "- id: s\n  v: !!set {a, b}\n  w: !!omap [a: 1, b: 2]\n  x: !!binary aGk=\n",
    "scalar items": "- plain scalar item\n- [seq, item]\n- 12\n",
    "under cases": "cases:\n  - id: x\n    input: y\n  - id: z\n    input: {a: [1, 2]}\n",
    "unicode": "- id: u\n  v: \"caf\\u00e9 \\U0001F600\"\n  w: ünïcödé & more\n",
    "deep": "- id: deep\n  v: " + "[" * 60 + "]" * 60 + "\n",
    "aliases": "- id: a\n  mocks: &m {t: [1, 2]}\n- id: b\n  mocks: *m\n- id: c\n  v: 1\n",
    "stars in text": "- id: a\n  expected: '**bold** and *this*'\n  input: 2 * 3\n",
    # PyYAML composes the rest of a file once eight items in a row were unusual
    "shared mocks": "".join(f"- id: m{i}\n  mocks: &m{i} {{t: {i}}}\n" for i in range(10))
    + "- id: plain\n  input: {a: [1, {b: 2}]}\n- id: last\n  input: x\n",
}


def _lines_under(lines: dict, at: tuple) -> dict:
    return {p: n for p, n in lines.items() if p[:len(at)] == at}


@pytest.mark.parametrize("name", DOCUMENTS)
def test_each_item_is_what_pyyamls_safe_loader_makes_with_the_same_lines(name):
    text = DOCUMENTS[name]
    try:
        whole = parse_yaml(text, "cases.yaml")  # PyYAML's composer and constructor, whole
    except ConfigError as refused:  # (a key that is a list: unhashable, both ways)
        with pytest.raises(ConfigError) as caught:
            list(iter_items(text, "cases.yaml", key="cases"))
        assert (caught.value.message, caught.value.line) == (refused.message, refused.line)
        return
    assert whole.data == yaml.safe_load(text)
    items = list(iter_items(text, "cases.yaml", key="cases"))
    expected = whole.data["cases"] if isinstance(whole.data, dict) else whole.data
    assert len(items) == len(expected) > 0
    for at, doc in items:
        assert repr(doc.at(at)) == repr(whole.at(at))  # (types too: 1 is not True)
        assert _lines_under(doc.lines, at) == _lines_under(whole.lines, at)
        assert doc.line_of(at) == whole.line_of(at)


def test_plain_cases_are_built_from_the_events_without_pyyamls_composer(monkeypatch):
    def composed(*args):
        raise AssertionError("composed by PyYAML")

    monkeypatch.setattr(yamlload._ItemComposer, "compose_node", composed)
    for name in ("plain", "scalars", "blocks", "typed keys", "scalar items", "under cases",
                 "stars in text"):
        assert list(iter_items(DOCUMENTS[name], "cases.yaml", key="cases"))
    with pytest.raises(AssertionError, match="composed by PyYAML"):
        list(iter_items(DOCUMENTS["tags"], "cases.yaml"))


@pytest.mark.parametrize(("value", "kind"), [("2001-02-30", "date"), ("2001-13-01", "date"),
                                             ("!!int x", "whole number"),
                                             ("!!float abc", "number")])
def test_a_value_that_cannot_be_what_it_looks_like_is_an_error_at_its_line(tmp_path, value,
                                                                           kind):
    from cycle.cases import load_case_file

    path = tmp_path / "cases.yaml"
    path.write_text(f"- id: a\n  input: hi\n- id: b\n  when: {value}\n  input: hi\n")
    with pytest.raises(ConfigError) as caught:
        load_case_file(path)
    assert caught.value.line == 4 and caught.value.file == str(path)
    assert f"is not a valid {kind}" in caught.value.message
    assert "quote it" in caught.value.message
    with pytest.raises(ConfigError, match=f"is not a valid {kind}"):
        parse_yaml(f"run:\n  when: [{value}]\n", "cycle.yaml")


def test_a_duplicate_anchor_names_both_lines():
    with pytest.raises(ConfigError) as caught:
        list(iter_items("- id: a\n  v: &x 1\n- id: b\n  v: &x 2\n", "cases.yaml"))
    assert caught.value.line == 4
    assert "duplicate anchor 'x' (first at line 2)" in caught.value.message


def test_a_duplicate_key_in_a_case_is_refused_at_its_line():
    text = "- id: a\n  input:\n    order: 1\n    note: x\n    order: 2\n"
    with pytest.raises(ConfigError) as caught:
        list(iter_items(text, "cases.yaml"))
    assert caught.value.line == 5 and caught.value.field == "[0].input.order"
    assert "also at line 3" in caught.value.message


def test_nesting_too_deep_for_the_readers_after_the_parser_is_refused_as_before(tmp_path):
    from cycle.cases import load_case_file

    path = tmp_path / "cases.yaml"
    path.write_text("- id: a\n  input: {v: " + "[" * 400 + "]" * 400 + "}\n")
    assert len(load_case_file(path)) == 1  # (and pickled whole)
    path.write_text("- id: a\n  input: {v: " + "[" * 700 + "]" * 700 + "}\n")
    with pytest.raises(ConfigError, match="nested deeper than cycle reads"):
        load_case_file(path)
