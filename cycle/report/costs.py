"""A cost cycle's versions on the score/cost plane (``improve.objective: cost``), as the
cycle reports and the console show them: each version the cycle evaluated in full, with
its score, its model and its mean agent cost per case (cycle.loop.cost), and which are on
the frontier (no other evaluated version scores at least as well for at most its cost).

Built from the store (``score_and_cost``), drawn by ``markdown``, ``html`` and ``console``
from the JSON report's ``costs``, so that the three say the same thing.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from cycle.loop.cost import Point, frontier, money
from cycle.records import CycleRow, RoundRow
from cycle.store import Store

#: what the frontier mark means, as the reports say it
KEY = ("Frontier: no other version evaluated scores at least as high for at most its "
       "agent cost per case; cost: the mean over cases of what the agent's model calls "
       "were billed per iteration")


def score_and_cost(store: Store, cycle: CycleRow, rounds: list[RoundRow]) -> dict[str, Any] | None:
    """The versions a cost cycle evaluated while exploring, each once (its first full
    evaluation), with the frontier; None for a cycle whose objective is score."""
    improve = cycle.config.get("improve") or {}
    if improve.get("objective") != "cost":
        return None
    evaluated: list[tuple[RoundRow, str, str]] = []  # (round, version, run)
    for r in rounds:
        if r.round == 0 and cycle.initial_version:
            evaluated.append((r, cycle.initial_version, r.baseline_run_id or f"{cycle.id}-r0"))
        elif r.stage == "improve" and r.candidate_version and r.candidate_run_id:
            evaluated.append((r, r.candidate_version, r.candidate_run_id))
    seen: set[str] = set()
    versions = []
    for r, version, run in evaluated:
        if version in seen or store.runs.get(run) is None:
            continue
        seen.add(version)
        costs = store.runs.agent_case_costs(run)
        model = store.get_version(cycle.prompt_id, version).prompt.params.get("model")
        versions.append({"version": version, "round": r.round, "score": r.score,
                         "model": model or cycle.config.get("agent"),
                         "cost_per_case": sum(costs.values()) / len(costs) if costs else None})
    front = frontier([Point(v["version"], v["score"], v["cost_per_case"]) for v in versions])
    for v in versions:
        v["frontier"] = v["version"] in front
        v["final"] = v["version"] == cycle.final_version
    return {"margin": improve.get("margin"), "versions": versions}


def _cost(v: dict[str, Any]) -> str:
    return "—" if v["cost_per_case"] is None else money(v["cost_per_case"])


def _score(v: dict[str, Any]) -> str:
    return "—" if v["score"] is None else f"{v['score']:.1f}"


def _marks(v: dict[str, Any]) -> str:
    return ", ".join(x for x, on in (("frontier", v["frontier"]), ("final", v["final"])) if on)


def markdown(data: dict[str, Any]) -> list[str]:
    """The Markdown section."""
    out = ["## Score and cost", "",
           (f"Objective: the cheapest version not worse than the incumbent by more than "
            f"{data['margin']:g} points. {KEY}."), "",
           "| version | round | model | score | agent cost per case | |",
           "| --- | ---: | --- | ---: | ---: | --- |"]
    for v in data["versions"]:
        model = str(v["model"] or "—").replace("|", "\\|")
        out.append(f"| {v['version']} | {v['round']} | {model} | {_score(v)} | {_cost(v)} | "
                   f"{_marks(v)} |")
    return out


def html(data: dict[str, Any]) -> Markup:
    """The HTML section's table."""
    rows = "".join(
        Markup("<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td>"
               "<td class=\"num\">{}</td><td>{}</td></tr>").format(
            v["version"], v["round"], v["model"] or "—", _score(v), _cost(v), _marks(v))
        for v in data["versions"])
    return Markup(
        "<p class=\"muted\">Objective: the cheapest version not worse than the incumbent by "
        "more than {} points. {}.</p><table id=\"costs\"><thead><tr><th>version</th>"
        "<th>round</th><th>model</th><th>score</th><th>agent cost per case</th><th></th></tr>"
        "</thead><tbody>{}</tbody></table>").format(f"{data['margin']:g}", KEY, rows)


def console(data: dict[str, Any]) -> list[str]:
    """The console's lines: a version a line, the frontier marked."""
    out = ["score and cost (frontier: not beaten on both by another version):"]
    for v in data["versions"]:
        marks = _marks(v)
        out.append(f"  {v['version']:10} {_score(v):>6}  {_cost(v):>12} a case  "
                   f"{v['model'] or ''}" + (f"  [{marks}]" if marks else ""))
    return out

