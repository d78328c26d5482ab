"""``cycle runs``: the stored runs, newest first, with their figures.

Every evaluation is a run: ``cycle run``, ``cycle run --eval`` and each round
of an improvement cycle (its baseline and candidates). The ids it prints are
what ``cycle compare`` and ``cycle run --resume`` take, also as a unique
prefix or suffix, ``@last`` or ``@prev``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cycle.cli import MAX_ROWS, CliContext, local_minute
from cycle.durations import parse_duration
from cycle.words import pct

if TYPE_CHECKING:
    from cycle.records import RunRow
    from cycle.store import Store


def when(value: str, flag: str) -> str:
    """An ISO time in the store's form (UTC) from a date, a date and time (local unless it
    says otherwise) or a duration ago ("2h", "7d")."""
    try:
        at = datetime.now(UTC) - timedelta(seconds=parse_duration(value, flag))
    except ValueError:
        try:
            at = datetime.fromisoformat(value.strip())
        except ValueError:
            raise click.BadParameter(
                f"{value!r} is neither a date (2026-11-01), a date and time (2026-11-01T14:30) "
                "nor a duration ago (90m, 2h, 7d)", param_hint=flag) from None
        try:
            at = at.astimezone(UTC)  # a naive time is local, as people write it
        except (ValueError, OverflowError):  # 0001-01-01 local, east of UTC: year 0
            raise click.BadParameter(f"{value!r} is out of the range of dates",
                                     param_hint=flag) from None
    except OverflowError:  # "99999999d": before the first year a date can hold
        raise click.BadParameter(f"{value!r} is out of the range of dates",
                                 param_hint=flag) from None
    return at.isoformat(timespec="microseconds")


def origin(run: dict[str, Any]) -> str:
    """What made the run: ``run`` (cycle run), or a cycle's round and its role."""
    if run["cycle_id"] is None:
        return "run"
    return f"round {run['round']} {run['role'] or ''}".rstrip()  # the cycle is in the run's id


def run_summary(row: RunRow) -> dict[str, Any]:
    """One run as ``cycle runs --json`` prints it."""
    s = row.summary or {}
    return {
        "id": row.id, "prompt_id": row.prompt_id, "version": row.version, "status": row.status,
        "cycle_id": row.cycle_id, "round": row.round, "role": row.role,
        "agent_model": row.agent_model, "judge_model": row.judge_model, "offline": row.offline,
        "score": s.get("score"), "ci_low": s.get("ci_low"), "ci_high": s.get("ci_high"),
        "pass_rate": s.get("pass_rate"), "cases": s.get("cases"), "errored": s.get("errored"),
        "cost": s.get("cost"), "cost_estimated": s.get("cost_estimated"),
        "started_at": row.started_at, "finished_at": row.finished_at,
    }


def _score(r: dict[str, Any]) -> str:
    if r["score"] is None:
        return "—"
    ci = (f" [{r['ci_low']:.1f}, {r['ci_high']:.1f}]"
          if r["ci_low"] is not None and r["ci_high"] is not None else "")
    return f"{r['score']:.1f}{ci}"


def _cost(r: dict[str, Any]) -> str:
    if r["cost"] is None:
        return "—"
    return f"${r['cost']:.4f}" + (" (est.)" if r["cost_estimated"] else "")


def render_table(rows: list[dict[str, Any]]) -> list[str]:
    cells = [[r["id"], f"{r['prompt_id'] or '—'}@{r['version'] or '—'}", origin(r), r["status"],
              _score(r), "—" if r["pass_rate"] is None else pct(r['pass_rate']),
              "—" if r["cases"] is None else str(r["cases"]) + (
                  f" ({r['errored']} errored)" if r.get("errored") else ""),
              _cost(r) + ("*" if r["offline"] else ""),
              local_minute(datetime.fromisoformat(r["started_at"])) if r["started_at"] else "—"]
             for r in rows]
    head = ["run", "prompt@version", "from", "status", "score [95% CI]", "pass", "cases", "cost",
            "started"]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    right = {5, 6}  # numbers line up on the right

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if i in right else v.ljust(w)
                         for i, (v, w) in enumerate(zip(values, widths, strict=True))).rstrip()

    notes = (["* the offline model: these results do not come from a real model"]
             if any(r["offline"] for r in rows) else [])
    return [line(head), *(line(c) for c in cells), *notes]


