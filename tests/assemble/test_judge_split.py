"""Which labelled outputs `cycle judge improve` holds out (cycle.assemble.judge_cycle.split)."""

from __future__ import annotations

from cycle.assemble.judge_cycle import labels_needed, split


def strata() -> dict[str, tuple[bool, bool | None]]:
    """40 labelled outputs: people pass / fail by the judge's pass / fail, 20-10-6-4."""
    sizes = {(True, True): 20, (False, False): 10, (False, True): 6, (True, False): 4}
    return {f"{p}-{j}-{i}": (p, j) for (p, j), n in sizes.items() for i in range(n)}


def test_the_split_holds_out_each_kind_of_label_in_proportion_and_by_its_seed() -> None:
    cases = strata()
    chosen = split(cases, 0.3, seed=0)
    assert len(chosen) == 12
    per = {k: sum(cases[c] == k for c in chosen) for k in set(cases.values())}
    assert per[(True, True)] == 6 and per[(False, False)] == 3
    assert per[(False, True)] >= 1 and per[(True, False)] >= 1  # the disagreements too
    assert split(cases, 0.3, seed=0) == chosen  # the same labels and seed, the same split
    assert split(dict(reversed(cases.items())), 0.3, seed=0) == chosen  # whatever the order
    assert split(cases, 0.3, seed=1) != chosen


def test_the_labels_a_split_needs() -> None:
    assert labels_needed(0.3) == 17  # 10 to learn from (15), 5 held out (17)
    assert labels_needed(0.5) == 20
    assert labels_needed(0.1) == 50
