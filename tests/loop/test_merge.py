"""Merge (issue 38): two frontier versions whose gains fall on different cases, their
edits since a common ancestor applied together, reviewed, screened and judged like any
other candidate; conflicting edits go to the improver."""

from __future__ import annotations

import asyncio
import re

from cycle import events as ev
from cycle.assemble import build_loop
from cycle.loop.acceptance import Evaluation
from cycle.loop.merging import merge_pair, merge_params, merge_prompts, merge_text
from cycle.loop.review import AutoReviewer
from cycle.records import Prompt, ToolDef
from cycle.testing import script

from .conftest import last_json, suggestion


def _e(version: str, **scores: float) -> Evaluation:
    return Evaluation(run_id=version, version=version, score=None, case_scores=scores)


def test_a_text_merges_word_by_word_and_conflicts_only_where_both_changed_the_same_words():
    base = "You help customers. Be brief."
    assert merge_text(base, "You help customers politely. Be brief.",
                      "You help customers. Be very brief.") == (
        "You help customers politely. Be very brief.", False)
    # two directives appended at the same place: both kept, the first's first
    assert merge_text("You help.", "You help. Say sorry.", "You help. Say order.") == (
        "You help. Say sorry. Say order.", False)
    assert merge_text(base, base, "Other.") == ("Other.", False)
    assert merge_text("Be brief.", "Be short.", "Be concise.") == ("Be short.", True)


def test_parameters_merge_key_by_key_and_a_prompt_merges_every_field():
    assert merge_params({"t": 1, "k": 2}, {"t": 0, "k": 2}, {"t": 1, "m": 5}) == (
        {"t": 0, "m": 5}, [])
    assert merge_params({"t": 1}, {"t": 0}, {"t": 2}) == ({"t": 0}, ["t"])
    tool = ToolDef(name="lookup", description="Finds an order.", parameters={"type": "object"})
    base = Prompt(id="p", system="You help.", user_template="{{ q }}", tools=(tool,))
    first = base.model_copy(update={"system": "You help. Say sorry.", "params": {"t": 0}})
    second = base.model_copy(update={"tools": (tool.model_copy(update={
        "description": "Finds an order by its number."}),), "params": {"t": 0.5}})
    merged, conflicts = merge_prompts(base, first, second)
    assert merged.system == "You help. Say sorry."
    assert merged.tools[0].description == "Finds an order by its number."
    assert merged.params == {"t": 0} and [c.field for c in conflicts] == ["params.t"]


def test_the_pair_is_two_complementary_frontier_versions_with_a_common_ancestor():
    parent = {"a": "base", "b": "base", "c": "a", "base": None}.get
    pool = [_e("base", x=10, y=10, z=10), _e("a", x=90, y=10, z=10), _e("b", x=10, y=90, z=60),
            _e("c", x=80, y=20, z=50)]
    pair = merge_pair(pool, parent, set())
    assert (pair.first, pair.second, pair.base) == ("b", "a", "base")
    assert pair.first_wins == ("y", "z") and pair.second_wins == ("x",)
    assert merge_pair(pool, parent, {frozenset(("a", "b"))}) is None  # tried; c is a's child
    # a descendant holds its ancestor's edits: nothing to merge
    assert merge_pair([_e("a", x=90, y=1), _e("c", x=1, y=90)], parent, set()) is None
    # held-out cases choose nothing: b's only win is held out
    assert merge_pair([_e("a", x=90, y=10), _e("b", x=10, y=90)], parent, set(),
                      frozenset({"y"})) is None


def judge(messages, tools, config):
    """'sorry' is worth 30 on c3-c8, 'order' 30 on c1 and c2: two edits that help
    different cases, made by two versions in two rounds."""
    case = last_json(messages)
    i = int(re.sub(r"\D", "", str(case["input"])))
    score = 40 - i + (30 if "sorry" in case["output"] and i > 2 else 0) + (
        30 if "order" in case["output"] and i <= 2 else 0)
    return {"verdicts": {"quality": {"score": score, "reasoning": f"{score} points"}}}


