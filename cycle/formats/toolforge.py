"""tool-forge eval files (seed 001, the eval runner contract), read and written.

Reading: a golden or labeled file, as an envelope (``{"metadata": ..., "cases": [...]}``) or a
bare array, becomes cycle cases. ``{{seed:path}}`` and ``{{snapshot:path}}`` tokens in the
assertion values are resolved against the seed manifest and the captured snapshot; a value
whose token does not resolve is skipped with a warning, never silently. Each case is judged
by one ``toolforge`` check (``cycle.judge.toolforge``) holding its resolved ``expect`` block;
its ``stubs`` become mocks (stub mode, the tools run as stubs), and without stubs the model's
first turn is the answer and its tool calls are never run (routing-only mode).

Writing: the ``EvalSuiteResult`` JSON of a run, field for field, with the staleness warnings
(description hash, registry size, tool version, against a tool registry file), and the
baseline diff (regressions, new passes) against an earlier result file; and the console
summary. Where the contract is ambiguous, the reading taken here is in docs/interop.md's
"Conformance" section.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from msgspec import Struct, field
from pydantic import ValidationError

from cycle.cases import TestCase
from cycle.errors import ConfigError
from cycle.judge.criteria import CriterionConfig
from cycle.judge.toolforge import (
    ASSERTION_KINDS,
    Expect,
    ToolforgeCheck,
    assess,
    calls_of,
    js_string,
    json_stringify,
    latency_ms,
)
from cycle.mocks import MockSpec
from cycle.records import IterationResult
from cycle.yamlload import LoadedYaml, config_error, parse_json_text, parse_yaml

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


def _looks_like_eval(data: Any) -> bool:
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


def _parse(p: Path) -> EvalFile | None:
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
    ef = _parse(p)
    if ef is None:
        raise ConfigError("expected {\"metadata\": ..., \"cases\": [...]} or a bare array of "
                          "cases", file=str(p), line=1)
    _check(ef)
    return ef


def _check(ef: EvalFile) -> None:
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
        _message(ef, i)
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

def _message(ef: EvalFile, i: int) -> str:
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


def _walk(data: Any, steps: Sequence[str | int]) -> Any:
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


def _as_text(value: Any) -> str:
    """The contract's step 4: numbers as String(value), objects and arrays as JSON."""
    if isinstance(value, dict | list):
        return json_stringify(value)
    return js_string(value)


class Tokens(Struct):
    """The data tokens resolve against; a source that is None resolves nothing."""

    seed: Any = None
    snapshot: Any = None
    #: why snapshot tokens do not resolve, for the warning
    snapshot_missing: str = "snapshot capture is not configured: --snapshot"

    def resolve(self, value: Any) -> tuple[Any, list[str]]:
        """``value`` with its tokens replaced (as text), or UNRESOLVED; and the tokens that
        did not resolve."""
        if not isinstance(value, str):
            return _as_text(value), []
        missing: list[str] = []

        def sub(m: re.Match[str]) -> str:
            source = self.seed if m.group(1) == "seed" else self.snapshot
            found = UNRESOLVED if source is None else _walk(source, parse_path(m.group(2)))
            if found is UNRESOLVED:
                missing.append(m.group(0))
                return ""
            return _as_text(found)

        text = TOKEN.sub(sub, value)
        return (UNRESOLVED if missing else text), missing


_SOURCE_HINT = "Tokens are {{seed:path}} or {{snapshot:path}}."
_PATH_HINT = ("A path is dot-separated keys with key[0] for array items, e.g. "
              "{{seed:holdings.equities[0].symbol}}.")


def tokens_used(ef: EvalFile) -> dict[str, list[tuple[int, str]]]:
    """source -> [(case index, token)] for every token of the file; a bad token raises a
    ConfigError naming the file, line and case."""
    used: dict[str, list[tuple[int, str]]] = {"seed": [], "snapshot": []}
    for i, case in enumerate(ef.cases):
        expect = case.get("expect") or {}
        for key in TOKEN_FIELDS:
            for text in _strings(expect.get(key)):
                for m in TOKEN.finditer(text):
                    source, token = m.group(1), m.group(0)
                    if source not in used:
                        message, hint = f"unknown token source in {token}", _SOURCE_HINT
                    else:
                        try:
                            parse_path(m.group(2))
                        except ValueError as e:
                            message, hint = f"bad token path {token}: {e}", _PATH_HINT
                        else:
                            used[source].append((i, token))
                            continue
                    raise ConfigError(f"{ef.where(i)}: {message}", file=str(ef.path),
                                      line=ef.doc.line_of((*ef.prefix, i, "expect", key)),
                                      field=f"expect.{key}", hint=hint)
    return used


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return _strings(value.get("value"))
    return []


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


