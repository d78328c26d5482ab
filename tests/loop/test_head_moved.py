"""A cycle respects a head moved by a person (issue 16, item 6): when head was moved outside
the cycle since the cycle set it (a `cycle rollback`, a new prompt file imported), the cycle
does not move it again; it says so, and how to use its candidate anyway."""

from __future__ import annotations

import asyncio

from cycle.assemble import build_loop
from cycle.loop.review import AutoReviewer
from tests.conftest import AUTHOR

from .conftest import suggestion

CYCLE = f"cycle ({AUTHOR})"  # the loop acts on behalf of who ran it


class PersonMovesHead(AutoReviewer):
    """Approves everything; during the first review a person moves head to a version of
    their own, as `cycle prompt import` or `cycle rollback` would."""

    def __init__(self, store) -> None:
        super().__init__()
        self.store = store
        self.moved_to: str | None = None

    async def review(self, request):
        if self.moved_to is None:
            head = self.store.resolve("support@head")
            mine = head.prompt.model_copy(update={"system": "You help customers. Be brief."})
            self.moved_to = self.store.save_version(mine, message="a person's edit",
                                                    who="user").version
            assert self.store.resolve("support@head").version == self.moved_to
        return await super().review(request)


def run(loaded, store):
    reviewer = PersonMovesHead(store)
    loop = build_loop(loaded, store=store, reviewer=reviewer)
    return asyncio.run(loop.run()), reviewer.moved_to


def test_an_accepted_round_does_not_override_a_person_and_the_cycle_stops(world, store):
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]},
                    {"suggestions": [suggestion("Always say order.")]}],
                   improve={"acceptance": "always", "stop": {"max_rounds": 2}})
    result, mine = run(loaded, store)
    assert store.resolve("support@head").version == mine  # the person's choice stands
    assert not [m for m in store.label_moves("support", label="head") if m.who == CYCLE]
    assert [r.stage for r in result.rounds] == ["baseline", "improve"]  # stopped after round 1
    assert f"head was moved to {mine} outside this cycle" in result.stop_reason
    candidate = result.rounds[1].version
    assert f"cycle rollback support --to {candidate}" in result.stop_reason


def test_a_confirmed_candidate_does_not_override_a_person(world, store):
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}],
                   improve={"stop": {"max_rounds": 1}})
    result, mine = run(loaded, store)
    assert result.rounds[-1].stage == "confirm" and result.rounds[-1].accepted
    assert store.resolve("support@head").version == mine
    assert f"confirmed on fresh samples (+20.0): head was moved to {mine}" in result.stop_reason
    assert not [m for m in store.label_moves("support", label="head") if m.who == CYCLE]


def test_without_a_person_the_cycle_moves_head_as_before(world, store):
    loaded = world([{"suggestions": [suggestion("Always say sorry.")]}],
                   improve={"stop": {"max_rounds": 1}})
    result = asyncio.run(build_loop(loaded, store=store, reviewer=AutoReviewer()).run())
    assert "head moved 1.0.0 -> 1.0.1" in result.stop_reason
    assert store.resolve("support@head").version == "1.0.1"
