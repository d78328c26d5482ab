"""Few-shot examples as something the improver proposes (issue 38, item 4): drawn from
improvement cases, with the case's own input, refused from a held-out case, bounded by
improve.examples.max, off by default (the improver's request then is what it always was),
and a cycle killed mid-round resumes with its examples as stored."""

from __future__ import annotations

import asyncio
import json

import pytest

from cycle import events as ev
from cycle.assemble import build_loop
from cycle.loop.review import AutoReviewer
from cycle.records import Example

from .conftest import last_json, suggestion

#: an answer with every keyword the scripted judge counts
GOOD = "Hello. sorry order thanks"


def example(source: str, output: str = GOOD, *, current: str = "") -> dict:
    return {"type": "example", "priority": "high", "current_value": current,
            "suggested_value": output, "source_case": source,
            "reasoning": f"case {source} answered well", "target_cases": ["c1"]}


def _requests(seen: list) -> tuple[str, dict, dict]:
    """The improver's system message, its ```json block and its answer's schema."""
    messages, _tools, config = seen[0]
    return messages[0].content, last_json(messages), config.response_schema


def test_an_example_from_an_improvement_case_is_applied_and_one_from_a_held_out_case_refused(
        world, store, bus_log) -> None:
    seen: list = []

    def improver(messages, tools, config):
        seen.append((messages, tools, config))
        return {"suggestions": [example("c4"), example("c2")]}

    bus, log = bus_log
    loaded = world(improver, improve={"validation": ["c4"], "examples": {"max": 2},
                                      "stop": {"max_rounds": 1}})
    result = asyncio.run(build_loop(loaded, store=store, bus=bus,
                                    reviewer=AutoReviewer()).run())

    system, block, schema = _requests(seen)
    assert "at most 2 examples" in system and "source_case" in system
    assert block["examples"]["max"] == 2
    assert "c4" not in {c["id"] for c in block["examples"]["candidates"]}
    assert "example" in json.dumps(schema) and "source_case" in json.dumps(schema)

    stored = {s.source_case: s for s in store.cycles.get_suggestions(result.cycle_id)}
    held_out = stored["c4"]
    assert held_out.decision == "rejected" and not held_out.applied
    assert "drawn from held-out case 'c4'" in held_out.reason
    assert held_out.decided_by == "cycle (tester)"  # the guard's, before review
    assert held_out.example_input is None  # the held-out case's text was never copied in
    kept = stored["c2"]
    assert kept.applied and kept.example_input == "case 2"  # the case's input, not the model's

    candidate = store.get_version("support", result.rounds[1].version)
    assert candidate.prompt.examples == (Example(input="case 2", output=GOOD, source="c2"),)
    created = next(e for e in log if isinstance(e, ev.VersionCreated))
    assert "+example 1  (from case c2)" in created.diff and "+  input: case 2" in created.diff
    decided = next(e for e in log if isinstance(e, ev.ReviewDecided))
    assert [s["source_case"] for s in decided.suggestions if s["decision"] == "rejected"] == ["c4"]


def test_examples_off_the_improver_is_asked_as_before(world, store) -> None:
    seen: list = []

    def improver(messages, tools, config):
        seen.append((messages, tools, config))
        return {"suggestions": [suggestion("Always say sorry.")]}

    loaded = world(improver, improve={"stop": {"max_rounds": 1}})
    asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run())

    system, block, schema = _requests(seen)
    assert "example" not in system.lower()
    assert "examples" not in block and "examples" not in block["prompt"]
    # the answer's schema is the one it always was: an example is not even expressible
    assert "example" not in json.dumps(schema)
    assert "say sorry" in store.resolve("support@head").prompt.system
    assert store.resolve("support@head").prompt.examples == ()


def test_the_prompt_holds_no_more_than_max_and_a_replacement_takes_the_new_cases_input(
        world, store) -> None:
    answers = iter([
        {"suggestions": [example("c2", "Hello. sorry"), example("c3", "Hello. order")]},
        {"suggestions": [example("c3", GOOD, current="Hello. sorry")]},
    ])
    loaded = world(lambda *a: next(answers),
                   improve={"examples": {"max": 1}, "stop": {"max_rounds": 2},
                            "acceptance": "always"})
    result = asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run())

    first, second = store.cycles.get_suggestions(result.cycle_id, 1)
    assert first.applied and second.decision == "rejected"
    assert "more than improve.examples.max (1)" in second.reason
    (replacement,) = store.cycles.get_suggestions(result.cycle_id, 2)
    assert replacement.applied
    final = store.get_version("support", result.rounds[2].version).prompt
    assert final.examples == (Example(input="case 3", output=GOOD, source="c3"),)


