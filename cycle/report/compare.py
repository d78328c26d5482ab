"""Comparing two runs, paired by case: score and pass-rate deltas with intervals,
the cases that regressed and those that newly pass."""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct

from cycle.records import RunResult, Stats
from cycle.report import format as f
from cycle.stats import paired_difference


class CaseDelta(Struct, frozen=True):
    case_id: str
    name: str
    score_a: float | None
    score_b: float | None
    status_a: str
    status_b: str

    @property
    def delta(self) -> float | None:
        if self.score_a is None or self.score_b is None:
            return None
        return self.score_b - self.score_a


class Comparison(Struct, frozen=True):
    a: RunResult
    b: RunResult
    #: b - a over the cases judged in both
    score_delta: Stats
    pass_rate_delta: Stats
    cases: list[CaseDelta]
    regressed: list[str]
    newly_passing: list[str]
    only_in_a: list[str]
    only_in_b: list[str]
    #: cases in both runs with a score in one only (every iteration of the other errored or
    #: ended by a limit): kept out of the deltas, never counted as a score of 0
    unscored_in_a: list[str] = []
    unscored_in_b: list[str] = []

    @property
    def offline(self) -> bool:
        return self.a.offline or self.b.offline

    @property
    def unfinished(self) -> list[str]:
        """What a run not finished says: "B is interrupted" (its figures are partial)."""
        return [f"{side} is {r.status}" for side, r in (("A", self.a), ("B", self.b))
                if r.status != "finished"]

    @property
    def iterations(self) -> tuple[int, int] | None:
        """Iterations a case of each run, when they differ (None: the same)."""
        def each(r: RunResult) -> int:
            return max((c.iterations for c in r.cases.values()), default=0)
        n = (each(self.a), each(self.b))
        return n if n[0] != n[1] else None


def compare_runs(a: RunResult, b: RunResult) -> Comparison:
    """Run ``b`` against run ``a`` (``a`` is the baseline)."""
    rates_a = {k: c.pass_rate for k, c in a.cases.items() if c.pass_rate is not None}
    rates_b = {k: c.pass_rate for k, c in b.cases.items() if c.pass_rate is not None}
    cases = []
    for k in [*a.cases, *(k for k in b.cases if k not in a.cases)]:
        ca, cb = a.cases.get(k), b.cases.get(k)
        cases.append(CaseDelta(
            case_id=k, name=(ca or cb).name,  # type: ignore[union-attr]
            score_a=ca.stats.mean if ca else None, score_b=cb.stats.mean if cb else None,
            status_a=ca.status if ca else "absent", status_b=cb.status if cb else "absent",
        ))
    return Comparison(
        a=a, b=b,
        score_delta=paired_difference(a.case_means, b.case_means),
        pass_rate_delta=paired_difference({k: v * 100 for k, v in rates_a.items()},
                                          {k: v * 100 for k, v in rates_b.items()}),
        cases=cases,
        regressed=[c.case_id for c in cases if c.status_a == "passed" and c.status_b == "failed"],
        newly_passing=[c.case_id for c in cases if c.status_a == "failed" and c.status_b == "passed"],
        only_in_a=[k for k in a.cases if k not in b.cases],
        only_in_b=[k for k in b.cases if k not in a.cases],
        unscored_in_a=[k for k in b.case_means if k in a.cases and k not in a.case_means],
        unscored_in_b=[k for k in a.case_means if k in b.cases and k not in b.case_means],
    )


def _unscored(c: Comparison) -> list[str]:
    """Lines naming the cases scored in one run only (errors kept apart from scores)."""
    out = []
    for side, other, ids in (("B", "A", c.unscored_in_b), ("A", "B", c.unscored_in_a)):
        if ids:
            run = c.b if side == "B" else c.a
            why = sorted({run.cases[k].status for k in ids})
            out.append(f"Not compared: {len(ids)} case(s) scored in {other} have no score in "
                       f"{side} ({', '.join(why)}): {', '.join(ids)}")
    return out


def _delta(s: Stats, unit: str = "", *, short: bool = False) -> str:
    """A paired change with its interval; ``short``: for a table cell."""
    if s.mean is None:
        return "— (no case judged in both)" if short else "— (no case judged in both runs)"
    if short:
        ci = "" if s.ci_low is None else f" [{s.ci_low:+.1f}, {s.ci_high:+.1f}]"
        return f"{s.mean:+.1f}{unit}{ci} ({s.n} paired)"
    ci = "" if s.ci_low is None else f"  95% CI [{s.ci_low:+.1f}, {s.ci_high:+.1f}]{unit}"
    return f"{s.mean:+.1f}{unit}{ci}  over {s.n} paired cases"


