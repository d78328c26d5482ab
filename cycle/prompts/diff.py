"""Differences between two prompt versions: one unified diff per field.

Fields are the system prompt, the user template and the parameters (as
sorted, pretty JSON so that key order never shows up as a change), and the tools, the
few-shot examples and the criteria's rubrics (the judge prompt's) when either side has
some.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

import click
from msgspec import Struct

from cycle.records import Prompt

#: the fields compared, in display order ("tools", "examples" and "rubrics" only when either
#: side has some)
FIELDS: tuple[str, ...] = ("system", "user_template", "params", "tools", "examples", "rubrics")
#: the fields diffed only when either side has them
_OPTIONAL = frozenset({"tools", "examples", "rubrics"})


def _indented(text: str) -> str:
    """A text after a label: its further lines indented under it."""
    return text.rstrip("\n").replace("\n", "\n    ")


def field_text(prompt: Prompt, name: str) -> str:
    """The text of one field as it is diffed."""
    if name == "params":
        return json.dumps(prompt.params, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if name == "tools":
        # one tool after another, description on its own lines: an edited description
        # shows as the lines that changed, not as one long changed line
        blocks = []
        for t in prompt.tools:
            head = f"{t.name}" + (f"  ({t.function})" if t.function else "")
            params = json.dumps(t.parameters, indent=2, sort_keys=True,
                                ensure_ascii=False).replace("\n", "\n  ")
            blocks.append(f"{head}\n  description: {t.description}\n  parameters: {params}\n")
        return "".join(blocks)
    if name == "examples":
        # one example after another, input and output on lines of their own: an added,
        # removed or edited example shows as its own lines
        blocks = []
        for n, e in enumerate(prompt.examples, start=1):
            shown = e.input if isinstance(e.input, str) else json.dumps(
                e.input, indent=2, sort_keys=True, ensure_ascii=False)
            head = f"example {n}" + (f"  (from case {e.source})" if e.source else "")
            blocks.append(f"{head}\n  input: {_indented(shown)}\n  output: {_indented(e.output)}\n")
        return "".join(blocks)
    if name == "rubrics":
        # one criterion after another, its rubric on a line of its own
        return "".join(f"{cid}\n  {_indented(text)}\n" for cid, text in sorted(prompt.rubrics.items()))
    return str(getattr(prompt, name))


class FieldDiff(Struct, frozen=True):
    """The unified diff of one field; ``lines`` is empty when it did not change."""

    field: str
    lines: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.lines)

    @property
    def text(self) -> str:
        return "".join(line if line.endswith("\n") else line + "\n" for line in self.lines)


class VersionDiff(Struct, frozen=True):
    """Per-field differences from version ``a`` to version ``b`` of one prompt."""

    prompt_id: str
    a: str
    b: str
    fields: tuple[FieldDiff, ...]

    @property
    def changed(self) -> bool:
        return any(f.changed for f in self.fields)

    def field(self, name: str) -> FieldDiff:
        for f in self.fields:
            if f.field == name:
                return f
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"prompt_id", "a", "b", "changed", "fields": {name: {"changed", "diff"}}}``."""
        return {
            "prompt_id": self.prompt_id,
            "a": self.a,
            "b": self.b,
            "changed": self.changed,
            "fields": {f.field: {"changed": f.changed, "diff": f.text} for f in self.fields},
        }

    def render(self, *, color: bool = False, words: bool = False) -> str:
        """The diffs of the changed fields, one after another; coloured for a terminal.
        ``words``: a removed line and the added line that replaced it are shown as one
        line of word changes (``~ keep [-old-]{+new+} keep``), as ``git diff
        --word-diff`` does: a one-line system prompt edited by a word is one line, not a
        red line and a green one."""
        if not self.changed:
            return f"{self.prompt_id}: {self.a} and {self.b} have the same content\n"
        out: list[str] = []
        for f in self.fields:
            if not f.changed:
                continue
            lines = lines_of(f.text)
            for line in (word_level(lines, color=color) if words else lines):
                out.append(line if line.startswith("~") else _colour(line, color))
        return "".join(out)


