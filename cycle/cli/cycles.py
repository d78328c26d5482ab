"""``cycle cycles``: the improvement cycles in the store, newest first.

Each line: id, prompt, status, rounds run, initial -> final score (version),
why it stopped and what it cost, the same figures the cycle report shows.
``cycle cycles CYCLE_ID`` shows one cycle round by round, each round's score beside
its judge's agreement with people (or that the judge is uncalibrated).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cycle.cli import MAX_ROWS, CliContext

if TYPE_CHECKING:
    from cycle.store import Store


def cycle_summaries(store: Store, prompt_id: str | None, *, limit: int) -> list[dict[str, Any]]:
    """One summary per stored cycle, newest first (what ``cycle cycles --json`` prints)."""
    from cycle.report.cycle_report import initial_and_final
    from cycle.store.cycles import orphaned

    out = []
    for row in store.cycles.recent(prompt_id, limit=limit):
        rounds = store.cycles.get_rounds(row.id)
        initial, final = initial_and_final(row, rounds)
        costs: dict[str, float] = {}
        for by_role in store.cycles.round_costs(row.id).values():
            for role, usd in by_role.items():
                costs[role] = costs.get(role, 0.0) + usd
        status, reason = row.status, row.stop_reason
        if orphaned(row):
            status = "interrupted"
            where = row.config.get("config_path") or "cycle.yaml"
            reason = f"its process is gone (killed?); resume with: cycle improve {where} --resume {row.id}"
        out.append({
            "id": row.id, "prompt_id": row.prompt_id, "status": status,
            "rounds": sum(1 for r in rounds if r.improves and r.status in ("finished", "stopped")),
            "initial": initial, "final": final,
            "improvement": (None if initial["score"] is None or final["score"] is None
                            else final["score"] - initial["score"]),
            "stop_reason": reason,
            # the calls recorded for the cycle, also for one still running or killed
            "cost": sum(costs.values()), "cost_by_role": dict(sorted(costs.items())),
            "started_at": row.started_at, "finished_at": row.finished_at,
        })
    return out


def _score(entry: dict[str, Any]) -> str:
    score = "—" if entry["score"] is None else f"{entry['score']:.1f}"
    return f"{score} ({entry['version'] or '—'})"


def _cycle_named(store: Store, ref: str) -> str | None:
    """The cycle ``ref`` names (its id or a unique part of it), unless it names a prompt."""
    from cycle.errors import NotFoundError

    if store.count_versions(ref):
        return None
    try:
        return store.cycles.resolve(ref)
    except NotFoundError:
        if ref.startswith("c-"):
            raise  # a cycle's id that is wrong: say what is wrong with it
        return None


def _show_cycle(store: Store, cycle_id: str, as_json: bool) -> None:
    """One cycle: its summary, its judge's agreement, then each round with its score
    beside its judge's kappa with people (the cycle report's figures)."""
    from cycle.report.cycle_report import cycle_report_dict, round_lines
    from cycle.report.format import bounds, score, signed
    from cycle.store.masking import masked

    data = masked(cycle_report_dict(store, cycle_id))  # an older store may hold keys raw
    if as_json:
        keep = ("cycle_id", "prompt_id", "status", "stop_reason", "started_at", "finished_at",
                "offline", "judge_agreement", "rounds_run", "initial", "final", "improvement",
                "total_cost", "cost_by_role")
        rounds = [{k: v for k, v in r.items() if k != "suggestions"} for r in data["rounds"]]
        click.echo(json.dumps({k: data[k] for k in keep} | {"rounds": rounds}, indent=2,
                              default=str))
        return
    i, fin = data["initial"], data["final"]
    click.echo(f"cycle {data['cycle_id']} on {data['prompt_id']}: {data['status']}"
               + ("  [offline model]" if data["offline"] else ""))
    click.echo(f"  {i['version']} ({score(i['score'])} {bounds(i['ci_low'], i['ci_high'])}) -> "
               f"{fin['version']} ({score(fin['score'])} {bounds(fin['ci_low'], fin['ci_high'])}),"
               f" improvement {signed(data['improvement'])}, cost ${data['total_cost']:.4f}")
    click.echo(f"  stopped because: {data['stop_reason'] or '—'}")
    if data["judge_agreement"]:
        click.echo(f"  {data['judge_agreement']}")
    click.echo("rounds:")
    for line in round_lines(data):
        click.echo(line)


@click.command()
@click.argument("prompt_id", required=False)
@click.option("--config", "config", type=click.Path(exists=True, path_type=Path),
              help="A cycle.yaml whose store to use (default: --store, $CYCLE_STORE, ./.cycle).")
@click.option("-n", "--limit", type=click.IntRange(min=1, max=MAX_ROWS), default=20,
              show_default=True,
              help="Show at most this many cycles.")
@click.option("--json", "as_json", is_flag=True, help="Print the cycles as JSON.")
def cycles(prompt_id: str | None, config: Path | None, limit: int, as_json: bool) -> None:
    """List the improvement cycles in the store (of PROMPT_ID, if given), newest first.

    Shows each cycle's id, prompt, status, rounds run, initial -> final score,
    why it stopped and its cost. Given a cycle's id instead, shows that cycle round by
    round, each round's score beside its judge's agreement with people (kappa with its
    95% interval and the number of labels, or uncalibrated). `cycle improve --resume CYCLE_ID` continues an
    interrupted one; `cycle rollback PROMPT --round N --cycle CYCLE_ID` goes back
    to the version one of its rounds ran with.
    """
    from cycle.store import Store

    obj = click.get_current_context().find_object(CliContext) or CliContext()
    base = None if config is None else (config if config.is_dir() else config.parent)
    with Store.open(obj.store_path(base), create=False) as store:
        cycle_id = None if prompt_id is None else _cycle_named(store, prompt_id)
        if cycle_id is not None:
            _show_cycle(store, cycle_id, as_json)
            return
        from cycle.store.masking import masked

        rows = masked(cycle_summaries(store, prompt_id, limit=limit))
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        click.echo("No improvement cycles" + (f" of '{prompt_id}'" if prompt_id else "")
                   + " in the store. Start one: cycle improve cycle.yaml")
        return
    width = max(len(r["id"]) for r in rows)
    pwidth = max(len(r["prompt_id"]) for r in rows)
    click.echo(f"{'cycle':<{width}}  {'prompt':<{pwidth}}  {'status':<11}  rounds  "
               f"{'initial -> final':<32}  {'cost':>9}  stopped because")
    for r in rows:
        scores = f"{_score(r['initial'])} -> {_score(r['final'])}"
        click.echo(f"{r['id']:<{width}}  {r['prompt_id']:<{pwidth}}  {r['status']:<11}  "
                   f"{r['rounds']:>6}  {scores:<32}  {'$' + format(r['cost'], '.4f'):>9}  "
                   f"{r['stop_reason'] or '—'}")
