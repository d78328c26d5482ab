"""Stop conditions and their all / any / not compositions, parsed from their YAML form."""

from __future__ import annotations

import textwrap
from typing import ClassVar

import pytest
from msgspec import Struct

from cycle.errors import ConfigError
from cycle.loop.stop import CycleState, RoundRecord, cost_cap, has_limit, parse_stop


def state(*scores_accepted: tuple[float, bool | None], cost: float = 0.0, elapsed: float = 0.0,
          deltas: list[float] | None = None) -> CycleState:
    rounds = []
    incumbent = None
    for i, (score, accepted) in enumerate(scores_accepted):
        delta = (deltas or [None] * len(scores_accepted))[i]
        rounds.append(RoundRecord(round=i, version=f"1.0.{i}", score=score, accepted=accepted, delta=delta))
        if i == 0 or accepted:
            incumbent = score
    return CycleState(rounds=tuple(rounds), incumbent_score=incumbent, total_cost=cost, elapsed=elapsed)


def test_leaves() -> None:
    s = state((60, None), (75, True), (70, False))
    assert parse_stop({"target_score": 75}).check(s).startswith("target_score")
    assert parse_stop({"target_score": 76}).check(s) is None
    assert parse_stop({"max_rounds": 2}).check(s) == "max_rounds: 2 of 2 rounds run"
    assert parse_stop({"max_rounds": 3}).check(s) is None
    assert parse_stop({"max_cost": 0.5}).check(state((1, None), cost=0.5)).startswith("max_cost")
    assert parse_stop({"max_cost": 0.5}).check(state((1, None), cost=0.49)) is None
    assert parse_stop({"max_duration": "1m"}).check(state((1, None), elapsed=60)).startswith("max_duration")
    assert parse_stop({"max_duration": 61}).check(state((1, None), elapsed=60)) is None


def test_no_improvement_counts_rejections_and_small_gains() -> None:
    s = state((60, None), (75, True), (70, False), (71, False))
    assert parse_stop({"no_improvement": 2}).check(s).startswith("no_improvement")
    assert parse_stop({"no_improvement": 3}).check(s) is None
    small = state((60, None), (61, True), (61.5, True), deltas=[None, 1.0, 0.5])
    assert parse_stop({"no_improvement": {"rounds": 2, "min_delta": 2}}).check(small)
    assert parse_stop({"no_improvement": {"rounds": 2}}).check(small) is None


def test_compositions() -> None:
    s = state((60, None), (80, True))
    assert parse_stop({"any": [{"target_score": 90}, {"max_rounds": 1}]}).check(s).startswith("max_rounds")
    assert parse_stop([{"target_score": 90}, {"max_rounds": 2}]).check(s) is None  # a list is any
    both = parse_stop({"all": [{"target_score": 80}, {"max_rounds": 1}]})
    assert both.check(s) == "target_score: the score 80.0 reached the target 80 and max_rounds: 1 of 1 rounds run"
    assert parse_stop({"all": [{"target_score": 81}, {"max_rounds": 1}]}).check(s) is None
    assert parse_stop({"not": {"target_score": 90}}).check(s) == "not (target_score 90)"
    assert parse_stop({"not": {"target_score": 80}}).check(s) is None
    nested = parse_stop({"any": [{"all": [{"max_rounds": 1}, {"not": {"target_score": 95}}]}, {"max_cost": 1}]})
    assert nested.check(s).startswith("max_rounds")


def test_custom_predicate_by_import_path(tmp_path) -> None:
    (tmp_path / "mystops.py").write_text(textwrap.dedent("""
        def two_rounds(state):
            return "two rounds are enough" if state.improvement_rounds >= 2 else False
    """))
    cond = parse_stop({"custom": "mystops:two_rounds"}, base_dir=tmp_path)
    assert cond.check(state((1, None), (2, False))) is None
    assert cond.check(state((1, None), (2, False), (3, False))) == "custom: two rounds are enough"
    with pytest.raises(ConfigError, match="cannot import the custom stop condition "
                       "'mystops:nope': module 'mystops' has no 'nope'"):
        parse_stop({"custom": "mystops:nope"}, base_dir=tmp_path).check(state((1, None)))


def test_cost_cap_and_limits() -> None:
    assert cost_cap(parse_stop({"any": [{"max_cost": 2}, {"all": [{"max_cost": 0.5}, {"max_rounds": 3}]}]})) == 0.5
    assert cost_cap(parse_stop({"not": {"max_cost": 1}})) is None
    assert has_limit(parse_stop(None))
    assert not has_limit(parse_stop({"target_score": 90}))


@pytest.mark.parametrize("spec, message", [
    ({"max_round": 3}, "unknown condition 'max_round'"),
    ({"max_rounds": 2.5}, "whole number"),
    ({"any": []}, "non-empty list"),
    ({"max_duration": "soon"}, "not a duration"),
    ({"target_score": 90, "max_rounds": 3}, "one key"),
    ({"any": [{"max_cost": -1}]}, r"improve.stop.any\[0\].max_cost"),
])
def test_bad_conditions_name_the_node(spec, message) -> None:
    with pytest.raises(ValueError, match=message):
        parse_stop(spec)


class MinScoreRounds(Struct, frozen=True):
    """A condition a user adds (the registry's test)."""

    value: int
    key: ClassVar[str] = "min_score_rounds"

    @classmethod
    def parse(cls, value, here, base_dir):
        if not isinstance(value, int):
            raise ValueError(f"{here}: expected a whole number")  # noqa: TRY004 - parse_stop reports ValueError
        return cls(value)

    def check(self, state):
        return "enough" if len(state.rounds) >= self.value else None

    def describe(self):
        return f"min_score_rounds {self.value}"


def test_a_new_condition_is_one_class_in_the_registry(monkeypatch):
    """The extension point: a condition declares its key and parses its own value."""
    from cycle.loop import stop

    monkeypatch.setitem(stop.LEAVES, MinScoreRounds.key, MinScoreRounds)
    cond = parse_stop({"any": [{"min_score_rounds": 2}, {"max_rounds": 5}]})
    assert cond.describe() == "any(min_score_rounds 2, max_rounds 5)"
    assert cond.check(CycleState(rounds=(RoundRecord(round=0, version="1", score=1.0),) * 2)) == "enough"
    with pytest.raises(ValueError, match=r"improve.stop.any\[0\].min_score_rounds: expected a whole"):
        parse_stop({"any": [{"min_score_rounds": "x"}]})
    with pytest.raises(ValueError, match="known: target_score, .*custom, min_score_rounds, any"):
        parse_stop({"nope": 1})