@click.command()
@click.argument("prompt_id", required=False)
@click.argument("run_id", required=False)
@click.option("--version", "version", help="Only runs of this prompt version.")
@click.option("--since", help="Only runs started since: 2026-11-01, 2026-11-01T14:30, or 2h / 7d ago.")
@click.option("--until", help="Only runs started before this time (same forms as --since).")
@click.option("--cycle", "cycle_id", help="Only the runs of this improvement cycle.")
@click.option("--no-cycles", is_flag=True, help="Leave out the runs of improvement cycles.")
@click.option("--config", "config", type=click.Path(exists=True, path_type=Path),
              help="A cycle.yaml whose store to use (default: --store, $CYCLE_STORE, ./.cycle).")
@click.option("-n", "--limit", type=click.IntRange(min=1, max=MAX_ROWS), default=20,
              show_default=True,
              help="Show at most this many runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
def runs(prompt_id: str | None, run_id: str | None, version: str | None, since: str | None,
         until: str | None, cycle_id: str | None, no_cycles: bool, config: Path | None,
         limit: int, as_json: bool) -> None:
    """List the stored runs (of PROMPT_ID, if given), newest first.

    Each run's id, prompt version, what made it (`run`, or a cycle's round),
    status, score with its 95% interval, pass rate, cases, cost and start time.
    Compare two: `cycle compare @prev @last` (ids also by a unique prefix or suffix).
    `cycle runs show RUN_ID` shows one run case by case (as `cycle report RUN_ID
    --no-write`).
    """
    from cycle.store import Store
    from cycle.store.masking import MaskedRunLog

    base = None if config is None else (config if config.is_dir() else config.parent)
    if prompt_id == "show" and run_id:
        _show_stored(run_id, base, report_dir=None, as_json=as_json)
        return
    if run_id:
        raise click.UsageError(f"unexpected argument {run_id!r}: cycle runs [PROMPT_ID] lists "
                               f"runs; cycle runs show RUN_ID shows one")
    if version and not prompt_id:
        raise click.UsageError("--version needs the prompt: cycle runs PROMPT_ID --version 1.0.2")
    after = when(since, "--since") if since else None
    before = when(until, "--until") if until else None
    obj = click.get_current_context().find_object(CliContext) or CliContext()
    with Store.open(obj.store_path(base), create=False) as store:
        # an older store's rows may hold an endpoint's credentials: shown masked
        found = MaskedRunLog(store).recent(prompt_id=prompt_id, version=version, since=after, until=before,
                                  cycle_id=cycle_id, evals_only=no_cycles, limit=limit)
        # a run stored as running whose process is gone: said, or it would look running
        gone = {r.id: interrupted(store, r) if r.status == "running" else None for r in found}
    rows = [run_summary(r) for r in found]
    for row in rows:
        if gone[row["id"]]:
            row["status"], row["stop_reason"] = "interrupted", gone[row["id"]]
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        click.echo("No runs" + (f" of '{prompt_id}'" if prompt_id else "")
                   + (" matching the filters" if (version or since or until or cycle_id or no_cycles)
                      else "") + " in the store. Start one: cycle run cycle.yaml")
        return
    for text in render_table(rows):
        click.echo(text)
    for row in rows:
        if gone[row["id"]]:
            click.echo(f"{row['id']}: {gone[row['id']]}")


def interrupted(store: Store, run: RunRow) -> str | None:
    """How to go on with a run that was interrupted (Ctrl-C), or is stored as running
    though its process is gone (killed, crashed); None for any other run. A cycle's runs
    resume with their cycle."""
    from cycle.store.locks import abandoned

    if run.cycle_id is not None:
        return None
    where = (run.config or {}).get("config_path") or "cycle.yaml"
    again = f"resume with: cycle run {where} --resume {run.id}"
    if run.status == "interrupted":
        return again
    if run.status == "running" and abandoned(store, f"run:{run.id}"):
        return f"its process is gone (killed?); {again}"
    return None


@click.command()
@click.argument("run_id")
@click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("reports"), show_default=True, help="Where to write the reports.")
@click.option("--no-write", is_flag=True, help="Only show the run; write no report.")
@click.option("--json", "as_json", is_flag=True, help="The run's summary and cases as JSON.")
@click.option("--config", "config", type=click.Path(exists=True, path_type=Path),
              help="A cycle.yaml whose store to use (default: --store, $CYCLE_STORE, ./.cycle).")
