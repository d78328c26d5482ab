"""The report of an improvement cycle, in Markdown and JSON, built from the store.

A summary (rounds, why it stopped, initial and final score with intervals,
the improvement, total cost, final version; "offline model" when the results
did not come from a real model), a score table per round, a Mermaid chart of
the score across rounds, a population's lineage (each candidate under its parent:
cycle.report.lineage), each round's suggestions with their decisions, and
the diff from the first prompt to the final one. Because it reads the store,
it can be written again for any cycle, also one that was resumed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cycle.records import CycleRow, RoundRow
from cycle.report import format as f
from cycle.report.html import render_cycle_html
from cycle.report.json import OFFLINE_NOTE
from cycle.store import Store

# Figures are kept at full precision here and rounded once, when shown: rounding
# them first (to 2 digits) and again for display (to 1) made the report say 96.8
# where the console, rounding once, said 96.9 for the same interval.


def initial_and_final(
    cycle: CycleRow, rounds: list[RoundRow]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The version a cycle started from and the one it ended on (for a cycle still
    running: the current incumbent), each with its score and 95% interval."""
    first = next((r for r in rounds if r.round == 0), None)
    final_row = first
    final_version = cycle.final_version
    if final_version is None:  # not finished: the last accepted candidate is head
        final_version = cycle.initial_version
        for r in rounds:
            if r.round >= 1 and r.accepted and r.candidate_version:
                final_version = r.candidate_version
    # the final score is the score of the round that evaluated the final version and kept it
    for r in rounds:
        if r.round >= 1 and r.accepted and r.candidate_version == final_version:
            final_row = r

    def entry(version: str | None, row: RoundRow | None) -> dict[str, Any]:
        return {"version": version, "score": row.score if row else None,
                "ci_low": row.ci_low if row else None, "ci_high": row.ci_high if row else None}

    return entry(cycle.initial_version, first), entry(final_version, final_row)


def cycle_report_dict(store: Store, cycle_id: str) -> dict[str, Any]:
    """Everything the cycle report shows, JSON-ready."""
    cycle = store.cycles.get(cycle_id)
    rounds = store.cycles.get_rounds(cycle_id)
    costs = store.cycles.round_costs(cycle_id)
    offline = store.cycles.offline(cycle_id)
    by_role: dict[str, float] = {}
    for c in costs.values():
        for role, usd in c.items():
            by_role[role] = by_role.get(role, 0.0) + usd
    estimated = store.cycles.cost_estimated(cycle_id)

    initial, final = initial_and_final(cycle, rounds)
    final_version = final["version"]
    improvement = (None if initial["score"] is None or final["score"] is None
                   else final["score"] - initial["score"])
    diff = ""
    if cycle.initial_version and final_version and final_version != cycle.initial_version:
        diff = store.diff(cycle.prompt_id, cycle.initial_version, final_version).render()
    words = {k: store.get_version(cycle.prompt_id, v).prompt.words if v else None
             for k, v in (("initial", cycle.initial_version), ("final", final_version))}

    round_items = _round_items(store, cycle, rounds, costs, initial["score"])
    from cycle.loop.lineage import lineage_of

    lineage = lineage_of(store, cycle_id)
    from cycle.report.costs import score_and_cost
    # per case, its mean in each round's evaluation (the heatmap of the HTML report)
    per_case: dict[str, dict[int, float | None]] = {}
    run_of_round: dict[int, str] = {}
    for run in reversed(store.runs.recent(cycle_id=cycle_id, limit=None)):  # oldest first
        # a population's screens are minibatches, not a round's evaluation (the lineage
        # shows their gains)
        if run.round is not None and run.role != "screen":
            run_of_round[run.round] = run.id
            for case_id, mean in store.runs.case_means(run.id).items():
                per_case.setdefault(case_id, {})[run.round] = mean
    first = run_of_round.get(0)
    judge_note = None
    # a run judged by a model (a judge cycle's runs call the judge as the agent under test)
    if first is not None and (row := store.runs.get(first)) is not None and \
            row.judge_model is not None and store.runs.usage_by_role(first).get("judge") is not None:
        from cycle.judge.calibration import agreement_line

        judge_note = agreement_line(store, run_id=first, model=row.judge_model,
                                    version=row.judge_version)
    final_round = max((r.round for r in rounds if r.accepted and r.candidate_version == final_version),
                      default=0)
    return {
        "kind": "cycle_report",
        "cycle_id": cycle.id,
        "prompt_id": cycle.prompt_id,
        "status": cycle.status,
        "stop_reason": cycle.stop_reason,
        "started_at": cycle.started_at,
        "finished_at": cycle.finished_at,
        "offline": offline,
        "note": OFFLINE_NOTE if offline else None,
        # the judge's agreement with people, or that it is uncalibrated (None: no LLM judge)
        "judge_agreement": judge_note,
        "rounds_run": sum(1 for r in rounds if r.improves),
        "held_out": len(cycle.config.get("held_out") or ()),
        "initial": initial,
        "final": final,
        "improvement": improvement,
        "words": words,
        "total_cost": sum(by_role.values()),
        "cost_by_role": {k: v for k, v in sorted(by_role.items())},
        "cost_estimated": estimated,
        "config": cycle.config,
        "rounds": round_items,
        # a population's candidates as a tree, with the frontier (None: a chain, whose
        # lineage is the rounds table)
        "lineage": lineage.to_dict() if lineage.population > 1 else None,
        # a cost cycle's versions with their score and agent cost per case, and the
        # frontier (None: the objective is score)
        "costs": score_and_cost(store, cycle, rounds),
        "cases": per_case,
        "diff": diff,
        "transcripts": _transcripts(store, run_of_round.get(final_round)),
        "outputs": _outputs(store, run_of_round.get(0),
                            run_of_round.get(final_round) if final_round else None),
    }


