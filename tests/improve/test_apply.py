"""Applying suggestions: exact and whitespace-tolerant replacement, append, params, skips, diffs."""

from __future__ import annotations

from cycle.improve.apply import apply_suggestions, prompt_diff, suggestion_diff
from cycle.records import Prompt, Suggestion

PROMPT = Prompt(
    id="support",
    system="You are a support agent.\nBe   brief.\nNever promise refunds.",
    user_template="Customer: {{ input }}",
    params={"temperature": 0.7},
)


def approved(**kw) -> Suggestion:
    return Suggestion(decision="approved", **kw)


def test_exact_replacement_and_append() -> None:
    r = apply_suggestions(PROMPT, [
        approved(type="system_prompt", current_value="Never promise refunds.",
                 suggested_value="Never promise refunds; explain the policy."),
        approved(type="user_prompt", current_value="", suggested_value="Answer in English."),
    ])
    assert r.prompt.system.endswith("Never promise refunds; explain the policy.")
    assert r.prompt.user_template == "Customer: {{ input }}\n\nAnswer in English."
    assert len(r.applied) == 2 and not r.skipped


def test_whitespace_differences_are_ignored_when_no_exact_match() -> None:
    r = apply_suggestions(PROMPT, [approved(
        type="system_prompt", current_value="Be brief.", suggested_value="Be brief: three sentences at most.")])
    assert "Be brief: three sentences at most." in r.prompt.system
    assert "Be   brief." not in r.prompt.system


def test_a_slightly_misquoted_text_replaces_the_span_it_stands_for() -> None:
    """Models quote the prompt back with a comma dropped or a word changed: the closest
    run of words (at least 85% alike) is replaced, and the preview shows which."""
    prompt = PROMPT.model_copy(update={"system": (
        "You are a support agent. Answer the customer's question politely, and always cite "
        "the order number. Never promise refunds.")})
    misquoted = approved(type="system_prompt",
                         current_value="Answer the customers question politely and always cite "
                                       "the order number.",
                         suggested_value="Answer politely; cite the order number.")
    r = apply_suggestions(prompt, [misquoted])
    assert r.prompt.system == ("You are a support agent. Answer politely; cite the order number. "
                               "Never promise refunds.")
    preview = suggestion_diff(prompt, misquoted)
    assert "-You are a support agent. Answer the customer's question politely, and always" in preview
    far_off = approved(type="system_prompt", current_value="Be rude to everyone you meet today.",
                       suggested_value="x")
    r = apply_suggestions(prompt, [far_off])
    assert not r.changed and "does not occur" in r.skipped[0].reason


def test_parameters_are_merged() -> None:
    r = apply_suggestions(PROMPT, [approved(type="parameters", suggested_value='{"max_tokens": 300}')])
    assert r.prompt.params == {"temperature": 0.7, "max_tokens": 300}


def test_unappliable_suggestions_are_skipped_with_the_reason_not_dropped() -> None:
    missing = approved(type="system_prompt", current_value="Be rude.", suggested_value="Be nice.")
    bad_json = approved(type="parameters", suggested_value="temperature=0")
    not_object = approved(type="parameters", suggested_value="[1, 2]")
    broken_template = approved(type="user_prompt", current_value="{{ input }}", suggested_value="{{ input ")
    rejected = Suggestion(type="system_prompt", suggested_value="x", decision="rejected", reason="no")
    r = apply_suggestions(PROMPT, [missing, bad_json, not_object, broken_template, rejected])
    assert r.prompt == PROMPT and not r.changed
    reasons = {s.id: s.reason for s in r.skipped}
    assert all(s.decision == "skipped" for s in r.skipped)
    assert "does not occur" in reasons[missing.id]
    assert "not JSON" in reasons[bad_json.id]
    assert "JSON object" in reasons[not_object.id]
    assert "not a valid template" in reasons[broken_template.id]
    assert rejected.id not in reasons  # a rejected one is neither applied nor skipped


def test_edited_value_is_what_gets_applied() -> None:
    s = Suggestion(type="system_prompt", current_value="Be   brief.", suggested_value="Be verbose.",
                   decision="edited", edited_value="Be concise.")
    assert "Be concise." in apply_suggestions(PROMPT, [s]).prompt.system


def test_previews_are_unified_diffs() -> None:
    s = approved(type="system_prompt", current_value="Never promise refunds.", suggested_value="Offer a refund.")
    diff = suggestion_diff(PROMPT, s)
    assert "--- current/system" in diff and "+++ suggested/system" in diff
    assert "-Never promise refunds." in diff and "+Offer a refund." in diff
    assert "cannot be applied" in suggestion_diff(
        PROMPT, approved(type="system_prompt", current_value="absent", suggested_value="x"))
    after = apply_suggestions(PROMPT, [s, approved(type="parameters", suggested_value='{"temperature": 0}')]).prompt
    full = prompt_diff(PROMPT, after, a_label="1.0.0", b_label="1.0.1")
    assert "--- 1.0.0/system" in full and "+++ 1.0.1/params" in full
    assert prompt_diff(PROMPT, PROMPT) == ""
