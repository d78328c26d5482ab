"""An eval file's cases as cycle cases: its ``{{seed:...}}`` and ``{{snapshot:...}}``
tokens resolved (or the value skipped with a warning), its stubs as mocks."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from msgspec import Struct, field
from pydantic import ValidationError

from cycle.cases import TestCase
from cycle.errors import ConfigError
from cycle.formats.toolforge.reading import (
    CRITERION_ID,
    DEFAULT_MAX_TURNS,
    DEFAULT_SEED_MANIFEST,
    TOKEN,
    TOKEN_FIELDS,
    UNRESOLVED,
    EvalFile,
    as_text,
    case_message,
    check_file,
    load_json_data,
    looks_like_eval,
    parse_file,
    parse_path,
    read_eval_file,
    walk,
)
from cycle.judge.criteria import CriterionConfig
from cycle.judge.toolforge import (
    Expect,
    ToolforgeCheck,
)
from cycle.mocks import MockSpec
from cycle.yamlload import config_error


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
            return as_text(value), []
        missing: list[str] = []

        def sub(m: re.Match[str]) -> str:
            source = self.seed if m.group(1) == "seed" else self.snapshot
            found = UNRESOLVED if source is None else walk(source, parse_path(m.group(2)))
            if found is UNRESOLVED:
                missing.append(m.group(0))
                return ""
            return as_text(found)

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

        def warn(token: list[str], what: str, *, cid: str = cid,
                 skipped_tokens: list[str] = skipped_tokens) -> None:
            why = tokens.snapshot_missing if any(t.startswith("{{snapshot:") for t in token) \
                and tokens.snapshot is None else "the path is not in the data"
            out.warnings.append(f"{cid}: {', '.join(token)} did not resolve ({why}); "
                                f"{what} skipped")
            skipped_tokens.extend(token)

        skipped = _resolve_tokens(expect, tokens, warn,
                                  lambda said, cid=cid: out.warnings.append(f"{cid}: {said}"))
        try:
            checked = Expect.model_validate(expect)
        except ValidationError as e:
            raise config_error(e, ef.doc, prefix=(*ef.prefix, i, "expect"), what=ef.where(i),
                               model=Expect) from None
        stubs = raw.get("stubs")
        check = ToolforgeCheck(expect=checked, stubs=sorted(stubs) if stubs is not None else None,
                               skipped=skipped, skipped_tokens=skipped_tokens)
        tags = raw.get("tags")
        try:
            case = TestCase(
                id=cid, description=str(raw.get("description") or ""),
                tags=[t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
                input=case_message(ef, i),
                criteria=[CriterionConfig(id=CRITERION_ID, required=True, check=check,
                                          description="the eval file's assertions (tool-forge)")],
                mocks={name: MockSpec(value=v) for name, v in (stubs or {}).items()},
                run_tools=stubs is not None,
                max_steps=(raw.get("maxTurns") or DEFAULT_MAX_TURNS) if stubs is not None
                else None,
            )
        except ValidationError as e:  # what a case refuses (an id with an escape sequence)
            raise config_error(e, ef.doc, prefix=(*ef.prefix, i), what=ef.where(i),
                               model=TestCase) from None
        case._source = f"{ef.path}:{ef.case_lines.get(cid, 1)}"
        out.cases.append(case)
    return out


def _resolve_tokens(expect: dict[str, Any], tokens: Tokens,
                    warn: Callable[[list[str], str], None],
                    note: Callable[[str], None]) -> int:
    """Resolve the tokens in ``expect``'s values in place; a value whose token does not
    resolve is dropped with a warning. The assertions skipped."""
    skipped = 0
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
                note("a responseContainsAny group lost every value; the group is skipped")
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
    return skipped


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
    ef = parse_file(path)
    if ef is None or not looks_like_eval(ef.data):
        return None
    check_file(ef)
    return _resolve(ef, Path(base_dir) / DEFAULT_SEED_MANIFEST).cases


# -- the tool registry and staleness ------------------------------------------------------
