"""The offline improver: proposes the directives for the features low cases lack.

It detects the world's features in each low case's output (and in its
reference, when there is one), counts how many cases miss each feature,
skips the features the system prompt already asks for and those whose
suggestion was rejected, and proposes the directives of the two most
frequently missing ones as system prompt edits. Shown the judge prompt
(``cycle judge improve``), it proposes a rule instead
(cycle.testing.offline.judge_rules).

When few-shot examples are on (the block has ``examples``) and the prompt holds fewer
than their ``max``, it also proposes one example: of the answers it was shown (the low
cases' references, the well-scoring cases' outputs), the one showing most features the
system prompt does not ask for, then the best scored (a reference counts as 100), then
by case id; never an input the prompt has an example of, nor an answer rejected before.
"""

from __future__ import annotations

import json
import re
from typing import Any

from cycle.records import JUDGE_PROMPT_ID
from cycle.testing.offline import schema as js
from cycle.testing.offline.judge_rules import propose_rule
from cycle.testing.offline.tools import collect_suggestions, trajectory_suggestions
from cycle.testing.offline.world import FEATURES, Feature, parse_facts

#: suggestions proposed per round at most
MAX_SUGGESTIONS = 2

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_BULLET = re.compile(r"^\s*([-*•]|\d+[.)])\s+")

_SUGGESTION_ALIASES: dict[str, tuple[str, ...]] = {
    "type": ("type", "kind"),
    "priority": ("priority",),
    "current_value": ("current_value", "current", "old_value", "find"),
    "suggested_value": ("suggested_value", "suggested", "new_value", "replacement", "value"),
    "reasoning": ("reasoning", "reason", "rationale", "why"),
    "expected_improvement": ("expected_improvement", "expected_impact", "impact"),
    "target_cases": ("target_cases", "cases", "case_ids"),
    "tool": ("tool",),
    "criterion": ("criterion",),
    "source_case": ("source_case", "source", "case"),
}


def _rejected_features(rejected: list[Any], system: str) -> set[str]:
    """Features whose directive was proposed and turned down (and is not in the prompt)."""
    out: set[str] = set()
    for r in rejected:
        if not isinstance(r, dict):
            continue
        value = str(r.get("suggested_value") or "")
        for f in FEATURES:
            if f.requested_by(value) and not f.requested_by(system):
                out.add(f.name)
    return out


def _missing_counts(cases: list[Any]) -> dict[str, list[str]]:
    """Feature name -> ids of the low cases whose output lacks it (and should have it)."""
    missing: dict[str, list[str]] = {f.name: [] for f in FEATURES}
    for i, case in enumerate(cases):
        if not isinstance(case, dict):
            continue
        cid = str(case.get("id") if case.get("id") is not None else i)
        output = str(case.get("output") or "")
        expected = case.get("expected")
        expected = expected if isinstance(expected, str) and expected.strip() else None
        facts = parse_facts(case.get("input"))
        for f in FEATURES:
            if not f.applies(facts) or f.detect(output):
                continue
            if expected is not None and not f.detect(expected):
                continue  # the reference does not want it either
            missing[f.name].append(cid)
    return missing


def _edit(system: str, directive: str) -> tuple[str, str]:
    """(current_value, suggested_value) that add ``directive`` after the prompt's last sentence.

    Replacing the last sentence by itself plus the directive works for an
    applier that substitutes text; an empty current_value (append) is used
    when the last sentence is not unique in the prompt.
    """
    text = system.rstrip()
    if not text:
        return "", directive
    last_line = text.splitlines()[-1]
    if _BULLET.match(last_line):
        marker = _BULLET.match(last_line).group(1)  # type: ignore[union-attr]
        marker = f"{int(marker[:-1]) + 1}{marker[-1]}" if marker[:-1].isdigit() else marker
        current, suggested = last_line.strip(), f"{last_line.strip()}\n{marker} {directive}"
    else:
        current = _SENTENCE_END.split(last_line.strip())[-1]
        suggested = f"{current} {directive}"
    if not current or system.count(current) != 1:
        return "", directive
    return current, suggested


def _criteria_named(cases: list[Any], f: Feature) -> list[str]:
    """Criteria whose judge reasoning names this feature as missing."""
    named: list[str] = []
    for case in cases:
        if not isinstance(case, dict):
            continue
        for v in case.get("verdicts") or []:
            if isinstance(v, dict) and f.missing_phrase.lower() in str(v.get("reasoning", "")).lower():
                crit = str(v.get("criterion") or v.get("id") or "")
                if crit and crit not in named:
                    named.append(crit)
    return named


