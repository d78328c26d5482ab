"""Example suggestions: applied (added, replaced, removed) and guarded. An example is
meant to hold an improvement case's text, so the copy and leak guards let it through; one
drawn from, or copying, a held-out case is refused, as is one past the bound."""

from __future__ import annotations

import pytest

from cycle.cases import TestCase
from cycle.improve.apply import NotApplicable, apply_one, apply_suggestions
from cycle.improve.guard import copies, example_faults, leaks
from cycle.records import Example, Prompt, Suggestion

REFUND = ("Your refund for order 1234 was sent on Monday and arrives within five days of "
          "the return.")
SECRET = ("Your replacement for order 9876 left the warehouse today and will reach you by "
          "Friday morning.")
CASES = [
    TestCase(id="refund", input={"question": "Where is my refund?"}, expected=REFUND),
    TestCase(id="late", input={"question": "Where is my parcel?"}, expected="It comes soon."),
    TestCase(id="broken", input={"question": "My lamp arrived broken this morning, what do I do now?"},
             expected=SECRET),
]
HELD_OUT = {"broken"}
PROMPT = Prompt(id="p", system="You answer customers.", user_template="Q: {{ question }}")


def example(output: str, source: str = "refund", *, current: str = "",
            given: object = None) -> Suggestion:
    case = next((c for c in CASES if c.id == source), None)
    return Suggestion(type="example", current_value=current, suggested_value=output,
                      source_case=source,
                      example_input=given if given is not None else case.input if case else None)


def test_an_example_holding_an_improvement_cases_answer_passes_every_guard() -> None:
    drawn = example(REFUND)
    assert copies([drawn], CASES) == {}  # the same text as an instruction edit is a copy
    assert leaks([drawn], PROMPT, CASES) == {}
    assert example_faults([drawn], PROMPT, CASES, held_out=HELD_OUT, most=3) == {}
    pasted = Suggestion(type="system_prompt", suggested_value=f"Answer: {REFUND}")
    assert pasted.id in copies([pasted], CASES)


@pytest.mark.parametrize("suggestion, says", [
    (example(SECRET, "broken"), "drawn from held-out case 'broken'"),
    (example(f"Hi! {SECRET}", "late"), "copies 8+ words of held-out case 'broken''s expected answer"),
    (example("We help.", "late",
             given={"question": "My lamp arrived broken this morning, what do I do?"}),
     "copies 8+ words of held-out case 'broken''s input"),
    (example("ok", "nope"), "names no case of the suite as its source ('nope')"),
])
def test_an_example_drawn_from_or_copying_a_held_out_case_is_refused_saying_why(
        suggestion: Suggestion, says: str) -> None:
    found = example_faults([suggestion], PROMPT, CASES, held_out=HELD_OUT, most=3)
    assert says in found[suggestion.id]


def test_examples_off_or_past_the_bound_are_refused_and_a_removal_makes_room() -> None:
    one = PROMPT.model_copy(update={"examples": (Example(input="x", output="old"),)})
    off = example("Fine.", "late")
    assert "few-shot examples are off" in example_faults([off], PROMPT, CASES, most=0)[off.id]
    extra = example("Fine.", "late")
    assert "more than improve.examples.max (1)" in example_faults([extra], one, CASES,
                                                                 most=1)[extra.id]
    removal = example("", current="old")
    assert example_faults([removal, extra], one, CASES, most=1) == {}


def test_adding_replacing_and_removing_examples() -> None:
    added = apply_one(PROMPT, example("Sent Monday.", "refund"))
    assert added.examples == (Example(input={"question": "Where is my refund?"},
                                      output="Sent Monday.", source="refund"),)
    # the output edited alone keeps the input; a new source brings its own
    edited = apply_one(added, example("Sent on Monday.", "", current="Sent  Monday.",
                                      given=None).model_copy(update={"example_input": None}))
    assert edited.examples[0].input == {"question": "Where is my refund?"}
    assert edited.examples[0].output == "Sent on Monday." and edited.examples[0].source == "refund"
    swapped = apply_one(edited, example("Soon.", "late", current="Sent on Monday."))
    assert swapped.examples == (Example(input={"question": "Where is my parcel?"}, output="Soon.",
                                        source="late"),)
    assert apply_one(swapped, example("", current="Soon.")).examples == ()


@pytest.mark.parametrize("suggestion, says", [
    (example("Again.", "refund"), "already has an example of this input"),
    (example("x", current="not an output of the prompt"), "no example of the prompt has"),
    (example("", "late"), "needs an output"),
    (example("Hi.", "late").model_copy(update={"example_input": None}), "needs an input"),
    (example("Hi.", "late", given="plain text"), "does not render the user template"),
])
def test_an_example_that_cannot_be_applied_is_skipped_with_the_reason(
        suggestion: Suggestion, says: str) -> None:
    prompt = PROMPT.model_copy(update={"examples": (
        Example(input={"question": "Where is my refund?"}, output="Sent Monday."),)})
    with pytest.raises(NotApplicable, match=says):
        apply_one(prompt, suggestion)
    result = apply_suggestions(prompt, [suggestion.model_copy(update={"decision": "approved"})])
    assert not result.changed and says in result.skipped[0].reason
