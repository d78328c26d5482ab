"""The offline judge: scores a reply per criterion by the world's features.

Each criterion is matched by keywords in its id and description to what it
cares about (tone -> greeting, apology, sign-off; accuracy -> the right
resolution, the order number, overlap with the reference; ...). When a
reference reply is given, only the features the reference has count, so the
judge asks for what the reference shows and nothing else. Rules written in the
judge prompt or a criterion's description ("a reply that does not cite the
order number fails") cap the score of a reply they fail
(cycle.testing.offline.judge_rules).
"""

from __future__ import annotations

import re
from typing import Any

from msgspec import Struct

from cycle.testing.offline import schema as js
from cycle.testing.offline.judge_rules import apply_rules, rules_in, without_rules
from cycle.testing.offline.world import (
    FEATURES,
    GENERIC,
    Facts,
    Feature,
    feature,
    parse_facts,
    topic_of,
)

_I = re.IGNORECASE

#: criterion keywords -> the features that criterion cares about
FEATURE_GROUPS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"\b(tone|polite\w*|courte\w*|friendl\w*|empath\w*|warm\w*|kind|respectful"
                r"|professional\w*|manners)\b", _I), ("greet", "apologise", "sign_off")),
    (re.compile(r"\b(personal\w*|by name|customer'?s name)\b", _I), ("greet", "order")),
    (re.compile(r"\b(greet\w*|salutation)\b", _I), ("greet",)),
    (re.compile(r"\b(apolog\w*|sorry)\b", _I), ("apologise",)),
    (re.compile(r"\b(order numbers?|order ids?)\b", _I), ("order",)),
    (re.compile(r"\b(actionable|next steps?|action|helpful\w*|useful\w*|step by step|steps"
                r"|guidance|instructions?|what to do)\b", _I), ("next_step",)),
    (re.compile(r"\b(concise\w*|brief\w*|short|succinct\w*|verbos\w*|length|clarity|clear"
                r"|to the point)\b", _I), ("concise",)),
    (re.compile(r"\b(sign ?off|closing|signature)\b", _I), ("sign_off",)),
)
_ACCURACY = re.compile(r"\b(accura\w*|correct\w*|factual\w*|complete\w*|facts?|truth\w*"
                       r"|hallucinat\w*)\b", _I)
_RELEVANCE = re.compile(r"\b(relevan\w*|on topic|pertinent|answers? the question"
                        r"|address\w* the question)\b", _I)
_CONSISTENCY = re.compile(r"\b(consisten\w*|coheren\w*|contradict\w*)\b", _I)

_STOP = frozenset({
    "a", "an", "the", "and", "or", "but", "to", "of", "for", "in", "on", "at", "by", "with",
    "from", "your", "you", "we", "our", "us", "is", "are", "was", "be", "been", "will", "can",
    "it", "this", "that", "have", "has", "i", "i'm", "im", "as", "if", "so", "not", "no", "any",
    "all", "there", "then", "than", "into", "within", "out", "up", "do", "does", "did", "my",
    "me",
})
_GREETED_NAME = re.compile(r"^\s*(?i:hi|hello|hey|dear)\s+([A-Z][\w'-]*)")
_ORDER_REFS = re.compile(r"#\s?([A-Z]{0,3}-?\d{3,})", _I)


class Verdict(Struct, frozen=True):
    """One criterion's score and the sentence that explains it."""

    score: int
    reasoning: str


def _words(text: str) -> set[str]:
    out = set()
    for w in re.findall(r"[a-z0-9]+", (text or "").lower()):
        if w in _STOP:
            continue
        for suffix in ("ing", "ed", "s"):
            if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
                w = w[: -len(suffix)]
                break
        out.add(w)
    return out


def _sentence(parts: list[str]) -> str:
    text = "; ".join(p for p in parts if p)
    return (text[:1].upper() + text[1:] + ".") if text else ""


