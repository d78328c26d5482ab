"""Suggestions refused before review (issue 15, item 6): repeats of refused edits, and
edits that copy a case's text into the prompt."""

from __future__ import annotations

from cycle.cases import TestCase
from cycle.improve.guard import COPY_WORDS, copies, repeats
from cycle.records import RejectedSuggestion, Suggestion


def s(value: str, current: str = "") -> Suggestion:
    return Suggestion(type="system_prompt", current_value=current, suggested_value=value)


def test_a_repeat_is_found_whatever_its_spacing_or_case() -> None:
    earlier = [RejectedSuggestion(type="system_prompt", suggested_value="Be  nice.",
                                  reason="tried in round 1; the candidate was rejected")]
    again, new = s("be nice."), s("Be brief.")
    found = repeats([again, new], earlier)
    assert list(found) == [again.id] and "tried in round 1" in found[again.id]


def test_pasting_a_cases_expected_answer_is_a_copy_and_a_rule_is_not() -> None:
    case = TestCase(id="refund", input="Where is my refund for order 1234?",
                    expected="Your refund for order 1234 was sent on Monday and arrives within five days.")
    pasted = s("When asked about refunds say: your refund for order 1234 was sent on Monday and "
               "arrives within five days.")
    rule = s("When asked about a refund, give the date it was sent and when it will arrive.")
    found = copies([pasted, rule], [case])
    assert list(found) == [pasted.id]
    assert "case 'refund''s expected answer" in found[pasted.id] and str(COPY_WORDS) in found[pasted.id]
    # quoting the prompt's own text to replace it is not a copy of the case
    assert copies([s("x", current=case.expected)], [case]) == {}