def test_a_cycle_killed_before_review_resumes_with_its_examples_as_stored(world, store) -> None:
    calls: list = []

    def improver(messages, tools, config):
        calls.append(1)
        return {"suggestions": [example("c2")]}

    loaded = world(improver, improve={"examples": {"max": 2}, "stop": {"max_rounds": 1}})
    bus = ev.EventBus()

    def kill(event):
        if isinstance(event, ev.ReviewDecided):
            raise asyncio.CancelledError

    bus.subscribe(kill)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(build_loop(loaded, store=store, bus=bus, reviewer=AutoReviewer()).run())
    (row,) = store.cycles.recent()
    (pending,) = store.cycles.get_suggestions(row.id)
    assert (pending.decision, pending.source_case, pending.example_input) == ("pending", "c2",
                                                                               "case 2")

    result = asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run(
        resume=row.id))
    assert len(calls) == 1  # the improver was not asked again
    candidate = store.get_version("support", result.rounds[1].version)
    assert candidate.prompt.examples == (Example(input="case 2", output=GOOD, source="c2"),)


def test_improve_examples_is_validated_with_a_clear_error(world) -> None:
    from cycle.assemble.improve import load_improve_config
    from cycle.errors import ConfigError

    for value, says in (({"max": 0}, "greater than or equal to 1"),
                        ({"most": 2}, "unknown key 'most'"),
                        ("three", "examples is a mapping such as {max: 3}")):
        loaded = world([], improve={"examples": value})
        with pytest.raises(ConfigError) as caught:
            load_improve_config(loaded)
        assert "cycle.yaml" in str(caught.value) and "improve.examples" in str(caught.value)
        assert says in str(caught.value)
    assert load_improve_config(world([], improve={"examples": True})).examples.max == 3
    assert load_improve_config(world([], improve={"examples": False})).examples is None
    assert load_improve_config(world([], improve={})).examples is None


def test_the_dashboard_logs_what_the_guard_refused_with_its_source():
    from cycle.tui.state import DashboardState

    state = DashboardState()
    state.apply(ev.ReviewDecided(cycle_id="c", round=1, approved=0, rejected=1, edited=0,
                                 skipped=0, reviewer="auto", suggestions=[{
                                     "type": "example", "source_case": "c4",
                                     "decision": "rejected", "decided_by": "cycle (tester)",
                                     "reason": "drawn from held-out case 'c4'"}]))
    log = "\n".join(state.take_changes().log)
    assert "refused example (from case c4): drawn from held-out case 'c4'" in log


def test_a_merge_takes_the_examples_either_version_added_and_conflicts_where_both_changed_one():
    from cycle.improve.apply import apply_suggestions
    from cycle.loop.merging import MergePair, merge_prompts, merge_suggestions
    from cycle.records import Prompt

    kept = Example(input="a", output="A", source="c1")
    base = Prompt(id="p", system="Help.", examples=(kept,))
    first = base.model_copy(update={"examples": (kept.model_copy(update={"output": "A1"}),
                                                 Example(input="b", output="B", source="c2"))})
    second = base.model_copy(update={"examples": (kept, Example(input="c", output="C",
                                                                source="c3"))})
    merged, conflicts = merge_prompts(base, first, second)
    assert [(e.input, e.output) for e in merged.examples] == [("a", "A1"), ("b", "B"), ("c", "C")]
    assert conflicts == []
    pair = MergePair("1.0.1", "1.0.2", "1.0.0", ("c2",), ("c3",))
    suggestions = [s.model_copy(update={"decision": "approved"})
                   for s in merge_suggestions(first, merged, pair)]
    assert [(s.type, s.source_case, s.example_input) for s in suggestions] == [
        ("example", "c3", "c")]
    assert apply_suggestions(first, suggestions).prompt == merged

    clash = second.model_copy(update={"examples": (kept.model_copy(update={"output": "A2"}),)})
    merged, conflicts = merge_prompts(base, first, clash)
    assert merged.examples[0].output == "A1"  # the first's kept where both changed it
    assert [c.field for c in conflicts] == ["examples"] and '"A2"' in conflicts[0].second