def console_lines(data: dict[str, Any]) -> list[str]:
    """What the console adds after a cycle's rounds, from its ``cycle_report_dict``: a
    population's lineage as a compact tree, a cost cycle's versions with their score and
    cost and the frontier, and the rounds' pairwise comparisons (none of them for a chain
    that scores decided)."""
    from cycle.report import costs, lineage

    return ((lineage.console(data["lineage"]) if data["lineage"] else [])
            + (costs.console(data["costs"]) if data["costs"] else [])
            + f.pairwise_lines(data["rounds"]))


def round_lines(data: dict[str, Any]) -> list[str]:
    """Each round in a console line: the version it evaluated, its score with the 95%
    interval, what became of it, and beside the score the judge's agreement with people
    (none for a cycle no model judged, as a judge cycle)."""
    judged = any(r.get("judge_agreement") for r in data["rounds"])
    out = []
    for r in data["rounds"]:
        name = f"{r['round']}c" if r["stage"] == "confirm" else str(r["round"])
        judge = f"; judge {judge_cell(r)}" if judged else ""
        verdict = {"yes": "kept", "no": "not kept"}.get(r["verdict"], r["verdict"])
        out.append(f"  round {name:>3}: {r['version'] or '—'} scored {f.score(r['score'])} "
                   f"{f.bounds(r['ci_low'], r['ci_high'])} ({verdict}){judge}")
    return out


def _decision(s: dict[str, Any]) -> str:
    """A suggestion's decision and who made it (unknown for cycles stored before authors)."""
    by = s.get("decided_by")
    return _cell(f"{s['decision']} by {by}") if by else s["decision"]


