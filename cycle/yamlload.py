"""YAML loading that remembers where every key and item came from.

``load_yaml`` returns the data (as ``yaml.safe_load`` would) plus a map from
each path (``("criteria", 2, "weight")``) to its 1-based line, so that a
validation error can say ``cycle.yaml:14 (criteria[2].weight)``.
``validate`` runs a pydantic model over loaded data and turns the first
error into one ``ConfigError`` naming the file, the line and the field.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from msgspec import Struct, field
from pydantic import BaseModel, ValidationError

from cycle.errors import ConfigError

try:  # the C loader is ~10x faster on big case files
    from yaml import CSafeLoader as _Safe
except ImportError:  # pragma: no cover - libyaml missing
    from yaml import SafeLoader as _Safe  # type: ignore[assignment]


class _Loader(_Safe):  # type: ignore[misc, valid-type]
    """PyYAML's safe loader, except that a value that cannot be what it looks like
    (``2001-02-30``, ``!!int x``) is a YAML error at its line, not a ValueError."""

    def construct_document(self, node: yaml.Node) -> Any:
        try:
            return super().construct_document(node)
        except (ValueError, OverflowError) as e:
            raise _unreadable(_failing(self, node) or node, e) from None


def _failing(loader: _Safe, node: yaml.Node) -> yaml.ScalarNode | None:
    """The scalar of ``node``'s tree that its type's constructor refuses (looked for only
    once one did: a wrapper of every node's construction would cost a third of a load)."""
    stack = [node]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, yaml.ScalarNode):
            construct = loader.yaml_constructors.get(current.tag)
            try:
                if construct is not None:
                    construct(loader, current)
            except (ValueError, OverflowError):
                return current
        elif isinstance(current, yaml.MappingNode):
            stack.extend(n for pair in reversed(current.value) for n in reversed(pair))
        else:
            stack.extend(reversed(current.value))
    return None


def _unreadable(node: yaml.Node, error: Exception) -> yaml.YAMLError:
    kind = str(node.tag).rsplit(":", 1)[-1]
    kind = {"timestamp": "date", "int": "whole number", "float": "number"}.get(kind, kind)
    return yaml.constructor.ConstructorError(
        None, None, f"{node.value!r} is not a valid {kind} ({error}): correct it, or quote "
        "it to keep it as text", node.start_mark)

Path_ = tuple[str | int, ...]
M = TypeVar("M", bound=BaseModel)


