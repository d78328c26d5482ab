"""A learnt rubric written back to cycle.yaml (``cycle judge improve``).

A run's judge reads each criterion's rubric from cycle.yaml, so a rubric edit the judge
cycle confirmed lands there: only that value is replaced, the file's comments, key order,
quoting and layout kept (ruamel.yaml's round trip). The text is read back as cycle.yaml
and must hold the config it held but for the new rubrics before it replaces the file
(atomically). A criterion whose rubric in the file is no longer the one the cycle
started from (a person edited it meanwhile) is left as the person wrote it, and said.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from msgspec import Struct

from cycle.errors import ConfigError
from cycle.judge.criteria import rubric_of, with_rubric


class RubricWrite(Struct, frozen=True):
    """What became of one learnt rubric."""

    criterion: str
    #: the entry's field that holds it (``rubric``, or ``description`` for a built-in)
    field: str
    before: str
    after: str
    written: bool
    #: where it is in cycle.yaml, once written
    line: int | None = None
    #: why it was not written
    why: str = ""


def write_rubrics(path: Path, changes: Mapping[str, tuple[str, str]]) -> list[RubricWrite]:
    """Write each criterion's learnt rubric (``changes``: id -> (the rubric the cycle
    started from, the learnt one)) into the cycle.yaml at ``path``. ConfigError, with
    nothing written, when the file cannot be rewritten to hold them exactly."""
    from ruamel.yaml.comments import CommentedMap

    from cycle.assemble.config import load_config
    from cycle.yamlload import read_text, round_trip

    loaded = load_config(path)
    entries = {c.id: c for c in loaded.config.criteria}
    out: list[RubricWrite] = []
    todo: dict[str, tuple[str, str]] = {}
    for cid, (before, after) in changes.items():
        entry = entries.get(cid)
        if entry is None:
            out.append(RubricWrite(cid, "rubric", before, after, False,
                                   why=f"{path} has no criterion {cid!r} any more"))
            continue
        field, now = rubric_of(entry)
        if now != before:
            out.append(RubricWrite(cid, field, before, after, False,
                                   why=f"its {field} in {path} was changed since the cycle "
                                   "started: left as it is there"))
            continue
        todo[cid] = (field, after)
    if not todo:
        return out
    rt, data = round_trip(read_text(path), str(path))
    for item in data["criteria"]:
        if not isinstance(item, CommentedMap) or item.get("id") not in todo:
            continue
        field, after = todo[item["id"]]
        if field in item:
            item[field] = _styled(item[field], after)
        else:  # a built-in used by id alone: its rubric goes after its id and description
            item.insert(1 + ("description" in item), field, _styled(None, after))
    text = io.StringIO()
    rt.dump(data, text)
    wanted = loaded.config.model_copy(update={"criteria": [
        with_rubric(c, todo[c.id][1]) if c.id in todo else c for c in loaded.config.criteria]})
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text.getvalue())
        written = load_config(tmp)
        if written.config != wanted:
            raise ConfigError(
                "the rewritten cycle.yaml would not hold the learnt rubrics exactly; nothing "
                "was written", file=str(path),
                hint="Paste the learnt rubric into the criterion's entry yourself (it is "
                "shown above, and stored in the judge prompt's version).")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    index = {c.id: i for i, c in enumerate(written.config.criteria)}
    for cid, (field, after) in todo.items():
        out.append(RubricWrite(cid, field, changes[cid][0], after, True,
                               line=written.doc.line_of(("criteria", index[cid], field))))
    return out


def _styled(old: Any, new: str) -> Any:
    """``new`` in the style ``old`` was written in (quoted, a literal block, plain): a
    text of several lines always a literal block."""
    from ruamel.yaml.scalarstring import (
        DoubleQuotedScalarString,
        LiteralScalarString,
        SingleQuotedScalarString,
    )

    if "\n" in new or isinstance(old, LiteralScalarString):
        return LiteralScalarString(new)
    if isinstance(old, DoubleQuotedScalarString | SingleQuotedScalarString):
        return type(old)(new)
    return new
