"""What ``cycle judge consistency`` measured of a judge: per run and criterion, the spread
of its scores over fresh repeats and the share of pass/fail verdicts that flipped, with the
share allowed. The latest measure of a run replaces the one before; reports of every run
the same judge (model and prompt version) judged flag a criterion over its allowance."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import Struct

from cycle.ids import now_iso

if TYPE_CHECKING:
    from cycle.store.store import Store


class Consistency(Struct, frozen=True, kw_only=True):
    """One criterion's test-retest figures on one run's outputs."""

    run: str
    criterion: str
    outputs: int
    repeats: int
    #: the mean standard deviation of a score over the repeats, in points
    spread: float
    #: the share of outputs whose pass/fail changed between repeats
    flip_share: float
    max_flips: float

    @property
    def flagged(self) -> bool:
        return self.flip_share > self.max_flips


class JudgeConsistency:
    """The ``judge_consistency`` table."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def record(self, figures: list[Consistency], *, model: str | None,
               version: str | None) -> None:
        """Keep ``figures`` (a run's latest measure replaces its earlier one), all or none."""
        with self.store.transaction() as db:
            for f in figures:
                db.execute(
                    "INSERT INTO judge_consistency (run_id, criterion_id, "
                    "judge_model, judge_version, outputs, repeats, spread, flip_share, "
                    "max_flips, measured_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (run_id, criterion_id) DO UPDATE SET "
                    "judge_model = excluded.judge_model, judge_version = excluded.judge_version, "
                    "outputs = excluded.outputs, repeats = excluded.repeats, "
                    "spread = excluded.spread, flip_share = excluded.flip_share, "
                    "max_flips = excluded.max_flips, measured_at = excluded.measured_at",
                    (f.run, f.criterion, model, version, f.outputs, f.repeats, f.spread,
                     f.flip_share, f.max_flips, now_iso()))

    def of_judge(self, model: str | None, version: str | None) -> list[Consistency]:
        """Every measure of this judge, the latest first."""
        rows = self.store.db.execute(
            "SELECT run_id, criterion_id, outputs, repeats, spread, flip_share, max_flips "
            "FROM judge_consistency WHERE judge_model IS NOT DISTINCT FROM ? AND judge_version IS NOT DISTINCT FROM ? "
            "ORDER BY measured_at DESC", (model, version)).fetchall()
        return [Consistency(run=r[0], criterion=r[1], outputs=r[2], repeats=r[3], spread=r[4],
                            flip_share=r[5], max_flips=r[6]) for r in rows]