class _Case:
    """What is being judged, with the facts and reference features worked out once."""

    def __init__(self, source: Any, output: str, expected: str | None) -> None:
        self.output = output or ""
        self.expected = expected if isinstance(expected, str) and expected.strip() else None
        self.facts: Facts = parse_facts(source)
        reference_topic = topic_of(self.facts.question)
        if reference_topic is GENERIC and self.expected:
            reference_topic = topic_of(self.expected)
        self.topic = reference_topic

    def relevant(self, names: tuple[str, ...]) -> list[Feature]:
        feats = [feature(n) for n in names if feature(n).applies(self.facts)]
        if self.expected is not None:
            feats = [f for f in feats if f.detect(self.expected)]
        return feats

    def topic_ok(self) -> bool:
        if self.topic is GENERIC:
            return bool(self.output.strip())
        return bool(self.topic.keywords.search(self.output))

    def order_part(self) -> tuple[bool | None, str]:
        """Whether the order number is cited; None when no order number is called for."""
        order = self.facts.order
        wanted = bool(order) and (self.expected is None or feature("order").detect(self.expected))
        if not wanted:
            return None, ""
        if feature("order").detect(self.output) and order and order in self.output:
            return True, f"cites order #{order}"
        return False, f"does not cite the order number (#{order})"

    def topic_part(self) -> tuple[bool, str]:
        if self.topic_ok():
            return True, f"addresses the {self.topic.name} question"
        return False, f"does not address the {self.topic.name} question"

    # -- scorers -----------------------------------------------------------------------

    def features_verdict(self, names: tuple[str, ...]) -> Verdict:
        feats = self.relevant(names)
        if not feats:
            return Verdict(90, "Nothing the reference shows for this criterion is missing.")
        have = [f for f in feats if f.detect(self.output)]
        missing = [f for f in feats if f not in have]
        score = 30 + 70 * len(have) / len(feats)
        reason = _sentence([f.missing_phrase for f in missing] + [f.present_phrase for f in have])
        return Verdict(round(score), reason)

    def accuracy(self) -> Verdict:
        topic_ok, topic_reason = self.topic_part()
        order_ok, order_reason = self.order_part()
        parts = [topic_reason, order_reason]
        if self.expected is not None:
            ref = _words(self.expected)
            got = ref & _words(self.output)
            overlap = len(got) / len(ref) if ref else 1.0
            parts.append(f"covers {len(got)} of {len(ref)} key words of the reference")
        else:
            overlap = 1.0 if topic_ok else 0.0
        score = 20 + 40 * topic_ok + 20 * (1 if order_ok is None else order_ok) + 20 * overlap
        return Verdict(round(score), _sentence(parts))

    def relevance(self) -> Verdict:
        topic_ok, topic_reason = self.topic_part()
        order_ok, order_reason = self.order_part()
        score = 40 + 45 * topic_ok + 15 * (1 if order_ok is None else order_ok)
        return Verdict(round(score), _sentence([topic_reason, order_reason]))

    def consistency(self) -> Verdict:
        score, parts = 100, []
        greeted = _GREETED_NAME.search(self.output)
        if greeted and self.facts.customer and greeted.group(1) != self.facts.customer:
            score -= 40
            parts.append(f"greets {greeted.group(1)} but the customer is {self.facts.customer}")
        cited = set(_ORDER_REFS.findall(self.output))
        if self.facts.order and cited - {self.facts.order}:
            score -= 40
            parts.append(f"cites an order number other than #{self.facts.order}")
        return Verdict(max(score, 0), _sentence(parts) or "Nothing in the reply contradicts the input.")