class LoadedYaml(Struct, frozen=True):
    """Data loaded from one YAML file with the line of every key and list item."""

    data: Any
    file: str
    lines: dict[Path_, int] = field(default_factory=dict)

    def line_of(self, path: Path_) -> int | None:
        """The line of ``path`` or, failing that, of its nearest ancestor."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)

    def at(self, path: Path_) -> Any:
        """The data under ``path`` (a walk down the data: the lines stay with the
        whole document, so validating each of n cases costs O(1), not O(n))."""
        data = self.data
        for key in path:
            data = data[key]
        return data


def _record_lines(node: yaml.Node, path: Path_, lines: dict[Path_, int], file: str) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            line = key_node.start_mark.line + 1
            # YAML keeps the last of two equal keys without a word: a second `improve:`
            # would silently drop the first one's settings
            if path + (key,) in lines and key != "<<":
                raise _duplicate(key, path, lines, line, file)
            # the key's line is where a user looks for "unknown key" and "bad value"
            lines[path + (key,)] = line
            _record_lines(value_node, path + (key,), lines, file)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _record_lines(item, path + (i,), lines, file)


def _duplicate(key: str, path: Path_, lines: dict[Path_, int], line: int, file: str
               ) -> ConfigError:
    return ConfigError(
        f"duplicate key '{key}' (also at line {lines[path + (key,)]})",
        file=file, line=line, field=field_name(path + (key,)),
        hint="Keep one of them: YAML would silently use only the last.")


#: values a document may expand to through its aliases (``*a`` repeating ``&a``): a
#: "billion laughs" of ten aliases of ten is 10^10 values, and every reader of the data
#: (validation, a copy of the state, a report) would walk them all
MAX_EXPANDED = 1_000_000


def _bounded(node: yaml.Node, file: str) -> None:
    """Refuse a document whose aliases expand it past ``MAX_EXPANDED`` values. Each node
    is counted once with what it expands to (memoized by identity: an alias is the same
    node object), so the check itself stays linear in the file."""
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        if id(current) in size:
            continue
        if isinstance(current, yaml.ScalarNode):
            size[id(current)] = 1
            continue
        kids = ([v for pair in current.value for v in pair]
                if isinstance(current, yaml.MappingNode) else list(current.value))
        if not children_done:
            stack.append((current, True))
            stack.extend((k, False) for k in kids if id(k) not in size)
            continue
        total = 1 + sum(size[id(k)] for k in kids)
        if total > MAX_EXPANDED:
            raise ConfigError(
                f"the document expands to more than {MAX_EXPANDED:,} values through its "
                "aliases (*name repeating &name)", file=file, line=current.start_mark.line + 1,
                hint="Write the values out, or use fewer nested aliases: a few levels of ten "
                "already make billions (the 'billion laughs' pattern).")
        size[id(current)] = total


def parse_yaml(text: str, file: str) -> LoadedYaml:
    """Parse YAML text; a syntax error becomes a ConfigError with its line."""
    try:
        try:
            loader = _Loader(text)
            try:
                node = loader.get_single_node()
                if node is not None and "*" in text:
                    _bounded(node, file)
                data = loader.construct_document(node) if node is not None else None
            finally:
                loader.dispose()
        except yaml.YAMLError as e:
            raise _syntax_error(e, file, text) from e
        lines: dict[Path_, int] = {}
        if node is not None:
            _record_lines(node, (), lines, file)
    except RecursionError:
        raise too_deep(file, "YAML") from None
    return LoadedYaml(data=data, file=file, lines=lines)


def too_deep(file: str, what: str, line: int | None = None) -> ConfigError:
    """Nesting deeper than the parser can follow: the parser's own limit covers flow
    style (``[[[...]]]``) only; indented blocks went on to a RecursionError."""
    return ConfigError(f"the {what} is nested deeper than cycle reads (some hundreds of "
                       "levels)", file=file, line=line,
                       hint="Flatten the data: no eval file or case needs that depth.")


class _Unusual(Exception):
    """Something the quick builder leaves to PyYAML's composer and constructor: an alias,
    an anchor, an explicit tag, a merge key, a key that is not a scalar, a scalar of no
    known type, nesting past ``_QUICK_DEPTH``."""


#: nesting the quick builder leaves to PyYAML, whose recursion refuses what is too deep
#: for the readers after it (pickling a case, writing it as JSON) with a clear error
_QUICK_DEPTH = 100
_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_COLLECTIONS = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_READ = ("check_event", "peek_event", "get_event")
#: a file whose items are all unusual (shared mocks by anchors and aliases) stops paying
#: the quick builder's try after this many in a row
_TRIES = 8


class _ItemComposer(yaml.composer.Composer, _Loader):  # type: ignore[misc, valid-type]
    """A long list read item by item: the whole file's node tree (several times the data's
    size) never exists at once. Each item is built straight from the C parser's events
    (``quick``): the data PyYAML's safe loader makes, with the lines ``_record_lines``
    records, at half the cost (no node tree, no constructor's generators). An unusual
    item goes to PyYAML's composer and constructor, which read again the events taken."""

    def __init__(self, text: str) -> None:
        _Loader.__init__(self, text)
        yaml.composer.Composer.__init__(self)
        self.taken: list[yaml.Event] = []
        self.lines: dict[Path_, int] = {}
        self.file = ""
        #: unusual items in a row: after ``_TRIES`` the file's are all composed by PyYAML
        self.unusual = 0

    def quick(self, at: Path_, lines: dict[Path_, int], file: str) -> Any:
        """The next item's value (its lines into ``lines``), or ``_Unusual`` with the
        events read kept in ``taken``."""
        self.taken, self.lines, self.file = [], lines, file
        return self._build(self._take(), at)

    def give_back(self) -> None:
        """The composer's next reads are the events ``quick`` took, then the parser's.
        (Instance attributes over the C parser's methods, gone with the last event given
        back: the composer's other reads stay calls of the C methods.)"""
        events = deque(self.taken)

        def get_event() -> yaml.Event:
            event = events.popleft()
            if not events:
                self.done_giving_back()
            return event

        self.__dict__.update(zip(_READ, (
            lambda *choices: not choices or isinstance(events[0], choices),
            lambda: events[0], get_event), strict=True))

    def done_giving_back(self) -> None:
        for name in _READ:
            self.__dict__.pop(name, None)

    def _take(self) -> yaml.Event:
        event = _Loader.get_event(self)
        self.taken.append(event)
        return event

    def _scalar(self, event: yaml.ScalarEvent) -> tuple[Any, str]:
        if event.anchor is not None or event.tag not in (None, "!"):
            raise _Unusual
        value = event.value
        if not event.implicit[0] or value[:1] not in self.yaml_implicit_resolvers:
            return value, _STR
        tag = self.resolve(yaml.ScalarNode, value, event.implicit)
        if tag == _STR:
            return value, tag
        if tag not in self.yaml_constructors:  # (the merge key, `=`, a plain `!x`)
            raise _Unusual
        node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark, event.style)
        try:
            return self.yaml_constructors[tag](self, node), tag
        except (ValueError, OverflowError) as e:
            raise _unreadable(node, e) from None

    def _build(self, event: yaml.Event, path: Path_) -> Any:
        lines = self.lines
        lines.setdefault(path, event.start_mark.line + 1)
        kind = type(event)
        if kind is yaml.ScalarEvent:
            return self._scalar(event)[0]
        if kind not in _COLLECTIONS or event.anchor is not None or (
                event.tag not in (None, "!")) or len(path) > _QUICK_DEPTH:
            raise _Unusual
        take = self._take
        if kind is yaml.SequenceStartEvent:
            items: list[Any] = []
            while type(event := take()) is not yaml.SequenceEndEvent:
                items.append(self._build(event, path + (len(items),)))
            return items
        mapping: dict[Any, Any] = {}
        while type(event := take()) is not yaml.MappingEndEvent:
            if type(event) is not yaml.ScalarEvent:
                raise _Unusual
            key, tag = self._scalar(event)
            if tag == _MERGE:
                raise _Unusual
            name = event.value
            if path + (name,) in lines:
                raise _duplicate(name, path, lines, event.start_mark.line + 1, self.file)
            lines[path + (name,)] = event.start_mark.line + 1
            mapping[key] = self._build(take(), path + (name,))
        return mapping


