"""Reading a tool-forge eval file: its envelope or bare array, its checks, the paths its
assertions name."""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from msgspec import Struct

from cycle.errors import ConfigError
from cycle.judge.toolforge import (
    ASSERTION_KINDS,
    js_string,
    json_stringify,
)
from cycle.yamlload import LoadedYaml, parse_json_text, parse_yaml

#: where the contract's runner looks for the seed manifest, from the project root
DEFAULT_SEED_MANIFEST = "evals/seed-manifest.json"
DEFAULT_OUTPUT_DIR = "evals/results/"
#: maxTurns when a stubbed case names none (the contract's default)
DEFAULT_MAX_TURNS = 5
#: the criterion every case of an eval file is judged on
CRITERION_ID = "toolforge"

TOKEN = re.compile(r"\{\{(\w+):([^{}]*)\}\}")
_INDEXED = re.compile(r"^(\w+)\[(\d+)\]$")
_ID_KEY = re.compile(r'"id"\s*:\s*"((?:[^"\\]|\\.)*)"')
#: the assertion fields tokens may appear in (the contract's "Token Locations")
TOKEN_FIELDS = ("responseContains", "responseContainsAny", "responseNotContains", "toolParams")


class _Unresolved:
    def __repr__(self) -> str:
        return "UNRESOLVED"


UNRESOLVED: Any = _Unresolved()


class EvalFile(Struct, frozen=True, dict=True):  # dict: for its cached properties
    """An eval file as read: its cases (raw), metadata (None for a bare array) and identity."""

    path: Path
    metadata: dict[str, Any] | None
    cases: list[dict[str, Any]]
    data: Any
    text: str
    #: sha256 of the file's bytes, first 12 hex digits (as the description hash)
    file_hash: str
    #: where the case list is in the document: ("cases",) in an envelope, () in a bare array
    prefix: tuple[str, ...] = ()

    @cached_property
    def doc(self) -> LoadedYaml:
        """The document with the line of every key, read only when an error needs a line
        (JSON is YAML; a third of the load time of a large file went to this)."""
        try:
            lines = parse_yaml(self.text, str(self.path)).lines
        except ConfigError:
            lines = {}
        return LoadedYaml(data=self.data, file=str(self.path), lines=lines)

    @property
    def tool_name(self) -> str:
        """metadata.toolName, else the file's name up to its first dot (get_weather.golden.json)."""
        meta = self.metadata or {}
        return str(meta.get("toolName") or self.path.name.split(".")[0])

    @property
    def tier(self) -> str:
        """golden or labeled: metadata.tier, else the file name, else labeled when a case uses
        an assertion the contract keeps for labeled evals."""
        meta = self.metadata or {}
        if meta.get("tier") in ("golden", "labeled"):
            return str(meta["tier"])
        for tier in ("golden", "labeled"):
            if f".{tier}." in self.path.name or self.path.stem.endswith(f".{tier}"):
                return tier
        labeled = ("toolsAcceptable", "responseMatches", "maxTokens")
        uses = any(k in (c.get("expect") or {}) for c in self.cases for k in labeled)
        return "labeled" if uses else "golden"

    @cached_property
    def case_lines(self) -> dict[str, int]:
        """Case id -> the line of its "id" key, found by one scan of the text (cases name
        their place in messages without parsing the file a second time)."""
        lines: dict[str, int] = {}
        line, at = 1, 0
        for m in _ID_KEY.finditer(self.text):
            line += self.text.count("\n", at, m.start())
            at = m.start()
            lines.setdefault(json.loads(f'"{m.group(1)}"'), line)
        return lines

    def line_of_case(self, i: int, key: str | None = None) -> int | None:
        path: tuple[str | int, ...] = (*self.prefix, i)
        return self.doc.line_of((*path, key) if key else path)

    def where(self, i: int) -> str:
        case = self.cases[i]
        return f"case '{case.get('id', i)}'"


#: keys a tool-forge case has and a cycle case never does, and the reverse
_EVAL_KEYS = frozenset({"expect", "stubs", "maxTurns", "noToolErrors"})
_CYCLE_KEYS = frozenset({"criteria", "expected", "mocks", "state", "user_agents",
                         "conversation", "name", "run_tools", "max_steps"})


def looks_like_eval(data: Any) -> bool:
    """Whether parsed JSON is a tool-forge eval file rather than cycle cases written as JSON,
    so that cycle.yaml's case globs may name either: an envelope with metadata, or cases of
    which some use tool-forge's keys and none uses cycle's."""
    if isinstance(data, dict) and "metadata" in data:
        return True
    cases = data.get("cases") if isinstance(data, dict) else data
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        return False
    return (not any(_CYCLE_KEYS & c.keys() for c in cases)
            and any(_EVAL_KEYS & c.keys() for c in cases))


def parse_file(p: Path) -> EvalFile | None:
    """The file read and parsed once; None when it is JSON but neither an envelope nor an
    array of cases. Unreadable files and invalid JSON raise, naming the file and line."""
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"eval file '{p}' not found", file=str(p),
                          hint="Give the path of a golden or labeled eval JSON file.") from None
    except OSError as e:
        raise ConfigError(f"cannot read eval file '{p}': {e.strerror}", file=str(p)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"eval file is not UTF-8 text (byte {e.start})", file=str(p),
                          hint="Save it as UTF-8 JSON.") from None
    data = parse_json_text(text, str(p), hint="An eval file is JSON: {\"metadata\": ..., "
                           "\"cases\": [...]} or a bare array of cases.")
    if isinstance(data, list):
        cases, prefix, metadata = data, (), None
    elif isinstance(data, dict) and isinstance(data.get("cases"), list):
        cases, prefix, metadata = data["cases"], ("cases",), data.get("metadata")
    else:
        return None
    return EvalFile(path=p, metadata=metadata, cases=cases, data=data, text=text,
                    file_hash=hashlib.sha256(raw).hexdigest()[:12], prefix=prefix)