def _round_items(store: Store, cycle: CycleRow, rounds: list[RoundRow],
                 costs: dict[int, dict[str, float]], initial_score: float | None
                 ) -> list[dict[str, Any]]:
    """Each round as the report shows it: its figures, cost, suggestions, and the scores of
    the incumbent and of head after it."""
    suggestions = store.cycles.get_suggestions(cycle.id)
    incumbent_score = initial_score
    head_score = initial_score
    # the rounds that moved head (a cycle's head moves are recorded with their round): an
    # explored candidate the cycle kept without moving head yet is not head
    moved = {round_no for round_no, _ in store.cycles.head_moves(cycle.id, cycle.prompt_id)}
    from cycle.judge.calibration import run_judge_kappa

    judges: dict[tuple[str | None, str | None], Any] = {}  # each judge measured once
    round_items = []
    for r in rounds:
        judge = run_judge_kappa(store, r.candidate_run_id or r.baseline_run_id, judges)
        if r.round == 0 or r.accepted:
            incumbent_score = r.score if r.score is not None else incumbent_score
        if r.round in moved and r.score is not None:
            head_score = r.score
        round_items.append({
            "round": r.round,
            "stage": r.stage,
            "verdict": _verdict(r),
            "seen_delta": r.seen_delta,
            "held_out_delta": r.held_out_delta,
            "pairwise": r.pairwise or [],
            "version": r.version,
            "incumbent_version": r.incumbent_version,
            "status": r.status,
            "score": r.score,
            "ci_low": r.ci_low,
            "ci_high": r.ci_high,
            "pass_rate": r.pass_rate,
            # the judge of the round's run: its kappa with people, or uncalibrated (None:
            # no model judged it)
            "judge_agreement": judge.to_dict() if judge is not None else None,
            "delta": r.delta,
            "accepted": r.accepted,
            "reason": r.reason or "",
            "incumbent_score_after": incumbent_score,
            "head_score_after": head_score,
            "cost": sum(costs.get(r.round, {}).values()),
            "cost_by_role": dict(sorted(costs.get(r.round, {}).items())),
            "baseline_run_id": r.baseline_run_id,
            "candidate_run_id": r.candidate_run_id,
            "suggestions": [
                {k: v for k, v in s.model_dump().items() if k not in ("cycle_id",)}
                for s in suggestions if s.round == r.round
            ],
        })
    return round_items


def _verdict(r: RoundRow) -> str:
    """A round's outcome in a word or two: exploring rounds keep or drop their candidate,
    the confirmation moves head or not."""
    if r.status == "stopped":
        return "stopped"
    if r.round == 0:
        return "baseline"
    if r.accepted is None:
        return "—"
    if r.stage == "confirm":
        return "confirmed" if r.accepted else "not confirmed"
    return "yes" if r.accepted else "no"


def _transcripts(store: Store, run_id: str | None) -> dict[str, list[str]]:
    """Case id -> the transcript of its representative iteration in ``run_id``, for the
    cases whose runs did more than answer once (tools, conversations)."""
    from cycle.evals.results import load_run
    from cycle.records.transcript import has_behaviour, transcript_lines

    if run_id is None:
        return {}
    out = {}
    for case_id, stats in load_run(store.runs, run_id).cases.items():
        rep = stats.representative
        if rep is not None and has_behaviour(rep.trace):
            out[case_id] = transcript_lines(rep.trace, for_people=True)
    return out


def _outputs(store: Store, first: str | None, final: str | None
             ) -> dict[str, dict[str, Any]]:
    """Case id -> its representative output (and score) under the first version and
    under the final one, for the cases that only answered (a plain prompt: what changed
    is the answer itself; a case with tools or turns has its transcript instead)."""
    from cycle.evals.results import load_run
    from cycle.records.transcript import has_behaviour

    if first is None or final is None:
        return {}
    before, after = load_run(store.runs, first), load_run(store.runs, final)
    out: dict[str, dict[str, Any]] = {}
    for case_id, stats in before.cases.items():
        old, new = stats.representative, after.cases.get(case_id)
        rep = new.representative if new is not None else None
        if old is None or rep is None or has_behaviour(old.trace) or has_behaviour(rep.trace):
            continue
        out[case_id] = {"first": old.output, "first_score": old.score,
                        "final": rep.output, "final_score": rep.score}
    return out


def judge_cell(r: dict[str, Any]) -> str:
    """A round's judge figure as its row shows it: "kappa 0.50 [0.10, 0.80], n 8",
    "uncalibrated (no labels)", or — when no model judged the round."""
    judge = r.get("judge_agreement")
    return "—" if not judge else str(judge["text"])


def _cell(text: Any) -> str:
    return f.md_inline(text)