def iter_items(text: str, file: str, key: str | None = None
               ) -> Iterator[tuple[Path_, LoadedYaml]] | None:
    """The items of a document that is a list (or, with ``key``, a mapping whose first
    key is ``key`` holding a list), one at a time: (the item's path, a LoadedYaml whose
    ``at(path)`` is the item and whose lines are the item's, under their full paths). None when the document has another shape (the caller parses it whole,
    and says what is wrong with it); a syntax error is a ConfigError with its line."""
    events = yaml.events
    try:
        loader = _ItemComposer(text)  # (a character YAML refuses is found here)
    except yaml.YAMLError as e:
        raise _syntax_error(e, file, text) from e
    try:
        try:
            loader.get_event()  # stream start
            if not loader.check_event(events.DocumentStartEvent):
                return None
            loader.get_event()
            prefix: Path_ = ()
            if key is not None and loader.check_event(events.MappingStartEvent):
                loader.get_event()
                first = loader.peek_event()
                if not (isinstance(first, events.ScalarEvent) and first.value == key):
                    return None
                loader.get_event()
                prefix = (key,)
            if not loader.check_event(events.SequenceStartEvent):
                return None
            start = loader.get_event()
        except yaml.YAMLError as e:
            raise _syntax_error(e, file, text) from e
    except BaseException:
        loader.dispose()
        raise
    return _items(loader, file, prefix, start.start_mark.line + 1, aliases="*" in text)


def _items(loader: _ItemComposer, file: str, prefix: Path_, line: int, *, aliases: bool
           ) -> Iterator[tuple[Path_, LoadedYaml]]:
    # (not the text: the loader has its own copy, and a second held while the items are
    # read adds the file's size to the peak; a character YAML refuses is found before)
    events = yaml.events
    try:
        index = 0
        while True:
            try:
                if loader.check_event(events.SequenceEndEvent):
                    loader.get_event()
                    # what follows the list must be the end of the mapping and the document
                    while loader.check_event(events.MappingEndEvent, events.DocumentEndEvent):
                        loader.get_event()
                    if not loader.check_event(events.StreamEndEvent):
                        extra = loader.peek_event()
                        what = (f"unknown key '{extra.value}'" if prefix and isinstance(
                            extra, events.ScalarEvent) else "unexpected content after the list")
                        raise ConfigError(
                            what, file=file, line=extra.start_mark.line + 1,
                            hint="A case file is a list of cases or a mapping with the single "
                                 "key 'cases'.")
                    return
                at = prefix + (index,)
                lines: dict[Path_, int] = {(): line}
                if prefix:
                    lines[prefix] = line
                data = _read_item(loader, at, lines, file, aliases=aliases)
            except yaml.YAMLError as e:
                raise _syntax_error(e, file) from e
            except RecursionError:
                raise too_deep(file, "YAML") from None
            holder: Any = {index: data}
            for part in reversed(prefix):
                holder = {part: holder}
            yield at, LoadedYaml(data=holder, file=file, lines=lines)
            index += 1
    finally:
        loader.dispose()


