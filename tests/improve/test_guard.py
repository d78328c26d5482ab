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


def _prompt(user: str = "{{ question }}"):
    from cycle.records import Prompt

    return Prompt(id="p", system="You answer questions.", user_template=user)


def _cases():
    return [TestCase(id=f"c{i}", input={"question": f"q{i}"}, expected=f"REF-{i}000")
            for i in range(3)]


def _user_edit(value: str, current: str = "{{ question }}") -> Suggestion:
    return Suggestion(type="user_prompt", current_value=current, suggested_value=value)


def test_an_edit_that_makes_the_prompt_read_expected_is_a_leak() -> None:
    from cycle.improve.guard import leaks

    leak = _user_edit("{{ question }} (Reference for quality: {{ expected }})")
    hidden = _user_edit("{{ question }}{% if expected %} hint: {{ expected|upper }}{% endif %}")
    fine = _user_edit("Question: {{ question }}\nAnswer briefly.")
    found = leaks([leak, hidden, fine], _prompt(), _cases())
    assert set(found) == {leak.id, hidden.id}
    assert "{{ expected }}" in found[leak.id] and "improve.allowed_variables" in found[leak.id]
    # a variable production gives, once named, is allowed; expected too if the user says so
    assert leaks([leak], _prompt(), _cases(), allowed=["expected"]) == {}
    other = _user_edit("{{ question }} from {{ customer_tier }}")
    assert other.id in leaks([other], _prompt(), _cases())
    assert leaks([other], _prompt(), _cases(), allowed=["customer_tier"]) == {}


def test_pasting_a_short_distinctive_expected_answer_is_a_leak_and_common_words_are_not() -> None:
    from cycle.improve.guard import leaks

    pasted = Suggestion(type="system_prompt", current_value="You answer questions.",
                        suggested_value="You answer questions. Mention REF-1000 when unsure.")
    cases = [*_cases(), TestCase(id="yes", input={"question": "ok?"}, expected="Yes")]
    common = Suggestion(type="system_prompt", current_value="You answer questions.",
                        suggested_value="You answer questions. Yes or no first.")
    found = leaks([pasted, common], _prompt(), cases)
    assert list(found) == [pasted.id] and "REF-1000".casefold() in found[pasted.id]