def improve(block: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    """The improver's answer to a ``cycle_improver`` request, shaped to ``schema``."""
    prompt = block.get("prompt") if isinstance(block.get("prompt"), dict) else {}
    if prompt.get("id") == JUDGE_PROMPT_ID:  # cycle judge improve: rules, not directives
        return _shape(propose_rule(block), schema)
    system = str(prompt.get("system") or "")
    cases = [c for c in (block.get("low_cases") or []) if isinstance(c, dict)]
    rejected = _rejected_features(list(block.get("rejected") or []), system)
    missing = _missing_counts(cases)
    order = {f.name: i for i, f in enumerate(FEATURES)}
    ranked = sorted(
        (f for f in FEATURES
         if missing[f.name] and not f.requested_by(system) and f.name not in rejected),
        key=lambda f: (-len(missing[f.name]), order[f.name]),
    )[:MAX_SUGGESTIONS]
    # a failed trajectory comes first: nothing else the reply does can pass a required check
    suggestions = (trajectory_suggestions(prompt, cases)
                   + collect_suggestions(prompt, cases))[:MAX_SUGGESTIONS]
    ranked = ranked[: max(0, MAX_SUGGESTIONS - len(suggestions))]
    for rank, f in enumerate(ranked, start=len(suggestions)):
        ids = missing[f.name]
        current, suggested = _edit(system, f.directive)
        n = len(cases)
        criteria = _criteria_named(cases, f)
        gain = (f"higher {', '.join(criteria)} scores" if criteria else "higher scores")
        suggestions.append({
            "type": "system_prompt",
            "priority": "high" if rank == 0 else "medium",
            "current_value": current,
            "suggested_value": suggested,
            "reasoning": (f"In {len(ids)} of {n} low-scoring cases the reply {f.missing_phrase}"
                          f"{', unlike the reference reply' if _has_refs(cases) else ''}; "
                          f"the system prompt does not ask for it."),
            "expected_improvement": f"{gain} on {len(ids)} case{'s' if len(ids) != 1 else ''}",
            "target_cases": ids,
        })
    example = _example(block, prompt, cases, system)
    if example is not None:
        suggestions.append(example)
    return _shape(suggestions, schema)


def _example(block: dict[str, Any], prompt: dict[str, Any], cases: list[dict[str, Any]],
             system: str) -> dict[str, Any] | None:
    """One few-shot example to add, when examples are on and there is room (see above)."""
    brief = block.get("examples")
    if not isinstance(brief, dict):
        return None
    have = [e for e in prompt.get("examples") or () if isinstance(e, dict)]
    if len(have) >= int(brief.get("max") or 0):
        return None
    taken = {json.dumps(e.get("input"), sort_keys=True) for e in have}
    refused = {" ".join(str(r.get("suggested_value") or "").split())
               for r in block.get("rejected") or () if isinstance(r, dict)
               and r.get("type") == "example"}
    shown: list[tuple[str, Any, str, float, str]] = [
        (str(c["id"]), c.get("input"), c["expected"], 100.0, "reference answer")
        for c in cases
        if c.get("id") is not None and isinstance(c.get("expected"), str) and c["expected"].strip()]
    shown += [(str(c["id"]), c.get("input"), str(c.get("output") or ""),
               float(c.get("score") or 0), "answer") for c in brief.get("candidates") or ()
              if isinstance(c, dict) and c.get("id")]
    best: tuple[tuple[int, float, str], dict[str, Any]] | None = None
    for case_id, given, output, score, kind in shown:
        if (not output.strip() or json.dumps(given, sort_keys=True) in taken
                or " ".join(output.split()) in refused):
            continue
        new = [f for f in FEATURES if f.detect(output) and not f.requested_by(system)]
        rank = (-len(new), -score, case_id)
        if best is not None and rank >= best[0]:
            continue
        missing = _missing_counts(cases)
        targets = sorted({cid for f in new for cid in missing[f.name]})
        what = ", ".join(f.present_phrase for f in new) or "the reply wanted"
        best = (rank, {
            "type": "example",
            "priority": "medium",
            "current_value": "",
            "suggested_value": output,
            "source_case": case_id,
            "reasoning": (f"Case {case_id}'s {kind} {what}: shown as an example, it "
                          "demonstrates what the low cases miss."),
            "expected_improvement": f"higher scores on {len(targets) or 'the'} low case"
                                    f"{'' if len(targets) == 1 else 's'}",
            "target_cases": targets,
        })
    return best[1] if best else None


def _has_refs(cases: list[dict[str, Any]]) -> bool:
    return any(isinstance(c.get("expected"), str) and c["expected"].strip() for c in cases)


def _shape(suggestions: list[dict[str, Any]], schema: dict[str, Any] | None) -> dict[str, Any]:
    if not schema:
        return {"suggestions": suggestions}
    root = schema
    out, key, container = js.frame(schema, "suggestions")
    item = js.deref(container.get("items"), root) if js.kind(container) == "array" else {}
    out[key] = [js.fill(s, _SUGGESTION_ALIASES, item, root) if item else s for s in suggestions]
    return out