def improver(calls):
    """From the starting prompt: 'sorry' first, then 'Be calm.' (gains nothing), then
    'order'; from a prompt that says something already, nothing (the merge must do it)."""
    def answer(messages, tools, config):
        data = last_json(messages)
        calls.append(data)
        if "say" in data["prompt"]["system"]:
            return {"suggestions": []}
        n = sum(1 for c in calls if "say" not in c["prompt"]["system"])
        return {"suggestions": [suggestion(
            {1: "Always say sorry.", 2: "Be calm."}.get(n, "Always say order."))]}
    return answer


def test_two_siblings_that_win_different_cases_are_merged_and_the_merge_is_promoted(
        merge_world, store, bus_log):
    bus, log = bus_log
    calls: list = []
    asked: list = []

    class Recording(AutoReviewer):
        async def review(self, request):
            asked.append((request.round, request.version, request.candidate))
            return await super().review(request)

    result = asyncio.run(build_loop(merge_world(calls), store=store, bus=bus,
                                    reviewer=Recording()).run())
    versions = {v.version: v for v in store.history("support")}
    by_text = {v.prompt.system: v.version for v in versions.values()}
    sorry = by_text["You help customers.\n\nAlways say sorry."]
    order = by_text["You help customers.\n\nAlways say order."]
    merged = by_text["You help customers.\n\nAlways say sorry.\n\nAlways say order."]
    # the version names both parents, as read on its own (cycle history, the History screen)
    assert (versions[merged].parent, versions[merged].second_parent) == (sorry, order)
    assert versions[sorry].second_parent is None
    assert f"a merge of {sorry} and {order}, from 1.0.0" in versions[merged].message
    # the reviewer is told which candidate it decides on, its parent and, for a merge, both
    assert (3, sorry, f"candidate 2 of 2, a merge of {sorry} and {order}") in asked
    assert (1, "1.0.0", "candidate 1 of 2") in asked
    # the merge reached review as a suggestion on the first version, saying why
    reviewed = [e for e in log if isinstance(e, ev.ReviewDecided) and e.round == 3]
    (merge_review,) = [e for e in reviewed if e.slot == 1]
    (s,) = merge_review.suggestions
    assert s["reasoning"].startswith(f"merge: {order} scores higher on 2 case(s)")
    assert s["target_cases"] == ["c1", "c2"] and s["decided_by"]
    # a clean merge asks no model: the improver was asked twice a round, once in round 3
    assert len(calls) == 5
    # screened on the cases the second wins among others, then judged and confirmed
    (screen,) = [e for e in log if isinstance(e, ev.CandidateScreened) and e.version == merged]
    assert screen.kept and screen.gain > 0 and screen.parent == sorry
    assert store.resolve("support@head").version == merged
    assert result.final_version == merged


def test_merge_false_keeps_every_candidate_the_improvers(merge_world, store):
    calls: list = []
    asyncio.run(build_loop(merge_world(calls, merge=False), store=store,
                           reviewer=AutoReviewer()).run())
    assert not [v for v in store.history("support") if "merge" in v.message]
    assert len(calls) == 6


def test_a_conflict_goes_to_the_improver_with_both_sides(merge_world, world, store, bus_log):
    """Both versions rewrote the same words: the merged prompt keeps the first's, and the
    improver is shown both sides and the cases the second wins."""
    calls: list = []

    def answer(messages, tools, config):
        data = last_json(messages)
        calls.append(data)
        system = data["prompt"]["system"]
        if "merge" in data:
            return {"suggestions": [suggestion("Always say sorry, and always say order.",
                                               current="Always say sorry.")]}
        if "say" in system:
            return {"suggestions": []}
        n = sum(1 for c in calls if "say" not in c["prompt"]["system"])
        new = {1: "Always say sorry.", 2: "Be calm."}.get(n, "Always say order.")
        return {"suggestions": [suggestion(new, current="You help customers.")]}

    loaded = world(answer, cases=8, system="You help customers.", improve={
        "population": 2, "screen_cases": 8, "stop": {"max_rounds": 3}})
    script("judge", judge)
    asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run())
    (asked,) = [c for c in calls if "merge" in c]
    (conflict,) = asked["merge"]["conflicts"]
    assert conflict["field"] == "system" and conflict["base"] == "You help customers."
    assert {conflict[k] for k in conflict if k.count(".") == 2} == {
        "Always say sorry.", "Always say order."}
    assert {c["id"] for c in asked["low_cases"]} == {"c1", "c2"}
    head = store.resolve("support@head").prompt.system
    assert head == "Always say sorry, and always say order."