def _read_item(loader: _ItemComposer, at: Path_, lines: dict[Path_, int], file: str, *,
               aliases: bool) -> Any:
    """One item of the list: built quickly from the events when it is plain data, else by
    PyYAML's composer and constructor, reading again the events the quick builder took
    (an item with an alias has its expansion bounded first, in a file with any ``*``)."""
    if loader.unusual < _TRIES:
        try:
            value = loader.quick(at, lines, file)
            loader.unusual = 0
            return value
        except _Unusual:
            loader.unusual += 1
            for path in [p for p in lines if len(p) >= len(at)]:  # (the item's, read again)
                del lines[path]
        loader.give_back()
    try:
        node = loader.compose_node(None, None)
    finally:
        loader.done_giving_back()
    if aliases:  # (a file without '*' has none: no walk)
        _bounded(node, file)
    data = loader.construct_document(node)
    _record_lines(node, at, lines, file)
    return data


def _syntax_error(e: yaml.YAMLError, file: str, text: str | None = None) -> ConfigError:
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        problem = e.problem or e
        if e.problem == "second occurrence" and e.context and e.context_mark:
            # the composer's "found duplicate anchor 'a'; first occurrence" + this
            problem = f"{e.context.split(';')[0]} (first at line {e.context_mark.line + 1})"
        return ConfigError(f"not valid YAML: {problem}", file=file,
                           line=(mark.line + 1) if mark else None)
    if isinstance(e, yaml.reader.ReaderError) and text is not None:
        # a character YAML does not allow (a NUL, a control character): said at its line,
        # not at "position 1715" of "<unicode string>"
        shown = f"U+{e.character:04X}" if isinstance(e.character, int) else repr(e.character)
        return ConfigError(f"not valid YAML: {e.reason} ({shown})", file=file,
                           line=text.count("\n", 0, e.position) + 1,
                           hint="Remove the character (or write it escaped in a quoted string).")
    return ConfigError(f"not valid YAML: {e}", file=file)


def read_text(path: str | Path) -> str:
    """A UTF-8 text file's content; a missing, unreadable or non-UTF-8 file is a
    ConfigError naming it (and, for a bad byte, its line)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError("file not found", file=str(p)) from None
    except IsADirectoryError:
        raise ConfigError("is a folder, not a file", file=str(p)) from None
    except OSError as e:
        raise ConfigError(f"cannot read file: {e.strerror}", file=str(p)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})",
            file=str(p), line=raw.count(b"\n", 0, e.start) + 1,
            hint="Save the file as UTF-8 (most editors: 'Save with encoding').",
        ) from None


def parse_json_text(text: str, file: str, *, hint: str | None = None) -> Any:
    """JSON text of a user's file: a syntax error is a ConfigError with its line, and so
    is nesting deeper than the parser can follow (a RecursionError otherwise)."""
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"not valid JSON: {e.msg} (column {e.colno})", file=file,
                          line=e.lineno, hint=hint) from None
    except RecursionError:
        raise too_deep(file, "JSON") from None


def load_yaml(path: str | Path) -> LoadedYaml:
    """Read and parse a YAML file; a missing or undecodable file is a ConfigError."""
    return parse_yaml(read_text(path), str(path))


def field_name(path: Path_) -> str:
    """``("criteria", 2, "weight")`` -> ``criteria[2].weight``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _clean_loc(loc: tuple[Any, ...]) -> Path_:
    # pydantic adds union/discriminator tags ("function-after[...]", "contains") to locations;
    # keep only the parts that are keys or indexes of the data
    return tuple(p for p in loc if isinstance(p, int | str))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in getattr(annotation, "__args__", ()) or ():
        out.extend(_models_in(arg))
    meta = getattr(annotation, "__metadata__", None)
    if meta is not None and hasattr(annotation, "__origin__"):
        out.extend(_models_in(annotation.__origin__))
    return out