def read_eval_file(path: str | Path) -> EvalFile:
    """Read and shape-check an eval file; an error names the file, line and case."""
    p = Path(path)
    ef = parse_file(p)
    if ef is None:
        raise ConfigError("expected {\"metadata\": ..., \"cases\": [...]} or a bare array of "
                          "cases", file=str(p), line=1)
    check_file(ef)
    return ef


def check_file(ef: EvalFile) -> None:
    """Every case has an id, a message and only known assertion kinds."""
    # the line map (ef.doc) is built only when an error needs a line
    p, prefix, cases = ef.path, ef.prefix, ef.cases
    if ef.metadata is not None and not isinstance(ef.metadata, dict):
        raise ConfigError("'metadata' must be an object", file=str(p),
                          line=ef.doc.line_of(("metadata",)), field="metadata")
    seen: dict[str, int] = {}
    for i, case in enumerate(cases):
        if not isinstance(case, dict):
            raise ConfigError(f"case #{i + 1} is not an object", file=str(p), line=ef.line_of_case(i))
        cid = case.get("id")
        if not isinstance(cid, str) or not cid:
            raise ConfigError(f"case #{i + 1} has no 'id' (a non-empty string)", file=str(p),
                              line=ef.line_of_case(i), field="id")
        if cid in seen:
            raise ConfigError(f"duplicate case id '{cid}' (also case #{seen[cid] + 1})",
                              file=str(p), line=ef.line_of_case(i), field="id")
        seen[cid] = i
        case_message(ef, i)
        expect = case.get("expect", {})
        if not isinstance(expect, dict):
            raise ConfigError(f"case '{cid}': 'expect' must be an object", file=str(p),
                              line=ef.line_of_case(i, "expect"), field="expect")
        unknown = [k for k in expect if k not in ASSERTION_KINDS]
        if unknown:
            close = difflib.get_close_matches(unknown[0], ASSERTION_KINDS, n=1)
            raise ConfigError(
                f"case '{cid}': unknown assertion kind '{unknown[0]}'", file=str(p),
                line=ef.doc.line_of((*prefix, i, "expect", unknown[0])),
                field=f"expect.{unknown[0]}",
                hint=(f"Did you mean '{close[0]}'? " if close else "")
                + "Known kinds: " + ", ".join(ASSERTION_KINDS) + ".")
        stubs = case.get("stubs")
        if stubs is not None and not isinstance(stubs, dict):
            raise ConfigError(f"case '{cid}': 'stubs' must be an object of tool name -> "
                              "response", file=str(p), line=ef.line_of_case(i, "stubs"),
                              field="stubs")
        turns = case.get("maxTurns")
        if turns is not None and (not isinstance(turns, int) or isinstance(turns, bool)
                                  or turns < 1):
            raise ConfigError(f"case '{cid}': 'maxTurns' must be a whole number >= 1",
                              file=str(p), line=ef.line_of_case(i, "maxTurns"), field="maxTurns")

def case_message(ef: EvalFile, i: int) -> str:
    case = ef.cases[i]
    given = case.get("input")
    message = given.get("message") if isinstance(given, dict) else given
    if not isinstance(message, str):
        raise ConfigError(f"{ef.where(i)} has no input.message (a string)", file=str(ef.path),
                          line=ef.line_of_case(i, "input"), field="input.message",
                          hint='Each case sends {"input": {"message": "..."}} to the agent.')
    return message


# -- tokens ------------------------------------------------------------------------------


def parse_path(path: str) -> list[str | int]:
    """A token path as steps: ``holdings.equities[0].symbol`` -> holdings, equities, 0, symbol.
    A malformed path raises ValueError."""
    if not path:
        raise ValueError("the path is empty")
    steps: list[str | int] = []
    for segment in path.split("."):
        if not segment:
            raise ValueError(f"empty segment in '{path}'")
        m = _INDEXED.match(segment)
        if m:
            steps += [m.group(1), int(m.group(2))]
        elif "[" in segment or "]" in segment:
            raise ValueError(f"'{segment}' in '{path}': an index is written key[0], one per "
                             "segment")
        else:
            steps.append(segment)
    return steps


def walk(data: Any, steps: Sequence[str | int]) -> Any:
    for step in steps:
        if isinstance(step, int):
            if not isinstance(data, list) or step >= len(data):
                return UNRESOLVED
            data = data[step]
        elif isinstance(data, dict) and step in data:
            data = data[step]
        else:
            return UNRESOLVED
        if data is None:
            return UNRESOLVED
    return data


def as_text(value: Any) -> str:
    """The contract's step 4: numbers as String(value), objects and arrays as JSON."""
    if isinstance(value, dict | list):
        return json_stringify(value)
    return js_string(value)


def load_json_data(path: Path, what: str, flag: str) -> Any:
    """A JSON data file (the seed manifest), with a clear error when it is missing or bad."""
    try:
        return parse_json_text(path.read_text(encoding="utf-8"), str(path))
    except FileNotFoundError:
        raise ConfigError(f"{what} '{path}' not found", file=str(path),
                          hint=f"Create it, or point {flag} at it.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {what} '{path}': {e}", file=str(path)) from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{what} is not valid JSON: {e.msg} (column {e.colno})",
                          file=str(path), line=e.lineno) from None


# -- cases -------------------------------------------------------------------------------