def judge_criterion(case: _Case, cid: str, description: str) -> Verdict:
    """Score one criterion by the keywords of its id and description."""
    if not case.output.strip():
        return Verdict(0, "The reply is empty.")
    about = f"{cid} {description}".replace("_", " ").replace("-", " ")
    verdicts: list[Verdict] = []
    names: list[str] = []
    for rx, group in FEATURE_GROUPS:
        if rx.search(about):
            names.extend(n for n in group if n not in names)
    if names:
        verdicts.append(case.features_verdict(tuple(names)))
    if _ACCURACY.search(about):
        verdicts.append(case.accuracy())
    if _RELEVANCE.search(about):
        verdicts.append(case.relevance())
    if _CONSISTENCY.search(about):
        verdicts.append(case.consistency())
    if not verdicts:
        # a criterion we cannot place: judge the reply as a whole
        verdicts = [case.features_verdict(tuple(f.name for f in FEATURES)), case.accuracy()]
    score = round(sum(v.score for v in verdicts) / len(verdicts))
    return Verdict(max(0, min(100, score)), " ".join(v.reasoning for v in verdicts if v.reasoning))


_VERDICT_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("criterion", "criterion_id", "id", "name"),
    "score": ("score", "rating", "value", "points"),
    "reasoning": ("reasoning", "reason", "explanation", "rationale", "justification", "comment"),
    "passed": ("passed", "pass", "ok"),
}


def prefer(block: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    """The judge's answer to a ``cycle_pairwise`` request: each answer scored on the
    criterion as ``judge`` would, the higher one wins (the same whichever is shown first)."""
    c = block.get("criterion") or {}
    cid, about = str(c.get("id") or ""), without_rules(str(c.get("rubric") or ""))
    first, second = (judge_criterion(_Case(block.get("input"), str(block.get(k) or ""),
                                           block.get("expected")), cid, about)
                     for k in ("first", "second"))
    winner = ("first" if first.score > second.score else "second" if second.score > first.score
              else "tie")
    return {"reasoning": f"offline model: first {first.score}, second {second.score}",
            "winner": winner}


def judge(block: dict[str, Any], schema: dict[str, Any] | None,
          instructions: str = "") -> dict[str, Any]:
    """The judge's answer to a ``cycle_judge`` request, shaped to ``schema``;
    ``instructions``: the judge prompt's system message, whose rules it applies
    (cycle.testing.offline.judge_rules), as it does those of each criterion's description."""
    output = block.get("output")
    if not isinstance(output, str):
        output = "" if output is None else str(output)
    case = _Case(block.get("input"), output, block.get("expected"))
    told = rules_in(instructions)
    verdicts: list[tuple[str, Verdict]] = []
    for c in block.get("criteria") or []:
        if isinstance(c, dict) and c.get("id") is not None:
            cid, about = str(c["id"]), str(c.get("description") or "")
            v = judge_criterion(case, cid, without_rules(about))
            rules = told + rules_in(about, criterion=cid)
            if rules and case.output.strip():
                v = Verdict(*apply_rules(rules, cid, case.facts, case.output, v.score,
                                         v.reasoning))
            verdicts.append((cid, v))
    return _shape(verdicts, schema)


def _concepts(cid: str, v: Verdict) -> dict[str, Any]:
    return {"id": cid, "score": v.score, "reasoning": v.reasoning, "passed": v.score >= 70}


def _shape(verdicts: list[tuple[str, Verdict]], schema: dict[str, Any] | None) -> dict[str, Any]:
    plain = {cid: {"score": v.score, "reasoning": v.reasoning} for cid, v in verdicts}
    if not schema:
        return {"verdicts": plain}
    root = schema
    out, key, container = js.frame(schema, "verdicts")
    kind = js.kind(container)
    if kind == "array":
        item = js.deref(container.get("items"), root)
        out[key] = [js.fill(_concepts(cid, v), _VERDICT_ALIASES, item, root) for cid, v in verdicts]
        return out
    per_id = js.properties(container, root)
    extra = container.get("additionalProperties")
    default_item = js.deref(extra, root) if isinstance(extra, dict) else {}
    result: dict[str, Any] = {}
    for cid, v in verdicts:
        item = per_id.get(cid, default_item)
        if item:
            result[cid] = js.fill(_concepts(cid, v), _VERDICT_ALIASES, item, root)
        else:
            result[cid] = plain[cid]
    out[key] = result
    return out
