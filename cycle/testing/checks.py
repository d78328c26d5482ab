"""A check's context from keywords, to test a check (yours or cycle's) without a run:

    from cycle.testing.checks import check_context
    outcome = my_check.evaluate(check_context("Your order A-1 ships.", variables={"order": "A-1"}))

The case's fields (``case_id``, ``input``, ``variables``, ``expected``) and the agent's
answer (``output`` and any ``AgentResult`` field: ``trace``, ``state``, ``duration``...)."""

from __future__ import annotations

from typing import Any

from msgspec import Struct, field

from cycle.judge.checks import CheckContext
from cycle.records import AgentResult


class CaseStub(Struct, frozen=True):
    """What a check knows of a case, given as it is."""

    id: str = "c"
    input: Any = ""
    variables: dict[str, Any] = field(default_factory=dict)
    expected: Any = None


def check_context(output: str = "", *, case_id: str = "c", input: Any = "",
                  variables: dict[str, Any] | None = None, expected: Any = None,
                  **answer: Any) -> CheckContext:
    """A check's view of a case and an answer made of these values."""
    case = CaseStub(id=case_id, input=input, variables=dict(variables or {}), expected=expected)
    return CheckContext(case, AgentResult(output=output, **answer))
