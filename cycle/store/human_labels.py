"""People's labels of stored outputs: one criterion of one iteration's result, scored 0-100
or passed/failed by a labeler. A label is tied to the exact output it judges (its result
row); several labelers may label one output; a labeler labelling it again replaces their
label. The judge's agreement with people is measured against them (cycle.judge.agreement). Not the labels of prompt versions (head, production).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msgspec import Struct

from cycle.authors import current_author
from cycle.errors import NotFoundError
from cycle.ids import now_iso
from cycle.store.params import in_list

if TYPE_CHECKING:
    from cycle.store.store import Store


class Label(Struct, frozen=True, kw_only=True):
    """One label, with where its output is (the JSONL line's keys)."""

    run: str
    case: str
    iteration: int
    criterion: str
    score: float | None = None
    passed: bool | None = None
    labeler: str = ""
    note: str | None = None


class Labelled(Struct, frozen=True, kw_only=True):
    """A label beside the judge's verdict on the same output and criterion."""

    label: Label
    #: the judge's (or check's) score and pass of that criterion, None when not judged
    judge_score: float | None
    judge_passed: bool | None


class HumanLabels:
    """The ``human_labels`` table."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, labels: list[Label]) -> int:
        """Store ``labels`` (a labeler's earlier label of the same output replaced), all or
        none: NotFoundError names the first whose output is not stored. A label that names
        no labeler is the current author's (cycle.authors)."""
        author = current_author()
        with self.store.transaction() as db:
            for label in labels:
                row = db.execute(
                    "SELECT id FROM results WHERE run_id = ? AND case_id = ? AND iteration = ?",
                    (label.run, label.case, label.iteration)).fetchone()
                if row is None:
                    raise NotFoundError(
                        f"no stored output for run {label.run}, case {label.case}, iteration "
                        f"{label.iteration}: nothing was stored",
                        hint="Label the outputs of a stored run (cycle judge sample RUN_ID).")
                db.execute(
                    "INSERT INTO human_labels (result_id, criterion_id, score, passed, "
                    "labeler, note, labeled_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (result_id, criterion_id, labeler) DO UPDATE SET "
                    "score = excluded.score, passed = excluded.passed, note = excluded.note, "
                    "labeled_at = excluded.labeled_at",
                    (row[0], label.criterion, label.score,
                     None if label.passed is None else int(label.passed), label.labeler or author,
                     label.note, now_iso()))
        return len(labels)

    def of_run(self, run_id: str, *, member: str | None = None) -> list[Labelled]:
        """The run's labels, each beside the judge's verdict on the same output (``member``:
        that judge panel member's verdict instead of the panel's)."""
        return self._labelled("r.run_id = ?", (run_id,), member)

    def of_judge(self, model: str | None, version: str | None, *,
                 member: str | None = None) -> list[Labelled]:
        """The labels of every run this judge (its model and prompt version) judged: what
        its agreement with people is measured on (``member``: beside that panel member's
        verdicts)."""
        return self._labelled("r.run_id IN (SELECT id FROM runs WHERE judge_model IS NOT DISTINCT "
                              "FROM ? AND judge_version IS NOT DISTINCT FROM ?)", (model, version),
                              member)

    def of_runs(self, run_ids: list[str]) -> list[Labelled]:
        """The labels of the outputs of these runs."""
        if not run_ids:
            return []
        marks, bound = in_list(run_ids)
        return self._labelled(f"r.run_id IN ({marks})", tuple(bound))

    def _labelled(self, where: str, args: tuple[Any, ...],
                  member: str | None = None) -> list[Labelled]:
        judged = ("LEFT JOIN verdicts v ON v.result_id = l.result_id AND "
                  "v.criterion_id = l.criterion_id " if member is None else
                  "LEFT JOIN panel_verdicts v ON v.result_id = l.result_id AND "
                  "v.criterion_id = l.criterion_id AND v.member = ? ")
        rows = self.store.db.execute(
            "SELECT r.run_id, r.case_id, r.iteration, l.criterion_id, l.score, l.passed, "
            "l.labeler, l.note, v.score, v.passed FROM human_labels l "
            f"JOIN results r ON r.id = l.result_id {judged}"
            f"WHERE {where} ORDER BY r.run_id, r.case_id, r.iteration, l.criterion_id, l.labeler",
            args if member is None else (member, *args)).fetchall()
        return [Labelled(label=Label(run=r[0], case=r[1], iteration=r[2], criterion=r[3],
                                     score=r[4], passed=None if r[5] is None else bool(r[5]),
                                     labeler=r[6], note=r[7]),
                         judge_score=r[8], judge_passed=None if r[9] is None else bool(r[9]))
                for r in rows]

    def outputs(self, run_id: str, *, member: str | None = None) -> list[dict[str, Any]]:
        """The run's judged outputs: case, iteration, output and each criterion's verdict
        (what ``cycle judge sample`` chooses from); ``member``: that judge panel member's
        verdicts of the LLM criteria instead."""
        judged = ("v.kind FROM results r JOIN verdicts v ON v.result_id = r.id "
                  if member is None else "'llm' FROM results r JOIN panel_verdicts v ON "
                  "v.result_id = r.id AND v.member = ? ")
        rows = self.store.db.execute(
            f"SELECT r.case_id, r.iteration, r.output, v.criterion_id, v.score, v.passed, {judged}"
            "WHERE r.run_id = ? AND r.status != 'error' ORDER BY r.case_id, r.iteration",
            (run_id,) if member is None else (member, run_id)).fetchall()
        out: dict[tuple[str, int], dict[str, Any]] = {}
        for case, iteration, output, criterion, score, passed, kind in rows:
            entry = out.setdefault((case, iteration), {"case": case, "iteration": iteration,
                                                       "output": output or "", "verdicts": {}})
            entry["verdicts"][criterion] = {"score": score, "passed": bool(passed), "kind": kind}
        return list(out.values())
