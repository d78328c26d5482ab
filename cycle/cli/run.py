"""``cycle run`` (evaluate a prompt on its cases) and ``cycle compare`` (two runs).

Exit codes of ``cycle run``: 0 every case passed, 1 some case failed,
2 usage or input error, 3 errors prevented judging part of the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cycle import heap
from cycle.cli import FiniteFloat, store_of
from cycle.errors import StoreConnectionLost
from cycle.words import plural

if TYPE_CHECKING:
    from cycle.assemble import LoadedConfig
    from cycle.assemble.estimate import Estimate
    from cycle.assemble.evalfile import EvalOptions
    from cycle.cases import CaseList, TestCase
    from cycle.records import Prompt, RunResult, RunRow
    from cycle.store import Store


@click.command()
@click.argument("config", type=click.Path(exists=False, path_type=Path), default="cycle.yaml")
@click.option("-n", "--iterations", type=click.IntRange(min=1), help="Runs per case (default: config, 3).")
@click.option("-c", "--concurrency", type=click.IntRange(min=1), help="Cases in flight (default: config, 8).")
@click.option("--timeout", type=FiniteFloat(min=0, min_open=True), help="Seconds per case.")
@click.option("--tag", "tags", multiple=True, help="Run only cases with this tag (repeatable).")
@click.option("--case", "case_ids", multiple=True, help="Run only this case id (repeatable).")
@click.option("--stop-on-first-failure", is_flag=True, default=None, help="Stop at the first failed case.")
@click.option("--agent", "agent_models", multiple=True,
              help="Agent model, overriding cycle.yaml; repeat it to compare models side by side.")
@click.option("--prompt-version", "prompt_versions", multiple=True, metavar="VERSION",
              help="Run this stored version of the prompt (number or label); repeatable: "
              "every version x every --agent, side by side.")
@click.option("--judge", "judge_models", multiple=True, metavar="MODEL",
              help="Judge model, overriding cycle.yaml; repeat it for a judge panel.")
@click.option("--budget", type=FiniteFloat(min=0), help="Hard cap in USD on this run's calls.")
@click.option("--batch", is_flag=True, default=None,
              help="Send the calls as provider batch jobs (OpenAI Batch, Gemini batch mode) at "
              "half the price; answers take minutes to hours, and --resume picks up the jobs.")
@click.option("--resume", "resume", metavar="RUN_ID", help="Resume a stored run; judged iterations are kept.")
@click.option("--take-over", is_flag=True,
              help="With --resume: take over a run another machine's process holds (it is gone).")
@click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where to write the reports (default: reports/ beside cycle.yaml).")
@click.option("--no-reports", is_flag=True, help="Write no report files.")
@click.option("--no-cache", is_flag=True,
              help="Call the models even where the response cache has the answer.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no summary: only the exit code.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
@click.option("--dry-run", is_flag=True, help="Say the calls, tokens and cost expected (a range; "
              "cached calls free), and send nothing.")
@click.option("--eval", "eval_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Run a tool-forge eval file (golden or labeled JSON) as its runner contract says.")
@click.option("--agent-endpoint", metavar="URL", help="[--eval] The agent: POST {message} -> "
              "{response, toolCalls} (default: cycle.yaml's agent).")
@click.option("--seed-manifest", type=click.Path(dir_okay=False, path_type=Path),
              help="[--eval] Seed values for {{seed:*}} tokens (default: evals/seed-manifest.json).")
@click.option("--snapshot", metavar="MODULE:FUNCTION",
              help="[--eval] Captures live values for {{snapshot:*}} tokens before the run.")
@click.option("--tool-registry", type=click.Path(dir_okay=False, path_type=Path),
              help="[--eval] Tools (JSON or YAML: name, description, version) for staleness checks.")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path),
              help="[--eval] Where the EvalSuiteResult files go (default: evals/results/).")
@click.option("--baseline", metavar="RUN_ID", help="[--eval] Diff against this earlier run's "
              "result (regressions, new passes).")
@click.option("--timeout-ms", type=click.IntRange(min=1), help="[--eval] Per-case timeout (default 60000).")
@click.option("--runner-config", type=click.Path(dir_okay=False, path_type=Path),
              help="[--eval] The contract's runner configuration JSON (flags override it).")
def run(
    config: Path, iterations: int | None, concurrency: int | None, timeout: float | None,
    tags: tuple[str, ...], case_ids: tuple[str, ...], stop_on_first_failure: bool | None,
    agent_models: tuple[str, ...], prompt_versions: tuple[str, ...], judge_models: tuple[str, ...],
    budget: float | None, batch: bool | None, resume: str | None,
    report_dir: Path | None, no_reports: bool, no_cache: bool, quiet: bool, as_json: bool,
    dry_run: bool, eval_file: Path | None, agent_endpoint: str | None, seed_manifest: Path | None,
    snapshot: str | None, tool_registry: Path | None, output_dir: Path | None,
    baseline: str | None, timeout_ms: int | None, runner_config: Path | None,
    take_over: bool,
) -> None:
    """Evaluate the prompt of CONFIG (cycle.yaml) on its cases and write reports.

    Every case runs ITERATIONS times; each iteration is judged on the
    criteria. Errors (provider down, judge unparseable, timeouts) are
    counted apart from failures. Results go to the store as they finish, so
    an interrupted run can be resumed with --resume RUN_ID.

    With --eval FILE.json, runs a tool-forge eval file instead: its cases,
    judged on its assertions, against --agent-endpoint (or CONFIG's agent);
    writes its EvalSuiteResult to --output-dir and stores it as a cycle run.
    """
    from cycle.assemble.config import apply_overrides, judge_flag, load_config
    from cycle.cli import load_env

    matrix = len(agent_models) > 1 or bool(prompt_versions)
    agent_model = agent_models[0] if len(agent_models) == 1 else None
    if dry_run and (matrix or resume or eval_file):
        raise click.UsageError("--dry-run estimates a run of cycle.yaml's prompt; it does not go "
                               "with several --agent, --prompt-version, --resume or --eval")
    if take_over and not resume:
        raise click.UsageError("--take-over takes over a run another machine holds: it goes "
                               "with --resume RUN_ID")
    if matrix and (resume or eval_file):
        raise click.UsageError("several --agent or --prompt-version make a matrix, which "
                               f"cannot go with {'--resume' if resume else '--eval'}")
    _refuse_flags_of_the_other_mode(
        eval_file, agent_model=agent_model,
        eval_only={"--agent-endpoint": agent_endpoint, "--seed-manifest": seed_manifest,
                   "--snapshot": snapshot, "--tool-registry": tool_registry,
                   "--output-dir": output_dir, "--baseline": baseline,
                   "--timeout-ms": timeout_ms, "--runner-config": runner_config},
        suite_only={"--judge": judge_models or None, "--timeout": timeout,
                    "--stop-on-first-failure": stop_on_first_failure, "--batch": batch})
    if eval_file is not None:
        sys.exit(_eval_command(
            config, eval_file, agent_model=agent_model, budget=budget, resume=resume,
            report_dir=report_dir, no_cache=no_cache, quiet=quiet, as_json=as_json,
            runner_config=runner_config, endpoint=agent_endpoint, seed_manifest=seed_manifest,
            snapshot=snapshot, tool_registry=tool_registry, output_dir=output_dir,
            baseline=baseline, concurrency=concurrency, timeout_ms=timeout_ms,
            iterations=iterations, tags=tags, case_ids=case_ids))

    given = {k: v for k, v in {
        "agent": agent_model, "judge": judge_flag(judge_models), "iterations": iterations,
        "concurrency": concurrency, "timeout": timeout,
        "stop_on_first_failure": stop_on_first_failure, "budget": budget,
        "batch": batch}.items() if v is not None}
    if resume:  # a resumed run runs with the flags it started with
        stored = _stored_overrides(config, resume)
        if stored is not None:
            from cycle.assemble.config import resumed_overrides

            given = resumed_overrides(stored, given)
    loaded, changes = apply_overrides(load_config(config), **given)
    load_env(loaded.base_dir)
    say_overrides(changes, quiet or as_json, resumed=resume is not None)
    if dry_run:
        _dry_run(loaded, tags=tags, case_ids=case_ids, no_cache=no_cache, as_json=as_json)
        return
    if matrix:
        from cycle.cli.matrix import run_matrix_command

        sys.exit(run_matrix_command(
            loaded, store_path=store_of(loaded), agents=agent_models,
            versions=prompt_versions, tags=tags, case_ids=case_ids, report_dir=report_dir,
            no_reports=no_reports, no_cache=no_cache, quiet=quiet, as_json=as_json))
    started: list[str] = []
    try:
        code = asyncio.run(_run(
            loaded, tags=tags, case_ids=case_ids, resume=resume, report_dir=report_dir,
            no_reports=no_reports, no_cache=no_cache, quiet=quiet, as_json=as_json,
            take_over=take_over, started=started,
        ))
    except KeyboardInterrupt:
        # click would say only "Aborted.": what finished is stored, and the run resumes
        if not started:
            raise
        click.echo(f"\nInterrupted; the run is saved. Resume with: cycle run {loaded.path} "
                   f"--resume {started[-1]}", err=True)
        raise click.exceptions.Exit(130) from None
    except StoreConnectionLost as e:
        if started:  # the precise command, for the run it was
            e.hint = (f"What finished is stored. Once the server answers, resume with: "
                      f"cycle run {loaded.path} --resume {started[-1]}")
        raise
    sys.exit(code)


def _refuse_flags_of_the_other_mode(eval_file: Path | None, *, agent_model: str | None,
                                   eval_only: dict[str, Any],
                                   suite_only: dict[str, Any]) -> None:
    """A flag of ``--eval`` without it, or one of a suite run with it, is a usage error."""
    if eval_file is None:
        given = [k for k, v in eval_only.items() if v is not None]
        if given:
            raise click.UsageError(f"{given[0]} goes with --eval FILE.json")
        return
    for flag, value in suite_only.items():
        if value:
            raise click.UsageError(f"{flag} does not apply to --eval (use --timeout-ms; "
                                   "the eval file's assertions are the judge)")
    if eval_only["--agent-endpoint"] and agent_model:
        raise click.UsageError("--agent names a model for cycle.yaml's prompt; with "
                               "--agent-endpoint the endpoint is the agent")


def _eval_command(config: Path, eval_file: Path, *, agent_model: str | None,
                  budget: float | None, resume: str | None, report_dir: Path | None,
                  no_cache: bool, quiet: bool, as_json: bool, runner_config: Path | None,
                  **eval_options: Any) -> int:
    """``cycle run --eval FILE.json``: a tool-forge eval file's cases against its agent,
    with cycle.yaml's settings when there is one to read."""
    from cycle.assemble.config import apply_overrides, load_config
    from cycle.cli import load_env

    ctx = click.get_current_context()
    default_config = ctx.get_parameter_source("config") == click.core.ParameterSource.DEFAULT
    loaded_eval = None
    if not (default_config and (eval_options["endpoint"] or not config.exists())):
        loaded_eval, changes = apply_overrides(load_config(config), agent=agent_model)
        load_env(loaded_eval.base_dir)
        say_overrides(changes, quiet or as_json)
    settings = _eval_options(eval_file, runner_config, **eval_options)
    return _run_eval_file(settings, loaded_eval, budget=budget, resume=resume,
                          report_dir=report_dir, no_cache=no_cache, quiet=quiet,
                          as_json=as_json)


def _dry_run(loaded: LoadedConfig, *, tags: tuple[str, ...], case_ids: tuple[str, ...],
             no_cache: bool, as_json: bool) -> None:
    """``cycle run --dry-run``: what the run would cost, with nothing called or created."""
    from cycle.assemble.estimate import estimate_run
    from cycle.assemble.suite import open_cache, validate_suite

    cases = validate_suite(loaded, tags=tags, ids=case_ids, keys=False)
    cache = open_cache(loaded, enabled=not no_cache, create=False)  # a dry run creates nothing
    try:
        with stored_prompt(loaded) as prompt:
            show_estimate(estimate_run(loaded, prompt, cases, cache=cache,
                                       typical=typical_output(loaded)), loaded, cases,
                          as_json=as_json, cap=loaded.config.budget)
    finally:
        if cache is not None:
            cache.close()


def _stored_overrides(config: Path, resume: str) -> dict[str, Any] | None:
    """The command-line settings stored with the run ``--resume`` names; None when there
    is none to read (the run then says what is wrong) or it predates them."""
    from cycle.assemble.config import load_config
    from cycle.errors import NotFoundError
    from cycle.store import Store

    found = Store.open_existing(store_of(load_config(config)))
    if found is None:
        return None
    with found as store:
        try:
            row = store.runs.require(store.runs.resolve(resume))
        except NotFoundError:
            return None
    overrides = (row.config or {}).get("overrides")
    return dict(overrides) if isinstance(overrides, dict) else None


def _say_file_behind_head(loaded: LoadedConfig, store: Store) -> None:
    """Say which version a run evaluates when the store's head is ahead of the prompt
    file (a cycle improved it): the file, as cycle.yaml says; how to evaluate head, and
    how to write it into the file."""
    from cycle.assemble.config import head_ahead_note

    note = head_ahead_note(loaded, store, evaluate_head="--prompt-version head")
    if note is not None:
        click.echo(f"note: {note}", err=True)


@contextlib.contextmanager
def stored_prompt(loaded: LoadedConfig) -> Iterator[Prompt]:
    """The prompt cycle.yaml names, read (a stored one from the store, which must exist);
    nothing is written."""
    from cycle.assemble.config import load_prompt

    if not loaded.prompt_is_stored:
        yield load_prompt(loaded)[0]
        return
    from cycle.store import Store

    with Store.open(store_of(loaded), create=False) as store:
        yield load_prompt(loaded, store)[0]


def typical_output(loaded: LoadedConfig) -> dict[tuple[str, str], float]:
    """What the store's earlier calls answered, on average, by role and model (none
    when there is no store yet: a dry run creates nothing)."""
    from cycle.store import Store

    found = Store.open_existing(store_of(loaded))
    if found is None:
        return {}
    with found as store:
        return store.runs.typical_output()


def show_estimate(estimate: Estimate, loaded: LoadedConfig, cases: Sequence[TestCase], *,
                  as_json: bool, what: str = "run", cap: float | None = None) -> None:
    """A dry run's figures: a table (or JSON), and the hard cap they would meet
    (``cap``: the lowest of --budget / budget and a cycle's max_cost)."""
    if as_json:
        click.echo(json.dumps({**estimate.as_dict(), "cap": cap}, indent=2))
        return
    c = loaded.config
    click.echo(f"dry run: nothing was sent. A {what} of {plural(len(cases), 'case')} x "
               f"{plural(c.run.iterations, 'iteration')} ({c.prompt}) would make:\n")
    click.echo(estimate.table())
    click.echo(f"\nLikely: ${estimate.likely:,.4f} (between ${estimate.cost[0]:,.4f} and "
               f"${estimate.cost[1]:,.4f}).")
    if cap is not None and estimate.cost[1] > cap:
        click.echo(f"The high end passes the hard cap (${cap:g}): the {what} would stop at "
                   "the cap rather than pass it.")


def say_overrides(changes: list[str], quiet: bool, *, resumed: bool = False) -> None:
    """One line per setting a flag changed, on stderr (stdout may be --json); a resume
    says it runs with the flags it started with."""
    if not quiet:
        for change in changes:
            click.echo(f"{'resumed with' if resumed else 'override'} {change}", err=True)


async def _run(loaded: LoadedConfig, *, tags: tuple[str, ...], case_ids: tuple[str, ...],
               resume: str | None, report_dir: Path | None, no_reports: bool, no_cache: bool,
               quiet: bool, as_json: bool, take_over: bool = False,
               started: list[str] | None = None) -> int:
    """Run (or resume) the suite; ``started`` gets the run's id once it has begun."""
    from cycle.assemble.outputs import check_outputs
    from cycle.assemble.suite import build_suite, open_cache, run_budget, validate_suite
    from cycle.events import EventBus, RunStarted
    from cycle.progress import Progress
    from cycle.report import reports_ahead, write_reports
    from cycle.store import Store

    # every input is checked before the store (or the cache) is opened: a bad file
    # leaves nothing behind
    cases = validate_suite(loaded, tags=tags, ids=case_ids)
    formats = chosen_reports(loaded)
    check_outputs(loaded, store=store_of(loaded), cache=not no_cache,
                  reports=None if no_reports else report_dir or loaded.report_dir,
                  reports_flag=report_dir is not None)
    store = Store.open(store_of(loaded))
    cache = None
    # the reports are written as the results are stored: the run waits on its model
    # most of the time, and at its end only their heads are left (cycle.report.ahead)
    ahead = None if no_reports else reports_ahead(report_dir or loaded.report_dir, formats)
    try:
        if resume:
            resume = store.runs.resolve(resume)
            if not loaded.config.run.batch and store.batches.jobs(resume):
                # its jobs were paid for: their answers are read, not asked for again live
                from cycle.assemble.config import apply_overrides

                loaded, _ = apply_overrides(loaded, batch=True)
                if not quiet and not as_json:
                    click.echo(f"run {resume} sent batch jobs: resumed in batch mode", err=True)
        if not quiet and not as_json:
            _say_file_behind_head(loaded, store)
        cache = open_cache(loaded, enabled=not no_cache)
        bus = EventBus()
        if started is not None:
            bus.subscribe(lambda e: started.append(e.run_id) if isinstance(e, RunStarted) else None)
        budget = run_budget(loaded)
        if resume and budget is not None:  # what it spent before counts against the same cap
            for role, cost in store.runs.paid(resume).items():
                budget.add(cost, role)
        suite = build_suite(loaded, store=store, bus=bus, cache=cache, cases=cases,
                            budget=budget)
        try:
            meta = suite.meta()
            if resume:  # it goes on with what it started with, or not at all
                row = store.runs.require(resume)
                _same_version(row, suite.prompt.id if suite.prompt else None, suite.version,
                              loaded)
                _same_judging(row, meta["config"], loaded)
                _same_cases(store, row, suite.cases, loaded)
            runner = suite.runner(store=store, bus=bus)
            if not quiet and not as_json:
                bus.subscribe(Progress(offline=runner.offline))
            heap.settle()
            result = await runner.run(run_id=resume, meta=meta, take_over=take_over,
                                      ahead=ahead)
        finally:
            await suite.aclose()
        # the reports read the results from the store, a case at a time
        result = with_judge_note(result, store)
        paths: dict[str, Path] = {}
        if not no_reports:
            paths = write_reports(result, report_dir or loaded.report_dir, formats, ahead=ahead)
        _show_run(result, paths, quiet=quiet, as_json=as_json)
    finally:
        if ahead is not None:
            ahead.close()
        store.close()
        if cache is not None:
            cache.close()
    return result.exit_code


def _same_version(row: RunRow, prompt_id: str | None, version: str | None,
                  loaded: LoadedConfig) -> None:
    """A run resumes on the prompt version it started with: the prompt file edited in
    between went on with the new version, and the run mixed the two (reported as the new
    one)."""
    from cycle.assemble.config import STORE_PREFIX
    from cycle.errors import ConfigError

    if row.version is None or (row.prompt_id, row.version) == (prompt_id, version):
        return
    prompt = loaded.config.prompt
    back = (f"set prompt: {STORE_PREFIX}{row.prompt_id}@{row.version} in {loaded.path}"
            if prompt.startswith(STORE_PREFIX) else
            f"cycle prompt export {row.prompt_id}@{row.version} --write {prompt}")
    raise ConfigError(
        f"run {row.id} was started on {row.prompt_id}@{row.version}, but {prompt} now gives "
        f"{prompt_id}@{version}: resuming it would mix two versions in one run",
        field="--resume",
        hint=f"Put {row.version} back ({back}) and resume, or start a new run of {version}.")


def _same_judging(row: RunRow, config: dict[str, Any], loaded: LoadedConfig) -> None:
    """A run resumes judged as it started: criteria or a pass_threshold edited in between
    judged its first iterations one way and the rest another (a case failing at a score
    that passes the next)."""
    from cycle.errors import ConfigError

    stored = row.config or {}
    changed = [key for key in ("criteria", "pass_threshold")
               if key in stored and not _as_stored(stored[key], config.get(key))]
    if changed:
        raise ConfigError(
            f"run {row.id} was judged with other {' and '.join(changed)} than {loaded.path} "
            "gives now: resuming it would judge its cases two ways", field="--resume",
            hint=f"Put {' and '.join(changed)} back as before and resume, or start a new run.")


def _same_cases(store: Store, row: RunRow, cases: CaseList, loaded: LoadedConfig) -> None:
    """A run resumes on the cases it started with: a case whose input or expected output
    was edited in between had its first iterations of the old case and the rest of the new
    (one figure of two cases)."""
    import json

    from cycle.errors import ConfigError

    expected = {k: v.get("expected") for k, v in
                ((row.config or {}).get("case_info") or {}).items()}
    at = {case_id: i for i, case_id in enumerate(cases.ids)}  # unpacked one at a time
    for case_id, stored in store.runs.judged_inputs(row.id):
        if case_id not in at:
            continue  # left out of this resume (--case, --tag): nothing of it is run
        case = cases[at[case_id]]
        now = json.loads(json.dumps(case.input, ensure_ascii=False, default=str))
        was = json.loads(stored) if stored else None
        edited = ("input" if was is not None and was != now else
                  "expected" if case_id in expected and expected[case_id] != case.expected
                  else None)
        if edited:
            raise ConfigError(
                f"case '{case_id}' of run {row.id} has another {edited} than when the run "
                "judged it: resuming would put two versions of the case in one run",
                field="--resume", hint=f"Put case '{case_id}' back as it was and resume, or "
                f"start a new run ({loaded.path}).")


def _as_stored(stored: Any, now: Any) -> bool:
    """``now`` says what ``stored`` said; a key ``stored`` lacks (a setting a later release
    added, at its default) is not a change."""
    if isinstance(stored, dict) and isinstance(now, dict):
        return all(_as_stored(v, now.get(k)) for k, v in stored.items())
    if isinstance(stored, list) and isinstance(now, list):
        return len(stored) == len(now) and all(map(_as_stored, stored, now))
    return bool(stored == now)


def with_judge_note(result: RunResult, store: Store) -> RunResult:
    """The run with its judge's agreement with people (or that it has none) and, judged by
    a panel, its members' agreement with each other and with people, for its console and
    reports."""
    from msgspec.structs import replace

    from cycle.judge.calibration import judge_line
    from cycle.judge.panel import panel_figures

    return replace(result, judge_note=judge_line(store, result),
                   panel=panel_figures(store, result))


def _show_run(result: RunResult, paths: dict[str, Path], *, quiet: bool, as_json: bool) -> None:
    from cycle.report import render_console

    judge = result.judge_note
    if as_json:
        click.echo(json.dumps({
            "run_id": result.run_id, "status": result.status, "exit_code": result.exit_code,
            "offline": result.offline, "prompt": result.prompt_id, "version": result.version,
            "summary": result.summary(), "reports": {k: str(v) for k, v in paths.items()},
            "judge": judge,
            "cases": [{"id": c.case_id, "status": c.status, "mean": c.stats.mean,
                       "ci_low": c.stats.ci_low, "ci_high": c.stats.ci_high,
                       "pass_rate": c.pass_rate, "errors": c.errors}
                      for c in result.cases.values()],
        }, indent=2, default=str))
    elif not quiet:
        click.echo(render_console(result, color=sys.stdout.isatty()))
        if judge:
            click.echo(judge)
        for kind, p in paths.items():
            click.echo(f"{kind + ' report':16} {p}")


def _eval_options(eval_file: Path, runner_config: Path | None, **flags: object) -> EvalOptions:
    """The eval run's settings: the runner configuration file, then the flags given."""
    from cycle.assemble.evalfile import EvalOptions
    from cycle.assemble.evalfile import runner_config as read_runner_config

    values: dict[str, object] = read_runner_config(runner_config) if runner_config else {}
    values.update({k: v for k, v in flags.items() if v not in (None, ())})
    return EvalOptions(eval_file=eval_file, **values)  # type: ignore[arg-type]


def _run_eval_file(settings: EvalOptions, loaded: LoadedConfig | None, *,
                   budget: float | None, resume: str | None, report_dir: Path | None,
                   no_cache: bool, quiet: bool, as_json: bool) -> int:
    from cycle import aio
    from cycle.assemble.evalfile import as_json as result_json
    from cycle.assemble.evalfile import exit_code, prepare, run_eval
    from cycle.assemble.outputs import check_outputs
    from cycle.assemble.suite import open_cache
    from cycle.events import EventBus
    from cycle.formats.toolforge import render_summary
    from cycle.llm.budget import Budget
    from cycle.progress import Progress
    from cycle.report import write_reports
    from cycle.store import Store

    prepared = prepare(settings, loaded)
    check_outputs(loaded, store=store_of(loaded),
                  cache=not no_cache and settings.endpoint is None,
                  reports=report_dir, reports_flag=True)
    if not (quiet or as_json):
        for warning in prepared.warnings:
            click.echo(f"warning: {warning}", err=True)
    store = Store.open(store_of(loaded))
    cache = None
    try:
        if resume:
            resume = store.runs.resolve(resume)
        if loaded is not None and settings.endpoint is None:
            cache = open_cache(loaded, enabled=not no_cache)
        limit = budget if budget is not None else (loaded.config.budget if loaded else None)
        cap = Budget(limit) if limit is not None else None
        if resume and cap is not None:  # what it spent before counts against the same cap
            for role, cost in store.runs.paid(resume).items():
                cap.add(cost, role)
        bus = EventBus()
        if not (quiet or as_json):
            bus.subscribe(Progress(offline=False))
        heap.settle()
        outcome = aio.run(run_eval(prepared, store=store, bus=bus, cache=cache, resume=resume,
                                   budget=cap))
        paths = write_reports(outcome.run, report_dir) if report_dir else {}
    finally:
        store.close()
        if cache is not None:
            cache.close()
    if as_json:
        click.echo(result_json(outcome))
    elif not quiet:
        click.echo(render_summary(outcome.result))
        click.echo(f"{'result':16} {outcome.path}")
        for kind, p in paths.items():
            click.echo(f"{kind + ' report':16} {p}")
    return exit_code(outcome)


@click.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option("--config", "config", type=click.Path(exists=True, path_type=Path),
              help="A cycle.yaml whose store to use (default: --store, $CYCLE_STORE, ./.cycle).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--markdown", "markdown", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Write the comparison as Markdown (a pull request comment).")
@click.option("--fail-on", type=click.Choice(["regression", "case", "never"]), default="never",
              show_default=True, help="Exit 1 on a credible score regression (its 95%% CI "
              "below zero), on that or any case turning from pass to fail, or never; exit 3 "
              "when the gate cannot check (nothing paired, a run errored or unfinished).")
def compare(run_a: str, run_b: str, config: Path | None, as_json: bool, markdown: Path | None,
            fail_on: str) -> None:
    """Compare two stored runs, paired by case: RUN_B against RUN_A (the baseline).

    A run is its id (`cycle runs` lists them), a unique prefix or suffix of
    one, `@last` or `@prev`: `cycle compare @prev @last`.

    Shows the score and pass-rate deltas with 95% intervals, the cases that
    regressed and those that newly pass. As a CI gate: `--markdown FILE` writes the
    summary for a pull request comment, `--fail-on regression` exits 1 on a credible drop
    and 3 when it cannot check (nothing paired, cases errored, a run not finished).
    """
    from cycle.evals.results import load_run
    from cycle.report import write_files
    from cycle.report.compare import (
        compare_runs,
        failing,
        render_compare,
        render_compare_json,
        render_compare_markdown,
    )
    from cycle.store import Store

    base = None
    if config is not None:
        base = (config if config.is_dir() else config.parent)
    from cycle.store.masking import MaskedRunLog

    store = Store.open(store_of(base), create=False)
    try:
        a, b = store.runs.resolve(run_a), store.runs.resolve(run_b)
        log = MaskedRunLog(store)  # an older store may hold keys raw (cycle.store.masking)
        comparison = compare_runs(load_run(log, a), load_run(log, b))
    finally:
        store.close()
    click.echo(render_compare_json(comparison) if as_json else render_compare(comparison))
    if markdown is not None:
        text = render_compare_markdown(comparison, fail_on)
        write_files(markdown.parent, {markdown: lambda: [text]}, what="comparison summary",
                    again=f"cycle compare {run_a} {run_b} --markdown {markdown}")
        if not as_json:
            click.echo(f"markdown summary  {markdown}")
    gate = failing(comparison, fail_on)
    if gate is not None:
        click.echo(f"gate: {gate}", err=True)
        raise SystemExit(gate.exit_code)


def chosen_reports(loaded: LoadedConfig) -> list[str]:
    """The config's ``reports.formats``, checked: an unknown one is refused (naming the
    file and line) before anything runs."""
    from cycle.report import report_formats

    return report_formats(loaded.report_formats, file=str(loaded.path),
                          line=loaded.doc.line_of(("reports", "formats")))
