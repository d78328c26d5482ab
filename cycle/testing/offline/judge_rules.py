"""Rules a judge is told, in the offline world: what makes ``cycle judge improve`` testable.

A *rule* is a sentence that names what a reply lacks in one of the world's features' own
words (``Feature.missing_phrase``, cycle.testing.offline.world) and says that it fails::

    Rule: a reply that does not cite the order number fails, whatever else it does well.
    For 'helpful': a reply that does not cite the order number fails.

The offline judge reads rules in the judge prompt's system message (for the criteria the
sentence names in single quotes; every criterion when it names none) and in a criterion's
own description (for that criterion). A reply a rule fails, where the feature applies (an
order number to cite), scores at most ``RULE_CAP`` on those criteria, and the reasoning
says so.

The offline improver, shown a judge prompt (id ``cycle-judge``) and the labelled outputs
it disagrees with people on (``cycle judge improve``), proposes the one rule that explains
most of the outputs it passed and people failed: the feature their replies lack (a
feature a people's note names first, then the feature most of them lack, ties in the
world's table order), skipping features the prompt already has a rule for and rules
rejected before. A rule about one criterion whose rubric the prompt carries goes into that
rubric (a ``rubric`` edit, appending the sentence); a rule about several criteria, or one
whose rubric is not carried, into the system prompt. One rule a round: two at once would
be judged together. It proposes
nothing for outputs the judge failed and people passed (it never loosens a rule), nor
when no feature is missing from those replies.
"""

from __future__ import annotations

import json
import re
from typing import Any

from msgspec import Struct

from cycle.testing.offline.world import FEATURES, Feature, parse_facts

#: the most a criterion scores on a reply a rule fails
RULE_CAP = 20

_I = re.IGNORECASE
_SENTENCE = re.compile(r"[^.!?\n]+")
_FAILS = re.compile(r"\bfail(s|ed|ing)?\b", _I)
_NAMED = re.compile(r"'([A-Za-z0-9_.-]+)'")


class Rule(Struct, frozen=True):
    """A feature a reply must have, on these criteria (empty: every criterion)."""

    feature: Feature
    criteria: frozenset[str] = frozenset()

    def covers(self, criterion: str) -> bool:
        return not self.criteria or criterion in self.criteria


def rules_in(text: str, *, criterion: str | None = None) -> list[Rule]:
    """The rules ``text`` states; ``criterion``: the text is that criterion's description
    (its rules are its own)."""
    out: list[Rule] = []
    for sentence in _SENTENCE.findall(text or ""):
        if not _FAILS.search(sentence):
            continue
        lower = sentence.lower()
        named = frozenset([criterion] if criterion else _NAMED.findall(sentence))
        out += [Rule(f, named) for f in FEATURES if f.missing_phrase.lower() in lower]
    return out


def without_rules(text: str) -> str:
    """``text`` without the sentences that state rules: what a criterion's description
    says it is about (its keywords), a rule in it being applied as a rule, not read as
    one more quality to score."""
    rules = [m for m in _SENTENCE.finditer(text or "")
             if _FAILS.search(m.group(0)) and rules_in(m.group(0))]
    for m in reversed(rules):
        text = text[:m.start()] + text[m.end():]
    return text


def apply_rules(rules: list[Rule], criterion: str, facts: Any, output: str,
                score: int, reasoning: str) -> tuple[int, str]:
    """A criterion's score and reasoning after the rules that cover it."""
    for rule in rules:
        f = rule.feature
        if rule.covers(criterion) and f.applies(facts) and not f.detect(output):
            score = min(score, RULE_CAP)
            reasoning = f"{reasoning} By the rule it fails: it {f.missing_phrase}.".strip()
    return score, reasoning


def rule_sentence(f: Feature, criteria: list[str], *, rubric: bool = False) -> str:
    """The sentence that states the rule for ``f`` (naming ``criteria`` when given; in a
    ``rubric``, the criterion's own, naming none)."""
    scope = "A" if rubric else (f"For {', '.join(repr(c) for c in criteria)}: a" if criteria
                                 else "Rule: a")
    return f"{scope} reply that {f.missing_phrase} fails, whatever else it does well."


def _verdict(text: Any) -> dict[str, Any]:
    """The judge's verdict a low case shows as its output (JSON), or {}."""
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def propose_rule(block: dict[str, Any]) -> list[dict[str, Any]]:
    """The improver's suggestions for a judge prompt (see the module docstring)."""
    prompt = block.get("prompt") if isinstance(block.get("prompt"), dict) else {}
    system = str(prompt.get("system") or "")
    rubrics = prompt.get("rubrics") if isinstance(prompt.get("rubrics"), dict) else {}
    refused = {r.feature.name for x in block.get("rejected") or () if isinstance(x, dict)
               for r in rules_in(str(x.get("suggested_value") or ""))}
    missing: dict[str, list[str]] = {f.name: [] for f in FEATURES}
    noted: dict[str, int] = {f.name: 0 for f in FEATURES}
    criteria: list[str] = []
    for case in block.get("low_cases") or ():
        if not isinstance(case, dict) or not isinstance(case.get("input"), dict):
            continue  # an input cut to text by the improver's budget: nothing to read
        people = case.get("expected") if isinstance(case.get("expected"), dict) else {}
        if not (_verdict(case.get("output")).get("passed") is True
                and people.get("passed") is False):
            continue  # only what the judge passed and people failed
        judged = case["input"]
        reply, facts = str(judged.get("output") or ""), parse_facts(judged.get("input"))
        notes = " ".join(str(n) for n in people.get("notes") or ())
        for f in FEATURES:
            if f.applies(facts) and not f.detect(reply):
                missing[f.name].append(str(case.get("id")))
                noted[f.name] += bool(f.trigger.search(notes)
                                      or f.missing_phrase.lower() in notes.lower())
        if judged.get("criterion") and judged["criterion"] not in criteria:
            criteria.append(str(judged["criterion"]))
    # one criterion whose rubric is carried: the rule is that rubric's
    rubric = criteria[0] if len(criteria) == 1 and criteria[0] in rubrics else None
    have = {r.feature.name for r in rules_in(system) if rubric is None or r.covers(rubric)}
    if rubric is not None:
        have |= {r.feature.name for r in rules_in(str(rubrics[rubric]), criterion=rubric)}
    order = {f.name: i for i, f in enumerate(FEATURES)}
    ranked = sorted((f for f in FEATURES if missing[f.name] and f.name not in have | refused),
                    key=lambda f: (-noted[f.name], -len(missing[f.name]), order[f.name]))
    if not ranked:
        return []
    f = ranked[0]
    ids = missing[f.name]
    where = {"type": "rubric", "criterion": rubric} if rubric else {"type": "system_prompt"}
    return [{
        **where, "priority": "high", "current_value": "",
        "suggested_value": rule_sentence(f, criteria, rubric=rubric is not None),
        "reasoning": (f"In {len(ids)} labelled outputs the judge passed and people failed, the "
                      f"reply {f.missing_phrase}; "
                      + (f"the rubric of {rubric!r} has no rule for it." if rubric else
                         "the judge prompt has no rule for it.")),
        "expected_improvement": f"agreement with people on {len(ids)} labelled outputs",
        "target_cases": ids,
    }]
