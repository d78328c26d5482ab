"""A cycle's lineage: every candidate it built, under the version it was built from.

Read from the ledger, never from a running loop's memory, so that it is the same for a
cycle that finished, one still running (what it has stored so far) and one resumed: the
rounds (each one's full evaluation, its decision, the confirmation), the screens of a
population's candidates (slot, parent, a merge's second parent, gain, kept), the head
moves the cycle made, and the runs of the versions evaluated in full, from which the
Pareto frontier is found again as the loop found it (cycle.loop.population.frontier,
over the same evaluations in the same order, held-out cases choosing nothing).

The reports draw it (cycle.report.cycle_report); a round of one has a chain for a lineage,
which they leave as the rounds table shows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
from msgspec import Struct, field, to_builtins

from cycle.evals.results import load_run
from cycle.loop.acceptance import Evaluation
from cycle.loop.core import evaluation_of
from cycle.loop.population import frontier
from cycle.records import RoundRow, ScreenRow
from cycle.store import Store


class Candidate(Struct, frozen=True):
    """A version the cycle built (or started from), and what became of it."""

    version: str
    #: the round that built it (0: the version the cycle started from)
    round: int
    #: the version it was built from (None: the start)
    parent: str | None = None
    #: its place in the round's population (None: the start, or a round of one)
    slot: int | None = None
    #: a merge's other parent: the version whose edits it brought to ``parent``
    second_parent: str | None = None
    #: screened on a minibatch against its parent (a population's candidate)
    screened: bool = False
    screen_gain: float | None = None
    screen_cases: int = 0
    #: evaluated in full: the round's candidate (or the start's baseline evaluation)
    evaluated: bool = False
    score: float | None = None
    #: the paired gain over the incumbent the full evaluation was judged on
    delta: float | None = None
    #: what became of it, in a few words (cycle.loop.lineage.decision)
    decision: str = ""
    #: the confirmation on fresh samples: True moved head to it, False did not (None: none)
    confirmed: bool | None = None
    #: head points at it as the cycle left head
    head: bool = False
    #: the cases it is best on, on the frontier at the end (0: not on it)
    frontier: int = 0


class Lineage(Struct, frozen=True):
    """A cycle's candidates as a tree (the start its root), and its frontier."""

    cycle_id: str
    prompt_id: str
    #: candidates a round (improve.population); 1: a chain
    population: int
    #: the start first, then each round's candidates by slot
    candidates: tuple[Candidate, ...]
    #: where the cycle left head
    head: str
    #: version -> cases it is best on, most first (the versions evaluated in full; a
    #: chain's is not reckoned: empty)
    frontier: dict[str, int] = field(default_factory=dict)

    @property
    def root(self) -> Candidate:
        return self.candidates[0]

    def tree(self) -> Iterator[tuple[int, Candidate]]:
        """Each candidate with its depth, depth first, a parent before its children (by
        round and slot). A version's children hang under its full evaluation: only a
        version evaluated in full is a parent."""
        nodes = self.candidates
        anchors = {c.version: i for i, c in enumerate(nodes) if c.evaluated}
        anchors[nodes[0].version] = 0
        children: dict[int, list[int]] = {}
        top = [0]
        for i, c in enumerate(nodes[1:], 1):
            anchor = anchors.get(c.parent or "")
            if anchor is None or anchor == i:  # its parent is not this cycle's: shown apart
                top.append(i)
            else:
                children.setdefault(anchor, []).append(i)

        def walk(i: int, depth: int) -> Iterator[tuple[int, Candidate]]:
            yield depth, nodes[i]
            for child in children.get(i, []):
                yield from walk(child, depth + 1)

        for i in top:
            yield from walk(i, 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON values: the cycle's lineage as data (the JSON report's ``lineage``)."""
        return {"population": self.population, "head": self.head,
                "frontier": [{"version": v, "cases": n} for v, n in self.frontier.items()],
                # in the tree's order, each with its depth: a parent before its children
                "candidates": [{"depth": depth, **to_builtins(c)} for depth, c in self.tree()]}


def population_of(config: dict[str, Any]) -> int:
    """The population a stored cycle ran with (1: a chain; a cycle stored before
    populations has none)."""
    improve = config.get("improve")
    value = improve.get("population", 1) if isinstance(improve, dict) else 1
    return value if isinstance(value, int) and value > 0 else 1


def lineage_of(store: Store, cycle_id: str) -> Lineage:
    """The lineage of stored cycle ``cycle_id`` as far as it has run."""
    cycles = store.cycles
    cycle = cycles.get(cycle_id)
    rounds = cycles.get_rounds(cycle_id)
    screens = cycles.get_screens(cycle_id)
    moves = cycles.head_moves(cycle_id, cycle.prompt_id)
    root_version = cycle.initial_version or next(
        (r.incumbent_version for r in rounds if r.round == 0 and r.incumbent_version), "")
    head = cycle.final_version or (moves[-1][1] if moves else root_version)
    confirmed = {r.candidate_version: r.accepted for r in rounds
                 if r.stage == "confirm" and r.candidate_version and r.accepted is not None}
    population = max(population_of(cycle.config), 2 if screens else 1)
    # a chain's parents are its incumbents: no frontier to find (nor runs to read for it)
    front = (_frontier(store, rounds, frozenset(cycle.config.get("held_out") or ()))
             if population > 1 else {})

    def finish(c: Candidate) -> Candidate:
        return msgspec.structs.replace(
            c, head=c.version == head, frontier=front.get(c.version, 0) if c.evaluated else 0,
            confirmed=confirmed.get(c.version) if c.evaluated else None)

    first = next((r for r in rounds if r.round == 0), None)
    out = [finish(Candidate(version=root_version, round=0, evaluated=first is not None
                            and first.score is not None, score=first.score if first else None,
                            decision="start"))]
    by_round: dict[int, list[ScreenRow]] = {}
    for s in screens:
        by_round.setdefault(s.round, []).append(s)
    for r in rounds:
        if not r.improves:
            continue
        full = r.candidate_version if r.candidate_run_id else None
        if r.round in by_round:
            for s in by_round[r.round]:
                evaluated = s.kept and s.version == full
                out.append(finish(Candidate(
                    version=s.version, round=r.round, parent=s.parent, slot=s.slot,
                    second_parent=s.second_parent, screened=True, screen_gain=s.gain,
                    screen_cases=s.cases, evaluated=evaluated,
                    score=r.score if evaluated else None, delta=r.delta if evaluated else None,
                    decision=decision(r, screened=True, kept=s.kept))))
        elif full is not None:
            # a round of one (its candidate straight to the full evaluation), or a
            # population's round stored before screens were: the version's own parent
            out.append(finish(Candidate(
                version=full, round=r.round,
                parent=store.get_version(cycle.prompt_id, full).parent, evaluated=True,
                score=r.score, delta=r.delta, decision=decision(r, screened=False, kept=True))))
    return Lineage(cycle_id=cycle.id, prompt_id=cycle.prompt_id, population=population,
                   candidates=tuple(out), head=head, frontier=front)


def decision(r: RoundRow, *, screened: bool, kept: bool) -> str:
    """What became of a round's candidate, in a few words."""
    if screened and not kept:
        return "ended at its screen"
    if r.status == "stopped":
        return "stopped (budget)"
    if r.accepted is None:
        return "evaluating in full" if r.candidate_run_id else "to the full evaluation"
    return "kept" if r.accepted else "rejected"


def _frontier(store: Store, rounds: list[RoundRow], held_out: frozenset[str]) -> dict[str, int]:
    """The frontier of the versions the cycle evaluated in full (the start's baseline
    evaluation and each exploring round's candidate whose run finished), in the order the
    loop pools them."""
    pool: list[Evaluation] = []
    for r in rounds:
        if r.round == 0:
            run_id, version = r.baseline_run_id, r.incumbent_version
        elif r.improves:
            run_id, version = r.candidate_run_id, r.candidate_version
        else:
            continue
        row = store.runs.get(run_id) if run_id else None
        if row is None or row.status != "finished" or version is None:
            continue
        pool.append(evaluation_of(load_run(store.runs, row.id), version))
    return {e.version: wins for e, wins in frontier(pool, held_out)}
