"""Pairwise judging with the position swapped (``cycle judge pairwise BASE HEAD``).

Absolute scores drift with the judge's mood and scale; a direct comparison does not, but
judges favour a position (often the first answer shown). So each pair of outputs (the
same case and iteration in two runs) is judged twice, once in each order, on one
criterion: a preference that holds in both orders counts; one that follows the position
(first, then first again with the answers swapped) is an *order flip* and counts as a tie,
as does a tie in either order. Over the cases, the sign test (two-sided, exact) says
whether one run's outputs are preferred more often than chance would give.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Literal

from msgspec import Struct

from cycle.llm.model import Model
from cycle.records import IterationResult, Message
from cycle.records.scope import CallScope

Side = Literal["base", "head", "tie"]

#: the schema name of a pairwise call (the offline model answers it too)
SCHEMA_NAME = "cycle_pairwise"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "winner": {"type": "string", "enum": ["first", "second", "tie"]},
    },
    "required": ["reasoning", "winner"],
    "additionalProperties": False,
}
SYSTEM = (
    "You compare two answers to the same request on one criterion. Judge only that "
    "criterion; the order the answers are shown in says nothing about them. Reason briefly, "
    "then name the winner: first, second, or tie when neither is better on the criterion."
)


class Pair(Struct, frozen=True):
    """One comparison: a case's iteration in both runs, judged in both orders."""

    case: str
    iteration: int
    criterion: str
    #: the side each order preferred (base shown first, then head shown first)
    base_first: Side
    head_first: Side

    @property
    def outcome(self) -> Side:
        """The preference both orders share; a tie otherwise."""
        return self.base_first if self.base_first == self.head_first else "tie"

    @property
    def flipped(self) -> bool:
        """Each order preferred whichever answer it showed in the same position."""
        return {self.base_first, self.head_first} == {"base", "head"}


def request(criterion: str, rubric: str, case_input: Any, expected: Any, first: str,
            second: str) -> list[Message]:
    """The messages of one comparison (the pair in a fenced JSON block)."""
    block = {"criterion": {"id": criterion, "rubric": rubric}, "input": case_input,
             "expected": expected, "first": first, "second": second}
    return [Message.system(SYSTEM), Message.user(
        "Which answer is better on the criterion?\n\n```json\n"
        + json.dumps(block, ensure_ascii=False, default=str, indent=1) + "\n```")]


async def compare(model: Model, criterion: str, rubric: str, base: IterationResult,
                  head: IterationResult, *, expected: Any = None, sample: str = "",
                  scope: CallScope | None = None) -> Pair:
    """Judge ``base`` against ``head`` on ``criterion`` in both orders. ``scope``: where the
    calls belong (a cycle's round: its journal replays them on a resume, its cost is the
    round's); the case, iteration and sample are filled in."""
    sides: list[Side] = []
    within = scope or CallScope()
    for order, (first, second) in enumerate(((base, head), (head, base))):
        out = await model.generate_structured(
            request(criterion, rubric, base.input, expected, first.output, second.output),
            SCHEMA, name=SCHEMA_NAME, role="judge", iteration=base.iteration,
            scope=within.at(case_id=base.case_id, iteration=base.iteration,
                            sample=f"{sample}:{criterion}:{order}"))
        winner = out.parsed["winner"]
        shown = ("base", "head") if order == 0 else ("head", "base")
        sides.append("tie" if winner == "tie" else shown[0] if winner == "first" else shown[1])
    return Pair(case=base.case_id, iteration=base.iteration, criterion=criterion,
                base_first=sides[0], head_first=sides[1])


def sign_test(wins: int, losses: int) -> float:
    """The two-sided exact sign test's p-value of ``wins`` against ``losses`` (ties left
    out); 1.0 with no decided case."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(wins, losses) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def sign_test_greater(wins: int, losses: int) -> float:
    """The one-sided exact sign test's p-value that wins outnumber losses (ties left out):
    the chance of ``wins`` or more of ``wins + losses`` fair coin tosses; 1.0 with no
    decided case."""
    n = wins + losses
    if n == 0:
        return 1.0
    return min(1.0, sum(math.comb(n, k) for k in range(wins, n + 1)) / 2 ** n)


class Summary(Struct, frozen=True):
    """One criterion over every case: which run's outputs were preferred."""

    criterion: str
    pairs: int
    #: cases whose pairs prefer head / base on balance, and the rest
    head_cases: int
    base_cases: int
    tied_cases: int
    p_value: float
    #: the share of pairs whose verdict followed the position
    order_flips: float


def summarize(criterion: str, pairs: Sequence[Pair]) -> Summary:
    by_case: dict[str, int] = {}
    for p in pairs:
        by_case[p.case] = by_case.get(p.case, 0) + {"head": 1, "base": -1, "tie": 0}[p.outcome]
    head = sum(1 for v in by_case.values() if v > 0)
    base = sum(1 for v in by_case.values() if v < 0)
    return Summary(criterion=criterion, pairs=len(pairs), head_cases=head, base_cases=base,
                   tied_cases=len(by_case) - head - base, p_value=sign_test(head, base),
                   order_flips=sum(p.flipped for p in pairs) / len(pairs) if pairs else 0.0)