def _tagged(models: list[type[BaseModel]], tags: list[str]) -> list[type[BaseModel]]:
    """The union members a validation error's tag names (its ``type`` value, or its class
    name), or all of them when none does."""
    import typing

    def tag_of(m: type[BaseModel]) -> set[str]:
        f = m.model_fields.get("type")
        values = set(typing.get_args(f.annotation)) if f is not None else set()
        return {str(v) for v in values} | {m.__name__}

    named = [m for m in models if tag_of(m) & set(tags)]
    return named or models


def _allowed_keys(model: type[BaseModel] | None, path: Path_,
                  tags: list[str] | None = None) -> list[str]:
    """The keys allowed where ``path`` points, by walking the model's fields (of the union
    member ``tags`` name, when the error says which: a ``contains`` check's keys, not
    every check's)."""
    if model is None:
        return []
    models = [model]
    for part in path:
        if isinstance(part, int):
            continue
        nxt: list[type[BaseModel]] = []
        for m in models:
            f = m.model_fields.get(part)
            if f is not None:
                nxt.extend(_models_in(f.annotation))
        models = nxt
        if not models:
            return []
    if tags:
        models = _tagged(models, tags)
    keys: list[str] = []
    for m in models:
        for name, f in m.model_fields.items():
            key = f.alias or name
            if key not in keys:
                keys.append(key)
    return keys


def _describe(model: type[BaseModel] | None, path: Path_) -> str | None:
    """The description of the field at ``path`` (what a user should write there)."""
    keys = [p for p in path if isinstance(p, str)]
    if model is None or not keys:
        return None
    models = [model]
    for key in keys[:-1]:
        models = [m for x in models if (f := x.model_fields.get(key)) is not None
                  for m in _models_in(f.annotation)]
    for m in models:
        f = m.model_fields.get(keys[-1])
        if f is not None and f.description:
            return f"{keys[-1]}: {f.description}"
    return None


#: the errors of a member of a union that takes a scalar, for a value that is not one
_SCALAR_TYPES = {"string_type", "int_type", "float_type", "bool_type", "literal_error"}


def _scalar_for_mapping(error: Any) -> bool:
    return error["type"] in _SCALAR_TYPES and isinstance(error.get("input"), dict)


def config_error(
    err: ValidationError,
    doc: LoadedYaml,
    *,
    prefix: Path_ = (),
    what: str = "",
    model: type[BaseModel] | None = None,
    root: str = "",
) -> ConfigError:
    """The first validation error as a ConfigError naming file:line (field)."""
    errors = err.errors()
    # a misspelt key also makes the right one "missing": report the misspelling
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    if _scalar_for_mapping(first):
        # a union such as `agent: str | a section`, given a section: its str member's
        # "should be a valid string" hid the section's own error (a bad URL, two kinds),
        # a mapping given to a key inside the section too (max_response_mb: {mb: 1})
        first = next((e for e in errors if e["loc"][:len(first["loc"]) - 1] == first["loc"][:-1]
                      and (not _scalar_for_mapping(e) or len(e["loc"]) > len(first["loc"]))),
                     first)
    loc = prefix + _clean_loc(first["loc"])
    # drop discriminator tags that are not real keys, keeping the deepest real path
    real: list[str | int] = []
    tags: list[str] = []
    data = doc.data
    for part in loc:
        if isinstance(data, dict) and part in data or isinstance(data, list) and isinstance(part, int) and part < len(data):
            real.append(part)
            data = data[part]
        elif first["type"] in ("extra_forbidden", "missing") and part == loc[-1]:
            real.append(part)
        else:  # a tag such as the union member name: not a key, but it says which member
            tags.append(str(part))
    path = tuple(real)
    kind = first["type"]
    if kind == "extra_forbidden":
        message = f"unknown key '{path[-1]}'" + (f" in {what}" if what else "")
        allowed = _allowed_keys(model, path[len(prefix):-1], tags)
        close = difflib.get_close_matches(str(path[-1]), allowed, n=1)
        hint = (f"Did you mean '{close[0]}'? " if close else "") + (
            "Allowed here: " + ", ".join(allowed) + "." if allowed else "Check the spelling."
        )
    elif kind == "missing":
        message = f"required key '{path[-1]}' is missing" if path else "required key is missing"
        hint = _describe(model, path[len(prefix):])
    elif kind == "union_tag_invalid":
        ctx = first.get("ctx") or {}
        key = str(ctx.get("discriminator", "type")).strip("'")
        of = f"{path[-1]} {key}" if path and isinstance(path[-1], str) else key
        message = f"unknown {of} {ctx.get('tag')!r}"
        expected = [t.strip().strip("'") for t in str(ctx.get("expected_tags", "")).split(",")]
        close = difflib.get_close_matches(str(ctx.get("tag")), expected, n=1)
        hint = (f"Did you mean '{close[0]}'? " if close else "") + (
            f"Use one of: {ctx.get('expected_tags', '')}.")
    else:
        message = first["msg"].removeprefix("Value error, ")
        described = _describe(model, path[len(prefix):])
        hint = f"Expected: {described}" if described else None
    named = (root,) + path if root and path and isinstance(path[0], int) else path
    return ConfigError(
        message, file=doc.file, line=doc.line_of(path), field=field_name(named) or None, hint=hint
    )


