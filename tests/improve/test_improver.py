"""The improver call: what it sends (ending with the JSON block), what it returns, its budget."""

from __future__ import annotations

import asyncio
import json

import pytest

from cycle.errors import StructuredOutputError
from cycle.improve.improver import (
    IMPROVER_PROMPT_ID,
    CriterionVerdict,
    Improver,
    ImproverInput,
    LowCase,
    ensure_improver_prompt,
    fit_cases,
)
from cycle.llm.registry import get_model
from cycle.records import Prompt, RejectedSuggestion
from cycle.store import Store
from cycle.testing import script

PROMPT = Prompt(id="support", system="You help.", user_template="Q: {{ input }}", params={"temperature": 0.5})
INPUT = ImproverInput(
    prompt=PROMPT, aggregates={"score": 42.0, "pass_threshold": 70},
    low_cases=[LowCase(id="c1", input={"q": "where?"}, output="dunno", expected="It ships Monday.", score=20,
                       verdicts=[CriterionVerdict(criterion="accuracy", score=20, reasoning="no date")])],
    rejected=[RejectedSuggestion(type="system_prompt", suggested_value="Be rude.", reason="rejected by the reviewer: no")],
)


def test_the_user_message_ends_with_the_json_block_the_offline_model_reads() -> None:
    system, user = Improver(model=None).messages(INPUT)  # type: ignore[arg-type]
    assert "prompt engineer" in system.content
    assert user.content.rstrip().endswith("```")
    block = json.loads(user.content.rsplit("```json", 1)[1].rsplit("```", 1)[0])
    assert set(block) == {"prompt", "aggregates", "low_cases", "rejected"}
    assert block["prompt"] == {"id": "support", "system": "You help.", "user_template": "Q: {{ input }}",
                               "params": {"temperature": 0.5}}
    assert block["low_cases"][0]["verdicts"][0] == {"criterion": "accuracy", "score": 20, "reasoning": "no date"}
    assert block["rejected"][0]["reason"].startswith("rejected by the reviewer")
    assert "{{ input }}" in system.content  # the instructions tell a real model to keep variables


def test_propose_returns_sorted_suggestions_from_one_structured_call() -> None:
    s = script("imp", [{"suggestions": [
        {"type": "parameters", "priority": "low", "current_value": "", "suggested_value": '{"temperature": 0}'},
        {"type": "system_prompt", "priority": "high", "current_value": "You help.",
         "suggested_value": "You help, citing dates.", "target_cases": ["c1"]},
    ]}])
    with s:
        out = asyncio.run(Improver(get_model("scripted:imp")).propose(INPUT, context={"round": 1}))
    assert [x.priority for x in out] == ["high", "low"] and out[0].target_cases == ["c1"]
    assert all(x.decision == "pending" for x in out)
    assert len(s.calls) == 1 and s.calls[0].config.response_schema_name == "cycle_improver"


def test_an_answer_off_the_schema_is_an_error_not_an_empty_round() -> None:
    with script("bad", [{"nope": 1}, {"still": "nope"}]), pytest.raises(StructuredOutputError):
        asyncio.run(Improver(get_model("scripted:bad")).propose(INPUT))


def test_low_cases_are_cut_to_the_token_budget_lowest_first() -> None:
    cases = [LowCase(id=f"c{i}", output="x" * 5000, score=float(i)) for i in reversed(range(40))]
    kept = fit_cases(cases, max_tokens=1000)
    assert 1 <= len(kept) < 40 and [c.id for c in kept] == [f"c{i}" for i in range(len(kept))]
    assert sum(len(c.model_dump_json()) for c in kept) <= 1000 * 4
    assert kept[0].output.endswith("[truncated]")
    assert len(fit_cases(cases[:1], max_tokens=10)) == 1  # always some evidence


def test_the_improver_prompt_is_a_versioned_prompt_in_the_store(tmp_path) -> None:
    store = Store.open(tmp_path / "s.db")
    prompt, version = ensure_improver_prompt(store)
    assert version == "1.0.0" and prompt.id == IMPROVER_PROMPT_ID
    edited = prompt.model_copy(update={"system": prompt.system + "\nBe terse."})
    store.save_version(edited, message="terser")
    prompt2, version2 = ensure_improver_prompt(store)
    assert version2 == "1.0.1" and prompt2.system.endswith("Be terse.")
    assert ensure_improver_prompt(store, f"{IMPROVER_PROMPT_ID}@1.0.0")[1] == "1.0.0"