def _moved(c: Comparison, most: int) -> list[CaseDelta]:
    """The cases whose score changed most: the ``most`` largest drops, then gains."""
    moved = sorted((d for d in c.cases if d.delta is not None and abs(d.delta) >= 0.05),
                   key=lambda d: d.delta or 0.0)
    return moved[:most] + [x for x in moved[-most:] if x not in moved[:most]]


def render_compare(c: Comparison) -> str:
    lines = [f"Compare {c.a.run_id} (A) -> {c.b.run_id} (B)"]
    if c.offline:
        lines.append("[offline model] at least one run's results do not come from a real model.")
    if c.unfinished:
        lines.append(f"[unfinished] {' and '.join(c.unfinished)}: its figures are partial.")
    if c.iterations:
        lines.append(f"[iterations] A ran {c.iterations[0]} a case, B {c.iterations[1]}: "
                     "a case's mean rests on different numbers of samples.")
    lines += [
        f"Score      A {f.score(c.a.score)}  B {f.score(c.b.score)}  delta {_delta(c.score_delta)}",
        (f"Pass rate  A {f.pct(c.a.suite.pass_rate)}  B {f.pct(c.b.suite.pass_rate)}  "
        f"delta {_delta(c.pass_rate_delta, ' pts')}"),
        f"Errors     A {c.a.suite.errors}  B {c.b.suite.errors}",
    ]
    if c.regressed:
        lines.append("Regressed (passed in A, fail in B): " + ", ".join(c.regressed))
    if c.newly_passing:
        lines.append("Newly passing (failed in A, pass in B): " + ", ".join(c.newly_passing))
    if not c.regressed and not c.newly_passing:
        lines.append("No case changed between passing and failing.")
    if c.only_in_a or c.only_in_b:
        lines.append(f"Not paired: {len(c.only_in_a)} only in A, {len(c.only_in_b)} only in B")
    lines += _unscored(c)
    moved = _moved(c, 5)
    if moved:
        lines.append("")
        lines.append("Largest changes:")
        for d in moved:
            lines.append(f"  {d.case_id:<30} {f.score(d.score_a):>6} -> {f.score(d.score_b):>6}  "
                         f"({d.delta:+.1f})")
    return "\n".join(lines)


def compare_dict(c: Comparison) -> dict[str, Any]:
    return {
        "a": c.a.run_id, "b": c.b.run_id, "offline": c.offline,
        "status": {"a": c.a.status, "b": c.b.status},
        "score": {"a": c.a.score, "b": c.b.score, "delta": c.score_delta.to_dict()},
        "pass_rate": {"a": c.a.suite.pass_rate, "b": c.b.suite.pass_rate,
                      "delta_points": c.pass_rate_delta.to_dict()},
        "errors": {"a": c.a.suite.errors, "b": c.b.suite.errors},
        "regressed": c.regressed, "newly_passing": c.newly_passing,
        "only_in_a": c.only_in_a, "only_in_b": c.only_in_b,
        "unscored_in_a": c.unscored_in_a, "unscored_in_b": c.unscored_in_b,
        "cases": [{"id": d.case_id, "a": d.score_a, "b": d.score_b, "delta": d.delta,
                   "status_a": d.status_a, "status_b": d.status_b} for d in c.cases],
    }


def render_compare_json(c: Comparison) -> str:
    return json.dumps(compare_dict(c), indent=2, default=str)


#: what ``cycle compare --fail-on`` fails on
FAIL_ON = ("regression", "case", "never")


class GateFailure(Struct, frozen=True):
    """Why a comparison fails the CI gate. ``checked``: the gate found a regression (exit
    1, as a failing suite does); else it could not check (exit 3, "errors prevented
    judging"), so that CI tells a flaky provider or a cut-short run from a real drop."""

    why: str
    checked: bool

    @property
    def exit_code(self) -> int:
        return 1 if self.checked else 3

    def __str__(self) -> str:
        return self.why if self.checked else (
            f"cannot check (exit 3, not a regression): {self.why}")


