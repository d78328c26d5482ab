"""Who the loop records (cycle.authors): its candidates and head moves are the cycle's on
behalf of who ran it, its review decisions the reviewer's (the policy on that person's
behalf), its guard's refusals the cycle's; a protected head stops it with the reason."""

from __future__ import annotations

import asyncio

from cycle.assemble import build_loop
from cycle.loop.review import AutoReviewer, PromptReviewer, decider
from cycle.records import Prompt
from tests.conftest import AUTHOR

from .conftest import suggestion

CYCLE = f"cycle ({AUTHOR})"


def test_versions_moves_and_decisions_say_who_on_whose_behalf(world, store):
    loaded = world([{"suggestions": [suggestion("Always say sorry."),
                                     suggestion("{{ expected }}", type="user_prompt")]}],
                   improve={"acceptance": "always", "stop": {"max_rounds": 1}})
    result = asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run())
    candidate = store.get_version("support", result.rounds[1].version)
    assert candidate.author == CYCLE
    assert store.label_moves("support", label="head", limit=1)[0].who == CYCLE
    by = {s.suggested_value: (s.decision, s.decided_by) for s in
          store.cycles.get_suggestions(result.cycle_id)}
    assert by == {"Always say sorry.": ("approved", f"policy:auto ({AUTHOR})"),
                  "{{ expected }}": ("rejected", CYCLE)}  # refused by the guard


def test_a_person_reviewing_is_recorded_by_name(monkeypatch):
    monkeypatch.setenv("CYCLE_AUTHOR", "ann")
    assert decider(PromptReviewer()) == "ann"
    assert decider(AutoReviewer()) == "policy:auto (ann)"

    class Mine:
        name = "slack"

    assert decider(Mine()) == "reviewer:slack (ann)"


def test_a_protected_head_stops_the_cycle_and_says_who_may_move_it(world, store):
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]},
                    {"suggestions": [suggestion("Always say order.")]}],
                   improve={"acceptance": "always", "stop": {"max_rounds": 2}})
    # the prompt file's content, stored first so that its head can be protected
    store.save_version(Prompt(id="support", system="You help customers.",
                              user_template="{{ input }}"))
    store.protections.protect("head", prompt_id="support", allowed=("ann",), by="ann")
    result = asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run())
    assert result.status == "finished"
    assert [r.stage for r in result.rounds] == ["baseline", "improve"]  # stopped after round 1
    candidate = result.rounds[1].version
    assert (f"head stays at 1.0.0: {CYCLE} may not move 'head' of support: the label is "
            f"protected (by ann); to use {candidate}: cycle rollback support --to {candidate} "
            "(by ann, or with --force)") in result.stop_reason
    assert store.labels("support")["head"] == "1.0.0"
    assert not [m for m in store.label_moves("support") if m.who == CYCLE]