class Loaded(Struct):
    """An eval file's cases for cycle, and the warnings reading them gave."""

    file: EvalFile
    cases: list[TestCase]
    #: what the tokens were resolved against
    tokens: Tokens = field(default_factory=lambda: Tokens())
    warnings: list[str] = field(default_factory=list)

    def check_of(self, case: TestCase) -> ToolforgeCheck:
        for c in case.criteria:
            if c.id == CRITERION_ID and isinstance(c.check, ToolforgeCheck):
                return c.check
        raise KeyError(case.id)


def to_cases(ef: EvalFile, tokens: Tokens) -> Loaded:
    """The file's cases as cycle cases, tokens resolved (skips warned about, never silent)."""
    out = Loaded(file=ef, cases=[], tokens=tokens)
    for i, raw in enumerate(ef.cases):
        cid = raw["id"]
        expect = dict(raw.get("expect") or {})
        if "noToolErrors" in raw and "noToolErrors" not in expect:
            expect["noToolErrors"] = raw["noToolErrors"]  # the contract lists it as a case field
        skipped_tokens: list[str] = []
        skipped = 0

        def warn(token: list[str], what: str, *, cid: str = cid,
                 skipped_tokens: list[str] = skipped_tokens) -> None:
            why = tokens.snapshot_missing if any(t.startswith("{{snapshot:") for t in token) \
                and tokens.snapshot is None else "the path is not in the data"
            out.warnings.append(f"{cid}: {', '.join(token)} did not resolve ({why}); "
                                f"{what} skipped")
            skipped_tokens.extend(token)

        for key in ("responseContains", "responseNotContains"):
            if isinstance(expect.get(key), list):
                kept = []
                for v in expect[key]:
                    text, missing = tokens.resolve(v)
                    if text is UNRESOLVED:
                        skipped += 1
                        warn(missing, f"a {key} value")
                    else:
                        kept.append(text)
                expect[key] = kept
        if isinstance(expect.get("responseContainsAny"), list):
            groups = []
            for group in expect["responseContainsAny"]:
                kept = []
                for v in group if isinstance(group, list) else [group]:
                    text, missing = tokens.resolve(v)
                    if text is UNRESOLVED:
                        warn(missing, "a responseContainsAny value")
                    else:
                        kept.append(text)
                if kept:
                    groups.append(kept)
                else:
                    skipped += 1
                    out.warnings.append(f"{cid}: a responseContainsAny group lost every value; "
                                        "the group is skipped")
            expect["responseContainsAny"] = groups
        if isinstance(expect.get("toolParams"), list):
            params = []
            for p in expect["toolParams"]:
                if isinstance(p, dict) and "value" in p and p["value"] is not None:
                    values = p["value"] if isinstance(p["value"], list) else [p["value"]]
                    resolved = [tokens.resolve(v) for v in values]
                    lost = [t for text, missing in resolved if text is UNRESOLVED for t in missing]
                    kept = [text for text, _ in resolved if text is not UNRESOLVED]
                    if lost and (not isinstance(p["value"], list) or not kept):
                        skipped += 1
                        warn(lost, f"the toolParams assertion on {p.get('tool')}."
                                   f"{p.get('paramName')}")
                        continue
                    if lost:
                        warn(lost, f"a oneOf value of {p.get('tool')}.{p.get('paramName')}")
                    p = {**p, "value": kept if isinstance(p["value"], list) else kept[0]}
                params.append(p)
            expect["toolParams"] = params
        try:
            checked = Expect.model_validate(expect)
        except ValidationError as e:
            raise config_error(e, ef.doc, prefix=(*ef.prefix, i, "expect"), what=ef.where(i),
                               model=Expect) from None
        stubs = raw.get("stubs")
        check = ToolforgeCheck(expect=checked, stubs=sorted(stubs) if stubs is not None else None,
                               skipped=skipped, skipped_tokens=skipped_tokens)
        tags = raw.get("tags")
        case = TestCase(
            id=cid, description=str(raw.get("description") or ""),
            tags=[t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
            input=_message(ef, i),
            criteria=[CriterionConfig(id=CRITERION_ID, required=True, check=check,
                                      description="the eval file's assertions (tool-forge)")],
            mocks={name: MockSpec(value=v) for name, v in (stubs or {}).items()},
            run_tools=stubs is not None,
            max_steps=(raw.get("maxTurns") or DEFAULT_MAX_TURNS) if stubs is not None else None,
        )
        case._source = f"{ef.path}:{ef.case_lines.get(cid, 1)}"
        out.cases.append(case)
    return out


def load(path: str | Path, *, seed_manifest: str | Path | None = None) -> Loaded:
    """Read an eval file and resolve its tokens (snapshot tokens stay unresolved: see
    ``to_cases`` for resolving them against a captured snapshot)."""
    return _resolve(read_eval_file(path), seed_manifest)


def _resolve(ef: EvalFile, seed_manifest: str | Path | None) -> Loaded:
    """The file's cases with seed tokens resolved. The manifest is read only when the file uses
    seed tokens (then it must exist: an error before any call, not a run of skips)."""
    used = tokens_used(ef)
    seed = None
    if used["seed"]:
        manifest = Path(seed_manifest or DEFAULT_SEED_MANIFEST)
        if not manifest.exists():
            i, token = used["seed"][0]
            raise ConfigError(
                f"{ef.where(i)} uses {token}, but the seed manifest '{manifest}' does not exist",
                file=str(ef.path), line=ef.line_of_case(i, "expect"),
                hint="Point --seed-manifest at the JSON file of seed values (default "
                f"{DEFAULT_SEED_MANIFEST}, from the folder you run in).")
        seed = load_json_data(manifest, "seed manifest", "--seed-manifest")
    return to_cases(ef, Tokens(seed=seed))


def read_cases(path: Path, base_dir: str | Path = ".") -> list[TestCase] | None:
    """cycle.yaml's case reader for eval files: the cases of the JSON file ``path``, or None
    when it is not an eval file (read and parsed once either way; the caller passes only
    .json files). Seed tokens read the default manifest under ``base_dir`` (cycle.yaml's
    folder); snapshot tokens do not resolve (``cycle run --eval`` captures a snapshot):
    each check's reason counts what was skipped."""
    ef = _parse(path)
    if ef is None or not _looks_like_eval(ef.data):
        return None
    _check(ef)
    return _resolve(ef, Path(base_dir) / DEFAULT_SEED_MANIFEST).cases


# -- the tool registry and staleness ------------------------------------------------------


class RegistryTool(Struct, frozen=True):
    name: str
    description: str
    version: str | None


def load_registry(path: str | Path) -> dict[str, RegistryTool]:
    """A tool registry: a JSON or YAML list of tools ({name, description, version}), a
    ``{"tools": [...]}`` object, or an object of name -> tool."""
    p = Path(path)
    if p.suffix.lower() in (".ts", ".js", ".mjs", ".cjs", ".tsx"):
        raise ConfigError(
            f"the tool registry '{p}' is a {p.suffix} file; cycle reads JSON or YAML", file=str(p),
            hint="Export it once, e.g. node -e \"import('./" + p.name + "').then(m => console.log("
            "JSON.stringify(Object.values(m))))\" > tools.json, and pass --tool-registry "
            "tools.json.")
    if not p.exists():
        raise ConfigError(f"tool registry '{p}' not found", file=str(p),
                          hint="Fix --tool-registry, or leave it out to skip staleness checks.")
    if p.suffix.lower() in (".yaml", ".yml"):
        from cycle.yamlload import load_yaml

        data = load_yaml(p).data
    else:
        data = load_json_data(p, "tool registry", "--tool-registry")
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if isinstance(data, dict):
        data = [{"name": k, **v} for k, v in data.items() if isinstance(v, dict)]
    if not isinstance(data, list):
        raise ConfigError("expected a list of tools, {\"tools\": [...]}, or an object of name "
                          "-> tool", file=str(p), line=1)
    tools: dict[str, RegistryTool] = {}
    for n, t in enumerate(data):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            raise ConfigError(f"tool #{n + 1} has no 'name'", file=str(p), field=f"[{n}].name")
        version = t.get("version")
        tools[t["name"]] = RegistryTool(t["name"], str(t.get("description") or ""),
                                        None if version is None else str(version))
    return tools


def description_hash(description: str) -> str:
    """The contract's ``sha256(tool.description).substring(0, 12)``."""
    return hashlib.sha256(description.encode("utf-8")).hexdigest()[:12]


def _major(version: str | None) -> str | None:
    if not version:
        return None
    return version.strip().lstrip("vV").split(".")[0]


class Staleness(Struct, frozen=True):
    warnings: list[str]
    #: the current tool's figures, for the result file's metadata
    current: dict[str, Any]
    #: the eval may not reflect the current routing contract
    stale: bool


def staleness(ef: EvalFile, registry: Mapping[str, RegistryTool] | None) -> Staleness:
    """The contract's three checks, when the file has metadata and a registry is given."""
    name = ef.tool_name
    tool = registry.get(name) if registry is not None else None
    current: dict[str, Any] = {
        "toolVersion": tool.version if tool else None,
        "descriptionHash": description_hash(tool.description) if tool else None,
        "registrySize": len(registry) if registry is not None else None,
        "evalFileHash": ef.file_hash,
    }
    meta = ef.metadata
    if meta is None or registry is None:
        return Staleness([], current, False)
    warnings: list[str] = []
    stale = False
    if tool is None and (meta.get("descriptionHash") or meta.get("toolVersion")):
        warnings.append(f"Tool {name} is not in the tool registry; its description and "
                        "version could not be checked.")
        stale = True
    if tool is not None and meta.get("descriptionHash") \
            and current["descriptionHash"] != meta["descriptionHash"]:
        warnings.append(
            f"Evals for {name} generated against description hash {meta['descriptionHash']}, "
            f"current is {current['descriptionHash']}. Results may not reflect current routing "
            "contract.")
        stale = True
    size = meta.get("registrySize")
    if isinstance(size, int | float) and not isinstance(size, bool) and len(registry) > size * 1.5:
        warnings.append(f"Registry has grown from {size:g} to {len(registry)} tools. Labeled "
                        "evals may have under-specified toolsAcceptable sets.")
    if tool is not None and meta.get("toolVersion") and tool.version \
            and _major(tool.version) != _major(str(meta["toolVersion"])):
        warnings.append(f"Tool {name} is version {tool.version}, evals were generated for "
                        f"{meta['toolVersion']}. Schema may have changed.")
    return Staleness(warnings, current, stale)


# -- the result file ---------------------------------------------------------------------


def contract_run_id() -> str:
    """The contract's ``{{uuid}}`` run id (also the cycle run's id)."""
    return str(uuid.uuid4())


def _ms(start: str, end: str) -> float:
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds() * 1000
    except ValueError:
        return 0.0


def case_result(loaded: Loaded, case: TestCase, results: Sequence[IterationResult]
                ) -> dict[str, Any]:
    """One case of the result file. With several iterations the case passes only when every
    one did; the details are the first failed (or errored) iteration's, else the first's."""
    check = loaded.check_of(case)
    ordered = sorted(results, key=lambda r: r.iteration)
    shown = next((r for r in ordered if r.status != "passed"), ordered[0]) if ordered else None
    out: dict[str, Any] = {"id": case.id, "description": case.description}
    if shown is None:
        return {**out, "passed": False, "durationMs": 0, "assertionsRun": 0,
                "assertionsSkipped": check.skipped, "error": "not run",
                "details": {"toolsCalled": [], "responseLength": 0,
                            "skippedTokens": check.skipped_tokens}}
    details = {"toolsCalled": [c.name for c in calls_of(shown.trace)],
               "responseLength": len(shown.output), "skippedTokens": check.skipped_tokens}
    if shown.status in ("error", "terminated"):
        error = shown.error or shown.status
        return {**out, "passed": False,
                "durationMs": round(_ms(shown.started_at, shown.finished_at)),
                "assertionsRun": 0, "assertionsSkipped": check.skipped,
                "error": error, "details": details}
    ms = latency_ms(shown.trace, shown.latency)
    a = assess(check.expect, response=shown.output, calls=calls_of(shown.trace),
               duration_ms=ms, stubs=check.stubs, skipped=check.skipped)
    passed = all(r.status == "passed" for r in ordered)
    row = {**out, "passed": passed, "durationMs": round(ms), "assertionsRun": a.run,
           "assertionsSkipped": a.skipped}
    if a.error:
        row["error"] = a.error
    elif not passed:
        row["error"] = "failed: " + "; ".join(v.reasoning for v in shown.verdicts if not v.passed)
    row["details"] = details
    return row


def suite_result(loaded: Loaded, results: Sequence[IterationResult], *, run_id: str,
                 started: datetime, duration_ms: float, endpoint: str, cost: float | None,
                 stale: Staleness, baseline: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``EvalSuiteResult`` of a run, field for field (plus ``stale``, the contract's
    "mark the result as stale")."""
    by_case: dict[str, list[IterationResult]] = {}
    for r in results:
        by_case.setdefault(r.case_id, []).append(r)
    cases = [case_result(loaded, c, by_case.get(c.id, ())) for c in loaded.cases]
    passed = sum(c["passed"] for c in cases)
    regressions, new_passes = diff_baseline(baseline, cases)
    return {
        "runId": run_id,
        "timestamp": started.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "tier": loaded.file.tier,
        "toolName": loaded.file.tool_name,
        "agentEndpoint": endpoint,
        "metadata": stale.current,
        "stalenessWarnings": stale.warnings,
        "stale": stale.stale,
        "cases": cases,
        "summary": {
            "totalCases": len(cases), "passed": passed, "failed": len(cases) - passed,
            "skippedAssertions": sum(c["assertionsSkipped"] for c in cases),
            "totalDurationMs": round(duration_ms),
            "estimatedCostUsd": None if cost is None else round(cost, 6),
        },
        "baselineRunId": baseline["runId"] if baseline else None,
        "regressions": regressions,
        "newPasses": new_passes,
    }


def diff_baseline(baseline: dict[str, Any] | None, cases: Sequence[dict[str, Any]]
                  ) -> tuple[list[str], list[str]]:
    """(regressions, new passes): cases that passed in the baseline and fail now, and the
    reverse. A case the baseline does not have is neither."""
    if not baseline:
        return [], []
    before = {c.get("id"): c.get("passed") for c in baseline.get("cases", [])
              if isinstance(c, dict)}
    regressions = [c["id"] for c in cases if before.get(c["id"]) is True and not c["passed"]]
    new_passes = [c["id"] for c in cases if before.get(c["id"]) is False and c["passed"]]
    return regressions, new_passes


def result_path(output_dir: Path, run_id: str) -> Path:
    return output_dir / f"{run_id}.json"


def load_baseline(output_dir: Path, run_id: str) -> dict[str, Any]:
    """An earlier run's result file from the output folder; unknown ids list the known."""
    path = result_path(output_dir, run_id)
    if path.exists():
        try:
            data = parse_json_text(path.read_text(encoding="utf-8"), str(path))
        except (OSError, ValueError) as e:
            raise ConfigError(f"baseline result '{path}' cannot be read: {e}",
                              file=str(path)) from None
        if isinstance(data, dict) and isinstance(data.get("cases"), list):
            return data
        raise ConfigError("baseline result is not an EvalSuiteResult", file=str(path))
    known = sorted(p.stem for p in output_dir.glob("*.json")) if output_dir.is_dir() else []
    raise ConfigError(
        f"baseline run '{run_id}' is not in {output_dir}",
        hint=("Known runs: " + ", ".join(known[-10:]) + ".") if known
        else "No results are there yet: run once without --baseline.")


def write_result(output_dir: Path, result: dict[str, Any]) -> Path:
    """Write the result file whole or not at all (a temporary file, then a rename)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    path = result_path(output_dir, result["runId"])
    fd, tmp = tempfile.mkstemp(dir=output_dir, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


# -- the console summary -------------------------------------------------------------------

WIDTH = 67


def render_summary(result: dict[str, Any], *, warnings: Sequence[str] = ()) -> str:
    """The contract's human-readable summary; regressions stand out at the end."""
    title = f"═══ {result['toolName']} — {result['tier']} evals "
    lines = [title + "═" * max(3, WIDTH - len(title))]
    cases = result["cases"]
    id_w = max((len(c["id"]) for c in cases), default=0)
    desc_w = min(48, max((len(c["description"]) for c in cases), default=0))
    for c in cases:
        mark = "✓" if c["passed"] else "✗"
        desc = c["description"] if len(c["description"]) <= desc_w \
            else c["description"][:desc_w - 1] + "…"
        lines.append(f"  {mark} {c['id']:<{id_w}}  {desc:<{desc_w}}  {c['durationMs']:>6}ms")
        if not c["passed"]:
            lines.append(f"    → {c.get('error') or 'failed'}")
    s = result["summary"]
    lines.append("─" * WIDTH)
    cost = s.get("estimatedCostUsd")
    lines.append(f"  {s['passed']}/{s['totalCases']} passed | {s['failed']} failed | "
                 f"{s['skippedAssertions']} skipped assertions | {s['totalDurationMs']}ms total"
                 + (f" | ${cost:.4f}" if cost else ""))
    for w in [*result["stalenessWarnings"], *warnings]:
        lines.append(f"  ⚠ {w}")
    if result.get("baselineRunId"):
        regressions, new = result["regressions"], result["newPasses"]
        if regressions:
            lines.append(f"  ✗ {len(regressions)} REGRESSION{'S' if len(regressions) != 1 else ''}"
                         f" since {result['baselineRunId']}:")
            lines += [f"      ✗ {r}" for r in regressions]
        else:
            lines.append(f"  no regressions since {result['baselineRunId']}")
        if new:
            lines.append(f"  ✓ {len(new)} new pass{'es' if len(new) != 1 else ''}: "
                         + ", ".join(new))
    return "\n".join(lines)