def failing(c: Comparison, fail_on: str) -> GateFailure | None:
    """Why the comparison fails a CI gate (None: it passes). ``regression``: the paired
    score change's 95% interval lies wholly below zero, a drop the sample cannot explain;
    ``case``: a case that passed in A fails in B; ``never``: report only. Either of the
    first two also fails, as "cannot check", when the gate cannot tell: a run not
    finished, no case scored in both runs, a drop on the one paired case (no interval),
    a case scored in A without a score in B (its iterations errored). A regression found
    among the cases that were compared wins over cases that could not be: it is real."""
    if fail_on not in ("regression", "case"):
        return None
    s = c.score_delta
    if c.unfinished:
        return GateFailure(f"{' and '.join(c.unfinished)} (its figures are partial): "
                           "compare finished runs", checked=False)
    if s.n == 0 or s.mean is None:
        return GateFailure("no case has a score in both runs, nothing was compared",
                           checked=False)
    if s.ci_high is not None and s.ci_high < 0:
        return GateFailure(f"a credible regression: the score changed by {s.mean:+.1f} "
                           f"points, 95% CI [{s.ci_low:+.1f}, {s.ci_high:+.1f}] over {s.n} "
                           "paired cases", checked=True)
    if fail_on == "case" and c.regressed:
        return GateFailure(f"{len(c.regressed)} case(s) regressed from passing to failing: "
                           f"{', '.join(c.regressed)}", checked=True)
    if s.ci_high is None and s.mean < 0:
        return GateFailure(f"the score dropped by {s.mean:+.1f} points on the only paired "
                           "case, and one case gives no interval to tell a drop from noise",
                           checked=False)
    if c.unscored_in_b:
        return GateFailure(f"{len(c.unscored_in_b)} case(s) scored in A have no score in B "
                           f"(errored, not scored 0): {', '.join(c.unscored_in_b)}",
                           checked=False)
    return None


def render_compare_markdown(c: Comparison, fail_on: str = "regression") -> str:
    """The comparison as a pull request comment: the table, the verdict, the cases."""

    def cost(r: RunResult) -> str:
        return f"${r.suite.cost:.4f}" + (" (est.)" if r.suite.cost_estimated else "")

    gate = failing(c, fail_on)
    head = (f"**Fails the gate**: {gate}." if gate else
            "**Passes the gate**: no credible regression" + (
                "" if fail_on != "case" else " and no case regressed") + ".")
    lines = [f"### cycle: `{c.b.run_id}` against `{c.a.run_id}`", ""]
    if c.offline:
        lines += ["> Offline model: at least one run's results do not come from a real model.", ""]
    if c.unfinished:
        lines += [f"> Unfinished: {' and '.join(c.unfinished)}; its figures are partial.", ""]
    if c.iterations:
        lines += [f"> Iterations differ: A ran {c.iterations[0]} a case, B {c.iterations[1]}.", ""]
    lines += [head, "",
              "| | base (A) | head (B) | change, 95% CI |", "| --- | ---: | ---: | --- |",
              f"| Score | {f.score(c.a.score)} | {f.score(c.b.score)} | {_delta(c.score_delta, short=True)} |",
              (f"| Pass rate | {f.pct(c.a.suite.pass_rate)} | {f.pct(c.b.suite.pass_rate)} | "
              f"{_delta(c.pass_rate_delta, ' pts', short=True)} |"),
              f"| Errors | {c.a.suite.errors} | {c.b.suite.errors} | |",
              f"| Cost | {cost(c.a)} | {cost(c.b)} | |", ""]
    if c.regressed:
        lines.append("Regressed (passed in A, fail in B): " + ", ".join(f"`{k}`" for k in c.regressed))
    if c.newly_passing:
        lines.append("Newly passing: " + ", ".join(f"`{k}`" for k in c.newly_passing))
    if c.only_in_a or c.only_in_b:
        lines.append(f"Not paired: {len(c.only_in_a)} only in A, {len(c.only_in_b)} only in B.")
    lines += [x + "." for x in _unscored(c)]
    moved = _moved(c, 10)
    if moved:
        lines += ["", "<details><summary>Largest changes by case</summary>", "",
                  "| case | A | B | change |", "| --- | ---: | ---: | ---: |"]
        for d in moved:
            lines.append(f"| {f.md_code(d.case_id, cell=True)} | {f.score(d.score_a)} | {f.score(d.score_b)} | "
                         f"{d.delta:+.1f} |")
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