def _chart(data: dict[str, Any]) -> list[str]:
    rounds = [r for r in data["rounds"] if r["score"] is not None or r["incumbent_score_after"] is not None]
    if not rounds:
        return []
    evaluated = [r["score"] if r["score"] is not None else r["incumbent_score_after"] for r in rounds]
    kept = [r["incumbent_score_after"] if r["incumbent_score_after"] is not None else 0 for r in rounds]
    head = [r["head_score_after"] if r["head_score_after"] is not None else 0 for r in rounds]
    low = max(0, int(min(evaluated + kept + head) // 10 * 10) - 10)
    explored = kept != head  # a candidate was kept to explore from while head stayed
    title = ("bars: version evaluated; first line: head after the round"
             + ("; second line: the candidate kept to explore from" if explored else ""))
    return [
        "```mermaid",
        "xychart-beta",
        f'    title "Score by round ({title})"',
        "    x-axis \"round\" [" + ", ".join(str(r["round"]) for r in rounds) + "]",
        f'    y-axis "score" {low} --> 100',
        "    bar [" + ", ".join(f"{x:.1f}" for x in evaluated) + "]",
        "    line [" + ", ".join(f"{x:.1f}" for x in head) + "]",
        *(["    line [" + ", ".join(f"{x:.1f}" for x in kept) + "]"] if explored else []),
        "```",
    ]


def render_cycle_markdown(data: dict[str, Any]) -> str:
    """The Markdown cycle report."""
    i, fin = data["initial"], data["final"]
    # a judge column when a model judged some round (a judge cycle's runs have none)
    judged = any(r.get("judge_agreement") for r in data["rounds"])
    out = [f"# Improvement cycle {data['cycle_id']}: {data['prompt_id']}", ""]
    if data["offline"]:
        out += [f"> **Offline model**: {OFFLINE_NOTE.split(': ', 1)[-1]}.", ""]
    by_role = ", ".join(f"{k} {f.money(v)}" for k, v in data["cost_by_role"].items()) or "no calls"
    out += [
        "| | |",
        "| --- | --- |",
        f"| status | {data['status']} |",
        f"| rounds | {data['rounds_run']} (after the baseline evaluation) |",
        f"| stopped because | {_cell(data['stop_reason'] or '—')} |",
        *([f"| judge's agreement | {_cell(data['judge_agreement'])} |"]
          if data.get("judge_agreement") else []),
        f"| initial | {i['version']}: {f.score(i['score'])} {f.bounds(i['ci_low'], i['ci_high'])} |",
        f"| final | {fin['version']}: {f.score(fin['score'])} {f.bounds(fin['ci_low'], fin['ci_high'])} |",
        f"| improvement | {f.signed(data['improvement'])} |",
        f"| prompt length | {data['words']['initial']} -> {data['words']['final']} words |",
        *([f"| held out | {data['held_out']} cases the improver never saw |"] if data["held_out"] else []),
        f"| total cost | {f.money(data['total_cost'] or 0.0, data['cost_estimated'])} ({by_role}) |",
        "",
        "## Rounds",
        "",
        (f"| round | version | score | 95% interval | {'judge (kappa with people) | ' if judged else ''}"
         "delta | seen / held-out | accepted | cost | why |"),
        f"| ---: | --- | ---: | --- | {'--- | ' if judged else ''}---: | --- | --- | ---: | --- |",
    ]
    for r in data["rounds"]:
        name = f"{r['round']} (confirm)" if r["stage"] == "confirm" else str(r["round"])
        out.append(
            f"| {name} | {r['version'] or '—'} | {f.score(r['score'])} | "
            f"{f.bounds(r['ci_low'], r['ci_high'])} | {judge_cell(r) + ' | ' if judged else ''}"
            f"{f.signed(r['delta'])} | {f.split_gain(r)} | "
            f"{r['verdict']} | {f.money(r['cost'] or 0.0)} | {_cell(r['reason'])} |"
        )
    pairwise = f.pairwise_rows(data["rounds"])
    if pairwise:
        out += ["", "## Pairwise comparisons", "", f.PAIRWISE_TITLE + ".", "",
                "| round | criterion | wins | losses | ties | pairs | order flips | p (one-sided) |",
                "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        out += [f"| {t['round']} | {_cell(t['criterion'])} | {t['wins']} | {t['losses']} | "
                f"{t['ties']} | {t['pairs']} | {f.pct(t['order_flips'])} | {t['p_value']:.3g} |"
                for t in pairwise]
    if data.get("lineage"):
        from cycle.report import lineage

        out += ["", *lineage.markdown(data["lineage"])]
    if data.get("costs"):
        from cycle.report import costs

        out += ["", *costs.markdown(data["costs"])]
    chart = _chart(data)
    if chart:
        out += ["", "## Score across rounds", "", *chart]
    out += ["", "## Suggestions", ""]
    any_suggestion = False
    for r in data["rounds"]:
        if not r["suggestions"]:
            continue
        any_suggestion = True
        out += [f"### Round {r['round']}", "",
                "| # | type | priority | expected gain | decision | applied | reasoning | reason |",
                "| ---: | --- | --- | --- | --- | --- | --- | --- |"]
        for n, s in enumerate(r["suggestions"], 1):
            out.append(f"| {n} | {_cell(s['type'])} | {_cell(s['priority'])} | "
                       f"{_cell(s.get('expected_improvement') or '')} | {_decision(s)} | "
                       f"{'yes' if s['applied'] else 'no'} | {_cell(s['reasoning'])} | {_cell(s['reason'])} |")
        out.append("")
        for n, s in enumerate(r["suggestions"], 1):
            value = s["edited_value"] if s["edited_value"] is not None else s["suggested_value"]
            source = (f" (drawn from case {s['source_case']})"
                      if s.get("type") == "example" and s.get("source_case") else "")
            out += [f"<details><summary>{n}. {f.html_inline(s['type'] + source)}: suggested value</summary>", "",
                    *f.fenced(value, "text")]
            if s["current_value"]:
                out += ["replacing", "", *f.fenced(s["current_value"], "text")]
            out += ["", "</details>", ""]
    if not any_suggestion:
        out += ["No suggestions were made.", ""]
    out += ["## From the first prompt to the final one", ""]
    if data["diff"]:  # word by word: a one-line prompt edited by a word is one line
        from cycle.prompts.diff import lines_of, word_level

        words = "".join(word_level(lines_of(data["diff"])))
        out += f.fenced(words.rstrip("\n"), "diff")
    else:
        out += ["The final version is the one the cycle started from."]
    return "\n".join(out) + "\n"


#: the reports of a cycle, by format name (those of ``reports.formats`` a cycle has)
CYCLE_REPORTS: dict[str, tuple[str, Callable[[dict[str, Any]], str]]] = {
    "markdown": (".md", lambda data: render_cycle_markdown(data)),
    "html": (".html", lambda data: render_cycle_html(data)),
    "json": (".json", lambda data: json.dumps(data, indent=2, default=str) + "\n"),
}


def write_cycle_report(store: Store, cycle_id: str, directory: str | Path,
                       formats: Sequence[str] | None = None, *,
                       data: dict[str, Any] | None = None) -> dict[str, Path]:
    """Write ``<cycle id>.md``, ``.html`` and ``.json`` into ``directory`` (those of
    ``formats`` a cycle has; all by default); returns format -> path. ``data``: the
    cycle's ``cycle_report_dict`` when the caller has it already."""
    from cycle.report import report_formats, write_files

    if data is None:
        data = cycle_report_dict(store, cycle_id)
    d = Path(directory)
    wanted = report_formats(formats)
    chosen = {name: f for name, f in CYCLE_REPORTS.items() if name in wanted}
    paths = {name: d / f"{cycle_id}{suffix}" for name, (suffix, _) in chosen.items()}
    write_files(d, {paths[name]: (lambda render=render: [render(data)])
                    for name, (_, render) in chosen.items()},
                what=f"cycle {cycle_id}", again=f"cycle report {cycle_id}")
    return paths