def report(run_id: str, report_dir: Path, no_write: bool, as_json: bool,
           config: Path | None) -> None:
    """Show stored run RUN_ID case by case, and write its reports (again).

    The summary a run prints at its end (every case: score, interval, pass rate,
    errors; the failed ones expanded), and its Markdown, JSON and JUnit reports, for a
    run whose reports were not written (a full disk, --no-reports) or were lost. A
    cycle's id (c-...) writes the cycle's Markdown, HTML and JSON reports. A run id may
    be a unique prefix or suffix, or @last.
    """
    from cycle.assemble.outputs import writable_folder

    base = None if config is None else (config if config.is_dir() else config.parent)
    if not no_write:
        writable_folder(report_dir, what="reports folder", field="--report-dir")
    _show_stored(run_id, base, report_dir=None if no_write else report_dir, as_json=as_json)


def _meant(store: Store, ref: str) -> tuple[str | None, str | None]:
    """(run id, cycle id) of what ``ref`` names, one of them: a run's id or a unique part
    of it (which wins), else a cycle's."""
    from cycle.errors import NotFoundError

    try:
        return store.runs.resolve(ref), None
    except NotFoundError as no_run:
        try:
            return None, store.cycles.resolve(ref)
        except NotFoundError:
            if ref.startswith("c-"):
                raise  # a cycle's id: what is wrong with it, not with runs
            raise no_run from None


def _show_stored(run_id: str, base: Path | None, *, report_dir: Path | None,
                 as_json: bool) -> None:
    """Show a stored run case by case, writing its reports to ``report_dir`` (if given);
    a cycle's id writes the cycle's reports."""
    from msgspec.structs import replace

    from cycle.cli.run import _show_run, with_judge_note
    from cycle.evals.results import load_run
    from cycle.report import write_reports
    from cycle.report.cycle_report import (
        console_lines,
        cycle_report_dict,
        round_lines,
        write_cycle_report,
    )
    from cycle.store import Store
    from cycle.store.masking import MaskedRunLog, masked

    obj = click.get_current_context().find_object(CliContext) or CliContext()
    with Store.open(obj.store_path(base), create=False) as store:
        found, cycle_id = _meant(store, run_id)
        if found is None:
            assert cycle_id is not None
            # what an older store holds is shown and written with today's masking
            data = masked(cycle_report_dict(store, cycle_id))
            paths = {} if report_dir is None else write_cycle_report(store, cycle_id, report_dir,
                                                                     data=data)
            if as_json:
                # --json printed the report paths as text, and --no-write nothing at all
                click.echo(json.dumps({**data, "reports": {k: str(p) for k, p in paths.items()}},
                                      indent=2, default=str))
                return
            for line in [f"cycle {cycle_id}:", *round_lines(data), *console_lines(data)]:
                click.echo(line)
            for kind, path in paths.items():
                click.echo(f"{kind + ' report':16} {path}")
            return
        # read back as its own run wrote it, masked (cycle.store.masking): an older store
        # may hold a key of the environment, or an endpoint's URL with its credentials
        log = MaskedRunLog(store)
        row = log.require(found)
        result = with_judge_note(load_run(log, row.id), store)
        gone = interrupted(store, row)
        if gone:
            said = result.stop_reason if result.status == "interrupted" else None
            result = replace(result, status="interrupted",
                             stop_reason=f"{said}; {gone}" if said else gone)
        paths = {} if report_dir is None else write_reports(result, report_dir)
        _show_run(result, paths, quiet=False, as_json=as_json)
