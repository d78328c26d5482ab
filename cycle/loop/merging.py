"""Merge (GEPA's): two frontier versions whose gains fall on different cases, their edits
applied together, the result evaluated like any other candidate.

The pair: two versions on the Pareto frontier, neither descended from the other, with a
common ancestor in the cycle, each scoring higher than the other on some case (the more
cases each wins, the better the pair). The merge is three-way, from the ancestor: an edit
only one of them made is taken as it is; word by word, so that two edits of different
sentences of one paragraph both land; where both only added words at the same place
(two directives appended), both additions are kept. Edits that change the same words
differently conflict: the merged prompt keeps the first version's words there, and the improver is
shown both sides and the cases the second version wins, and resolves them.

Few-shot examples merge by their input: an example only one version added, removed or
changed since the ancestor is taken as it is; one both changed differently conflicts (the
first's kept).

The merged edits reach the prompt as suggestions on the first version, so that a person
reviews a merge as any other candidate (each field's change, and why), a policy decides
it, and a resumed round reads them back instead of merging again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from merge3 import Merge3
from msgspec import Struct

from cycle.loop.acceptance import Evaluation
from cycle.loop.population import TIE, frontier
from cycle.records import Example, Prompt, Suggestion

#: a word, or a run of spaces: what a text merge compares (apart, so that a sentence
#: added after the last leaves the last as it was)
_WORDS = re.compile(r"\s+|\S+")


class MergePair(Struct, frozen=True):
    """Two frontier versions to merge, their common ancestor, and the cases each wins."""

    first: str
    second: str
    base: str
    first_wins: tuple[str, ...]
    second_wins: tuple[str, ...]


class Conflict(Struct, frozen=True):
    """Where the two versions edited the same words differently."""

    field: str
    base: str
    first: str
    second: str


def ancestry(version: str, parent_of: Callable[[str], str | None]) -> list[str]:
    """``version`` and its ancestors, nearest first."""
    out = [version]
    while (parent := parent_of(out[-1])) is not None and parent not in out:
        out.append(parent)
    return out


def merge_pair(pool: Sequence[Evaluation], parent_of: Callable[[str], str | None],
               tried: set[frozenset[str]], held_out: frozenset[str] = frozenset()
               ) -> MergePair | None:
    """The frontier pair whose gains fall most on different cases (the smaller of the two
    win counts, largest first; the frontier's order on ties), not tried before; None when
    no two frontier versions are complementary. Held-out cases choose nothing."""
    front = [e for e, _ in frontier(pool, held_out)]
    # each version's ancestors once (a parent not in the pool is a read of the store)
    up = {e.version: ancestry(e.version, parent_of) for e in front}
    best: tuple[int, MergePair] | None = None
    for i, a in enumerate(front):
        for b in front[i + 1:]:
            if frozenset((a.version, b.version)) in tried:
                continue
            up_a, up_b = up[a.version], set(up[b.version])
            if a.version in up_b or b.version in up_a:
                continue  # one holds the other's edits already
            base = next((v for v in up_a if v in up_b), None)
            if base is None:
                continue
            shared = sorted((a.case_scores.keys() & b.case_scores.keys()) - held_out)
            a_wins = tuple(c for c in shared if a.case_scores[c] > b.case_scores[c] + TIE)
            b_wins = tuple(c for c in shared if b.case_scores[c] > a.case_scores[c] + TIE)
            worth = min(len(a_wins), len(b_wins))
            if worth and (best is None or worth > best[0]):
                best = (worth, MergePair(a.version, b.version, base, a_wins, b_wins))
    return best[1] if best else None


def merge_text(base: str, first: str, second: str) -> tuple[str, bool]:
    """The three-way merge of a text, word by word; True when it conflicts (the first's
    words kept there)."""
    if first == second or second == base:
        return first, False
    if first == base:
        return second, False
    words = Merge3(_WORDS.findall(base), _WORDS.findall(first), _WORDS.findall(second))
    out: list[str] = []
    conflicted = False
    for region in words.merge_regions():
        kind, *at = region
        if kind == "unchanged":
            out += words.base[at[0]:at[1]]
        elif kind in ("a", "same"):
            out += words.a[at[0]:at[1]]
        elif kind == "b":
            out += words.b[at[0]:at[1]]
        elif at[0] == at[1]:  # both only added words here: both additions, the first's first
            out += words.a[at[2]:at[3]] + words.b[at[4]:at[5]]
        else:  # both changed the same words: (base, a, b) ranges
            conflicted = True
            out += words.a[at[2]:at[3]]
    return "".join(out), conflicted


def merge_params(base: Mapping[str, Any], first: Mapping[str, Any],
                 second: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Parameters merged key by key; the keys both changed differently (the first's kept)."""
    out, conflicts = dict(first), []
    for key in sorted(set(base) | set(first) | set(second)):
        was, a, b = base.get(key), first.get(key), second.get(key)
        if b == was or a == b:
            continue
        if a == was:
            if key in second:
                out[key] = b
            else:
                out.pop(key, None)
        else:
            conflicts.append(key)
    return out, conflicts


def _key(example: Example) -> str:
    return json.dumps(example.input, sort_keys=True, ensure_ascii=False)


def merge_examples(base: tuple[Example, ...], first: tuple[Example, ...],
                   second: tuple[Example, ...]) -> tuple[tuple[Example, ...], list[Conflict]]:
    """Examples merged by input: the second's additions, removals and changes since
    ``base`` applied to the first's, in the first's order then the second's additions;
    where both changed one example differently, the first's is kept and it conflicts."""
    was = {_key(e): e for e in base}
    mine = {_key(e): e for e in first}
    theirs = {_key(e): e for e in second}
    out = dict(mine)
    conflicts: list[Conflict] = []

    def shown(e: Example | None) -> str:
        return "" if e is None else json.dumps(e.canonical(), ensure_ascii=False)

    for key in [*was, *(k for k in theirs if k not in was)]:
        old, a, b = was.get(key), mine.get(key), theirs.get(key)
        if b == old or a == b:
            continue  # the second did not change it, or both made the same change
        if a == old:
            if b is None:
                out.pop(key, None)
            else:
                out[key] = b
        else:
            conflicts.append(Conflict("examples", shown(old), shown(a), shown(b)))
    return tuple(out.values()), conflicts


def merge_prompts(base: Prompt, first: Prompt, second: Prompt
                  ) -> tuple[Prompt, list[Conflict]]:
    """The second's edits since ``base`` applied to the first, and where they conflict."""
    conflicts: list[Conflict] = []
    texts: dict[str, str] = {}
    for name in ("system", "user_template"):
        merged, clash = merge_text(getattr(base, name), getattr(first, name),
                                   getattr(second, name))
        texts[name] = merged
        if clash:
            conflicts.append(Conflict(name, getattr(base, name), getattr(first, name),
                                      getattr(second, name)))
    params, clashes = merge_params(base.params, first.params, second.params)
    conflicts += [Conflict(f"params.{k}", json.dumps(base.params.get(k)),
                           json.dumps(first.params.get(k)), json.dumps(second.params.get(k)))
                  for k in clashes]
    tools = []
    for tool in first.tools:
        was, other = base.tool(tool.name), second.tool(tool.name)
        if was is None or other is None:
            tools.append(tool)
            continue
        described, clash = merge_text(was.description, tool.description, other.description)
        if clash:
            conflicts.append(Conflict(f"tool {tool.name}", was.description, tool.description,
                                      other.description))
        tools.append(tool.model_copy(update={"description": described}))
    examples, clashed = merge_examples(base.examples, first.examples, second.examples)
    conflicts += clashed
    merged = first.model_copy(update={**texts, "params": params, "tools": tuple(tools),
                                      "examples": examples})
    return merged, conflicts


def merge_suggestions(first: Prompt, merged: Prompt, pair: MergePair) -> list[Suggestion]:
    """The merge as suggestions on the first version: one a field it changes."""
    why = (f"merge: {pair.second} scores higher on {len(pair.second_wins)} case(s) where "
           f"{pair.first} scores lower, and {pair.first} on {len(pair.first_wins)} others; "
           f"{pair.second}'s edits since {pair.base}, applied to {pair.first}")
    target = list(pair.second_wins)
    out = [Suggestion(type=kind, current_value=getattr(first, name),
                      suggested_value=getattr(merged, name), reasoning=why, target_cases=target,
                      priority="high")
           for kind, name in (("system_prompt", "system"), ("user_prompt", "user_template"))
           if getattr(merged, name) != getattr(first, name)]
    changed = {k: v for k, v in merged.params.items() if first.params.get(k) != v}
    if changed:
        out.append(Suggestion(type="parameters", suggested_value=json.dumps(changed),
                              reasoning=why, target_cases=target, priority="high"))
    for tool, new in zip(first.tools, merged.tools, strict=True):
        if new.description != tool.description:
            out.append(Suggestion(type="tool_description", tool=tool.name,
                                  current_value=tool.description,
                                  suggested_value=new.description, reasoning=why,
                                  target_cases=target, priority="high"))
    had = {_key(e): e for e in first.examples}
    now = {_key(e): e for e in merged.examples}
    for key in [*had, *(k for k in now if k not in had)]:
        old, new_ = had.get(key), now.get(key)
        if old == new_:
            continue
        out.append(Suggestion(
            type="example", current_value=old.output if old else "",
            suggested_value=new_.output if new_ else "",
            source_case=(new_.source or "") if new_ else "",
            example_input=new_.input if new_ else None, reasoning=why, target_cases=target,
            priority="high"))
    return out


def conflict_note(pair: MergePair, conflicts: Sequence[Conflict]) -> dict[str, Any]:
    """What the improver is shown to resolve a merge's conflicts (beside the cases the
    second version wins, as its low cases)."""
    return {
        "instruction": (
            f"This prompt merges {pair.second}'s edits into {pair.first} (both made from "
            f"{pair.base}); where they edited the same words differently the prompt keeps "
            f"{pair.first}'s words. Propose edits that keep what makes each version win its "
            f"cases: the low cases are those {pair.second} scores higher on."),
        "conflicts": [{"field": c.field, "base": c.base, pair.first: c.first,
                       pair.second: c.second} for c in conflicts],
    }