def validate(
    model: type[M], doc: LoadedYaml, *, prefix: Path_ = (), what: str = "", root: str = "",
    project: Path | None = None,
) -> M:
    """Validate ``doc.at(prefix)`` as ``model``; an error names the file, line and full field.
    ``project``: the folder (resolved) of the cycle.yaml the document belongs to, whose own
    modules its checks import (see ``cycle.imports``)."""
    data = doc.at(prefix)
    try:
        return model.model_validate(data, context={"project": project})
    except ValidationError as e:
        raise config_error(e, doc, prefix=prefix, what=what, model=model, root=root) from None


def relocate(
    error: ConfigError, *, file: str, line: int | None, field: str | None = None
) -> ConfigError:
    """The same error, placed at file:line (field) (for errors raised without a location)."""
    message = error.message
    if error.file or error.field:  # drop the old "where: " prefix ConfigError added
        message = message.split(": ", 1)[-1]
    return ConfigError(message, file=file, line=line, field=field or error.field, hint=error.hint)


def round_trip(text: str, file: str | None = None) -> tuple[Any, Any]:
    """ruamel.yaml's round trip of ``text`` (a YAML object and the loaded data) set up to
    write it back as it was written: quotes kept, no line folded, and the indentation of
    its nested mappings and of its block sequences (where the dash is under its key and
    where the item starts after it; ruamel writes ``- item`` at the key's column
    otherwise) read off the text."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    mapping, sequence, offset = _indents(text)
    rt = YAML()
    rt.preserve_quotes = True
    rt.width = 1 << 30  # never fold: a text must come back exactly
    rt.indent(mapping=mapping, sequence=sequence, offset=offset)
    try:
        return rt, rt.load(text)
    except YAMLError as e:  # the file to write back into does not parse: said, not a crash
        mark = (e.problem_mark or e.context_mark) if isinstance(e, MarkedYAMLError) else None
        problem = e.problem if isinstance(e, MarkedYAMLError) and e.problem else str(e)
        raise ConfigError(f"not valid YAML: {problem}", file=file,
                          line=mark.line + 1 if mark else None,
                          hint="Fix the file, or write the version to a new one.") from None


#: a line that is a mapping's key with its value on the lines below (a comment may follow)
_OPENS_BLOCK = re.compile(r"^\s*[^\s#-][^#]*:\s*(#.*)?$")
#: a block sequence's item: the dash and the spaces after it
_ITEM = re.compile(r"^(\s*)-(\s+)\S")


def _indents(text: str) -> tuple[int, int, int]:
    """How far a nested mapping is indented under its key (default 2), and a block
    sequence's items (default 2) and their dashes (default 0) under theirs: the first of
    each in ``text``."""
    mapping = items = None
    lines = [x for x in text.splitlines() if x.strip() and not x.lstrip().startswith("#")]
    for above, below in itertools.pairwise(lines):
        if not _OPENS_BLOCK.match(above):
            continue
        key = len(above) - len(above.lstrip())
        item = _ITEM.match(below)
        if item and items is None and len(item.group(1)) >= key:
            dash = len(item.group(1)) - key
            items = (dash + 1 + len(item.group(2)), dash)
        elif not item and mapping is None and len(below) - len(below.lstrip()) > key:
            mapping = len(below) - len(below.lstrip()) - key
        if mapping is not None and items is not None:
            break
    return (mapping or 2, *(items or (2, 0)))
