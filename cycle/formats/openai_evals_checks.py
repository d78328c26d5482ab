"""openai/evals' judgements that cycle's built-in checks do not make, as ``python`` checks
(``cycle import openai-evals`` names them in cycle.yaml).

``fuzzy_match``: ``evals.elsuite.basic.fuzzy_match:FuzzyMatch``. The answer and each ideal
answer are normalized as ``evals.elsuite.utils.normalize`` does (lower case; ASCII
punctuation removed; the words a, an, the removed; whitespace collapsed); the answer
matches an ideal answer when either contains the other (when either is empty, only when
both are). It passes when it matches one of the case's ideal answers (its ``ideals``
variable, else its ``expected``)."""

from __future__ import annotations

import re
import string

from cycle.judge.checks import CheckContext

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def normalized(text: str) -> str:
    """``text`` as openai/evals normalizes an answer before a fuzzy match."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def fuzzy(answer: str, ideal: str) -> bool:
    """openai/evals' fuzzy match: either normalized text contains the other."""
    a, b = normalized(answer), normalized(ideal)
    if not a or not b:
        return a == b
    return a in b or b in a


def fuzzy_match(ctx: CheckContext) -> tuple[float, str]:
    ideals = ctx.input.get("ideals") if isinstance(ctx.input, dict) else None
    if not isinstance(ideals, list):
        ideals = [] if ctx.expected is None else [ctx.expected]
    if not ideals:
        return 0.0, "no ideal answer (the case has no ideals and no expected)"
    matched = [str(i) for i in ideals if fuzzy(ctx.output, str(i))]
    if matched:
        return 100.0, f"matches the ideal answer {matched[0][:80]!r} (normalized, one contains the other)"
    return 0.0, f"matches none of {len(ideals)} ideal answer(s) (normalized, one containing the other)"