def _colour(line: str, color: bool) -> str:
    if not color:
        return line
    from cycle.safetext import printable

    # coloured output goes to the terminal as it is (cycle.safetext.raw): what the prompt
    # holds is made printable here, before cycle's own colours are added
    body = printable(line.rstrip("\n"))
    line = body + "\n" if line.endswith("\n") else body
    end = line[len(body):]
    if body.startswith(("+++", "---")):
        return click.style(body, bold=True) + end
    if body.startswith("@@"):
        return click.style(body, fg="cyan") + end
    if body.startswith("+"):
        return click.style(body, fg="green") + end
    if body.startswith("-"):
        return click.style(body, fg="red") + end
    if body.startswith("\\"):
        return click.style(body, dim=True) + end
    return line


def _changed_words(old: str, new: str, *, color: bool) -> str:
    """``old`` -> ``new`` as one line: kept words plain, removed ``[-...-]``, added
    ``{+...+}`` (struck red and green on a terminal)."""
    from cycle.safetext import printable

    a, b = re.split(r"(\s+)", old), re.split(r"(\s+)", new)
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(printable("".join(a[i1:i2])) if color else "".join(a[i1:i2]))
            continue
        gone, came = "".join(a[i1:i2]), "".join(b[j1:j2])
        if color:
            gone, came = printable(gone), printable(came)
        if gone:
            out.append(click.style(f"[-{gone}-]", fg="red") if color else f"[-{gone}-]")
        if came:
            out.append(click.style(f"{{+{came}+}}", fg="green") if color else f"{{+{came}+}}")
    return "".join(out)


def word_level(lines: list[str], *, color: bool = False) -> list[str]:
    """A unified diff's lines with each run of removed lines followed by as many added
    lines turned into word-change lines (``~``); other lines as they were."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        gone = []
        while i < len(lines) and lines[i].startswith("-") and not lines[i].startswith("---"):
            gone.append(lines[i])
            i += 1
        came = []
        while i < len(lines) and lines[i].startswith("+") and not lines[i].startswith("+++"):
            came.append(lines[i])
            i += 1
        if gone and len(gone) == len(came):
            for old, new in zip(gone, came, strict=True):
                out.append("~" + _changed_words(old[1:].rstrip("\n"), new[1:].rstrip("\n"),
                                                color=color) + "\n")
        else:
            out += gone + came
        if not gone and not came:
            out.append(lines[i])
            i += 1
    return out


def lines_of(text: str) -> list[str]:
    """``text``'s lines with their ends, ended at ``\\n`` only. ``str.splitlines`` also ends
    one at ``\\r``, ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029, which
    a prompt or an improver's edit may hold: its diff broke the line there and said "No
    newline at end of field" in the middle of the field."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _unified(name: str, old: str, new: str, a: str, b: str) -> tuple[str, ...]:
    if old and new and not old.endswith("\n") and not new.endswith("\n"):
        # neither side ends its last line (a prompt field seldom does): both are ended, so
        # that a line added after the last shows as added alone, not as the last line
        # removed and added again with its newline (what the marker below says stays
        # true: only a side whose newline really differs gets one)
        old, new = old + "\n", new + "\n"
    old_lines, new_lines = lines_of(old), lines_of(new)
    out: list[str] = []
    for line in difflib.unified_diff(old_lines, new_lines, f"{a}/{name}", f"{b}/{name}"):
        if not line.endswith("\n"):
            # the last line had no newline: say so, like diff(1), instead of gluing lines
            out.append(line + "\n")
            out.append("\\ No newline at end of field\n")
        else:
            out.append(line)
    return tuple(out)


def diff_prompts(old: Prompt, new: Prompt, *, a: str, b: str, prompt_id: str | None = None) -> VersionDiff:
    """Compare two prompts field by field; ``a`` and ``b`` label the two sides."""
    names = [n for n in FIELDS if n not in _OPTIONAL or getattr(old, n) or getattr(new, n)]
    fields = tuple(
        FieldDiff(name, _unified(name, field_text(old, name), field_text(new, name), a, b))
        for name in names
    )
    return VersionDiff(prompt_id=prompt_id or new.id, a=a, b=b, fields=fields)
