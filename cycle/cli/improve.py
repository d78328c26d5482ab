"""``cycle improve``: run (or resume) the improvement cycle of a cycle.yaml.

Without ``--headless`` the TUI runs it and a person reviews each round's
suggestions. ``--headless --yes`` approves them automatically (CI, ``make
demo``); ``--headless --review prompt`` asks in the terminal. Ctrl-C (or a
kill) leaves the cycle resumable: ``cycle improve cycle.yaml --resume``.

Exit codes: 0 the cycle ended on a stop condition, 2 usage or input error,
3 a model or judge error stopped it (resumable), 130 interrupted (resumable).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click

from cycle import aio, heap
from cycle import events as ev
from cycle.authors import LOOP
from cycle.cli import FiniteFloat, store_flag, store_of
from cycle.errors import CycleError, StoreConnectionLost
from cycle.words import plural

if TYPE_CHECKING:  # the commands import what they need when they run (start-up stays light)
    from collections.abc import Callable, Sequence

    from cycle.assemble import ImproveConfig, LoadedConfig
    from cycle.cases import TestCase
    from cycle.llm.cache import ResponseCache
    from cycle.loop import CycleResult, Loop
    from cycle.loop.review import Reviewer
    from cycle.store import Store

    #: builds a cycle's Loop in the process that runs it (the TUI's child, or this one)
    LoopMaker = Callable[[Store, ev.EventBus, Reviewer, ResponseCache | None], Loop]


class CycleConsole:
    """Prints the cycle's progress, one line per step, from its events."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        #: calls of the round in progress that the response cache answered (free, no latency)
        self.cached = 0
        self.calls = 0
        #: improve.margin of a cycle whose objective is cost (None: the objective is score)
        self.margin: float | None = None

    def _say(self, text: str) -> None:
        click.echo(text, file=self.stream)

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.ModelCalled):
            self.calls += 1
            self.cached += event.cache_hit
        elif isinstance(event, ev.CycleStarted):
            verb = "resuming" if event.resumed else "starting"
            self._say(f"{verb} cycle {event.cycle_id} on {event.prompt_id}@{event.version}")
            improve = event.config.get("improve") or {}
            if isinstance(improve, dict) and improve.get("objective") == "cost":
                self.margin = float(improve.get("margin") or 0.0)
                self._say(f"  objective: cost: the cheapest version not worse by more than "
                          f"{self.margin:g} points")
            if event.judge_note:
                self._say(f"  {event.judge_note}")
        elif isinstance(event, ev.RoundStarted):
            what = {"baseline": "evaluating the baseline",
                    "confirm": f"confirming the best candidate against {event.version} on fresh "
                               "samples (head moves only if it holds)"}.get(event.stage,
                                                                        f"improving {event.version}")
            self._say(f"round {event.round}: {what}")
        elif isinstance(event, ev.SuggestionsProposed):
            of = (f"candidate {event.slot + 1} (from {event.parent}): " if event.parent else "")
            self._say(f"  {of}{plural(len(event.suggestions), 'suggestion')} proposed")
        elif isinstance(event, ev.ReviewDecided):
            self._say(f"  review ({event.reviewer}): {event.approved} approved, {event.edited} edited, "
                      f"{event.rejected} rejected, {event.skipped} skipped")
            for s in event.suggestions:
                source = (f" (from case {s['source_case']})"
                          if s.get("type") == "example" and s.get("source_case") else "")
                if s.get("decision") == "skipped":
                    self._say(f"    skipped {s.get('type')}{source}: {s.get('reason')}")
                elif s.get("decision") == "rejected" and str(s.get("decided_by") or "").startswith(
                        f"{LOOP} ("):  # the cycle's guard refused it before review
                    self._say(f"    refused {s.get('type')}{source}: {s.get('reason')}")
        elif isinstance(event, ev.VersionCreated) and event.cycle_id:
            self._say(f"  candidate {event.version} (from {event.parent})")
        elif isinstance(event, ev.CandidateScreened):
            gain = "no case judged" if event.gain is None else f"{event.gain:+.1f}"
            verdict = "goes on to the full evaluation" if event.kept else "ends here"
            self._say(f"  screen: {event.version} (from {event.parent}) on "
                      f"{plural(event.cases, 'case')}: {gain} over its parent; {verdict}")
        elif isinstance(event, ev.CandidateDecided):
            self._say(f"  {event.reason}")
        elif isinstance(event, ev.RoundFinished):
            score = "—" if event.score is None else f"{event.score:.1f}"
            ci = (f" [{event.ci_low:.1f}, {event.ci_high:.1f}]"
                  if event.ci_low is not None and event.ci_high is not None else "")
            delta = "" if event.delta is None else f", delta {event.delta:+.1f}"
            cached = ""
            if self.cached:
                every = "every call" if self.cached == self.calls else plural(self.cached, "call")
                cached = f" ({every} answered by the response cache: free; --no-cache to call again)"
            judge = (f"; judge {event.judge_agreement.text()}" if event.judge_agreement
                     else "")
            self._say(f"round {event.round} done: {event.version} scored {score}{ci}{delta}, "
                      f"cost ${event.cost:.4f}{cached}{judge}")
            self.cached = self.calls = 0
            if event.detectable is not None and self.margin is not None:
                # the same figure: the loss a comparison of this suite rules out 80% of
                # the time is what a non-inferiority margin must allow for
                short = (f"at {self.margin:g}, a cheaper version as good will often not be "
                         "shown within it; more cases or iterations narrow it"
                         if event.detectable > self.margin else "")
                self._say(f"  with {plural(event.cases or 0, 'case')} x "
                          f"{plural(event.iterations or 0, 'iteration')}, a cheaper version as "
                          f"good is shown within the margin 80% of the time when the margin is "
                          f"at least {event.detectable:.1f} points" + (f"; {short}" if short else ""))
            elif event.detectable is not None:
                self._say(f"  with {plural(event.cases or 0, 'case')} x "
                          f"{plural(event.iterations or 0, 'iteration')}, gains under "
                          f"{event.detectable:.1f} points will often go undetected "
                          "(80% power at 95%); more cases or iterations find smaller ones")
        elif isinstance(event, ev.CycleFinished):
            self._say(f"cycle {event.status}: {event.reason}")


def _choose_review(headless: bool, yes: bool, review: str | None, configured: str | None) -> str:
    if yes:
        if review not in (None, "auto"):
            raise click.UsageError(f"--yes approves everything; it cannot go with --review {review}")
        return "auto"
    choice = review or configured or ("prompt" if headless else "tui")
    if headless and choice == "tui":
        raise click.UsageError("--review tui needs the TUI: drop --headless (or use --review prompt / --yes)")
    if not headless and choice == "prompt":
        raise click.UsageError("--review prompt asks in the terminal: add --headless")
    # an explicit --review prompt may be fed answers through a pipe; the default may not
    if choice == "prompt" and review is None and not sys.stdin.isatty():
        raise click.UsageError(
            "no terminal to ask for reviews on: pass --yes to approve automatically "
            "(or set improve.review: auto in cycle.yaml)"
        )
    return choice


def event_bus(events_file: Path | None) -> tuple[ev.EventBus, ev.JsonlSink | None]:
    """A cycle's event bus, and the sink writing its events to ``events_file`` (--events)."""
    bus = ev.EventBus()
    sink = ev.JsonlSink(events_file) if events_file else None
    if sink is not None:
        bus.subscribe(sink)
    return bus, sink


def cycle_options(resumes: str) -> Callable[[Any], Any]:
    """The options of a command that runs a cycle as ``cycle improve`` does (who reviews,
    resume, events, the report, the cache, quiet); ``resumes``: what a bare --resume
    resumes the latest interrupted cycle of."""
    options = (
        click.option("--headless", is_flag=True, help="No TUI: progress lines on the terminal."),
        click.option("-y", "--yes", is_flag=True,
                     help="Approve every suggestion automatically (auto review)."),
        click.option("--review", type=click.Choice(["auto", "prompt", "tui"]), default=None,
                     help="Who reviews suggestions (default: improve.review, else the TUI; "
                     "prompt with --headless)."),
        click.option("--min-priority", type=click.Choice(["high", "medium", "low"]),
                     default=None, help="Auto review approves this priority and above "
                     "(default: improve.min_priority, low)."),
        click.option("--resume", "resume", is_flag=False, flag_value="", default=None,
                     metavar="[CYCLE_ID]", help="Resume CYCLE_ID, or without a value the latest "
                     f"interrupted cycle of {resumes}."),
        click.option("--events", "events_file", type=click.Path(dir_okay=False, path_type=Path),
                     help="Also write every event as a JSON line to this file."),
        click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path),
                     help="Where to write the cycle report (default: reports/ beside cycle.yaml)."),
        click.option("--no-cache", is_flag=True,
                     help="Call the models even where the response cache has the answer."),
        click.option("-q", "--quiet", is_flag=True,
                     help="Headless: no progress lines, only the summary."),
    )

    def wrap(command: Any) -> Any:
        for option in reversed(options):
            command = option(command)
        return command
    return wrap


@click.command()
@click.argument("config", type=click.Path(path_type=Path), default="cycle.yaml")
@cycle_options("this prompt")
@click.option("--take-over", is_flag=True,
              help="With --resume: take over a cycle another machine's process holds (it is gone).")
@click.option("--dry-run", is_flag=True, help="Say the calls, tokens and cost a cycle may take "
              "(a range), and send nothing.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: the estimate as JSON.")
@click.option("--agent", "agent_model", help="Agent model, overriding cycle.yaml.")
@click.option("--judge", "judge_models", multiple=True, metavar="MODEL",
              help="Judge model, overriding cycle.yaml; repeat it for a judge panel.")
@click.option("--improver", "improver_model", help="Improver model, overriding cycle.yaml.")
@click.option("--budget", type=FiniteFloat(min=0),
              help="Hard cap in USD on the cycle's calls (with improve.stop's max_cost, the lower).")
@click.option("-n", "--iterations", type=click.IntRange(min=1), help="Runs per case (default: config, 3).")
@click.option("-c", "--concurrency", type=click.IntRange(min=1), help="Cases in flight (default: config, 8).")
def improve(config: Path, headless: bool, yes: bool, review: str | None, min_priority: str | None,
            resume: str | None, events_file: Path | None, report_dir: Path | None,
            no_cache: bool, quiet: bool, dry_run: bool, as_json: bool, agent_model: str | None, judge_models: tuple[str, ...],
            improver_model: str | None, budget: float | None, iterations: int | None,
            concurrency: int | None, take_over: bool) -> None:
    """Improve the prompt of CONFIG (cycle.yaml) round by round.

    Round 0 evaluates the prompt's head version. Each round the improver
    proposes edits from the low-scoring cases, the reviewer decides, the
    approved edits make a candidate version, and the candidate replaces head
    only if the acceptance rule (improve.acceptance) says it is better. The
    cycle stops on improve.stop (default: 5 rounds). A report goes to reports/.
    """
    from cycle.assemble.config import apply_overrides, judge_flag, load_config
    from cycle.assemble.improve import load_improve_config
    from cycle.cli import load_env
    from cycle.cli.run import say_overrides

    if take_over and resume is None:
        raise click.UsageError("--take-over takes over a cycle another machine holds: it goes "
                               "with --resume [CYCLE_ID]")
    given = {k: v for k, v in {"agent": agent_model, "judge": judge_flag(judge_models),
                               "improver": improver_model, "budget": budget,
                               "iterations": iterations, "concurrency": concurrency}.items()
             if v is not None}
    if resume is not None:  # a resumed cycle runs with the flags it started with
        stored = _stored_overrides(config, resume)
        if stored is not None:
            from cycle.assemble.config import resumed_overrides

            given = resumed_overrides(stored, given)
    loaded, changes = apply_overrides(load_config(config), **given)
    load_env(loaded.base_dir)
    improve_cfg = load_improve_config(loaded)
    choice = _choose_review(headless, yes, review, improve_cfg.review)
    from cycle.assemble import prepare

    # before the store is opened: bad input leaves nothing (a dry run asks for no key)
    cases = prepare(loaded, improve_cfg, keys=not dry_run)
    say_overrides(changes, quiet=as_json, resumed=resume is not None)
    if dry_run:
        _dry_run(loaded, improve_cfg, cases, as_json=as_json)
        return
    if as_json:
        raise click.UsageError("--json goes with --dry-run (a cycle's results are in its "
                               "JSON report)")
    if not headless and not (sys.stdin.isatty() and sys.__stdout__.isatty()):
        # the TUI would write its screens into a pipe and wait for keys that never come
        raise click.UsageError(
            "no terminal for the TUI: run headless, approving automatically (--headless "
            "--yes) or asking on standard input (--headless --review prompt)")
    priority = min_priority or improve_cfg.min_priority
    store_path = store_of(loaded)
    from cycle.assemble.outputs import check_outputs
    from cycle.cli.run import chosen_reports

    chosen_reports(loaded)  # an unknown one is refused before any call
    check_outputs(loaded, store=store_path, cache=not no_cache, events=events_file,
                  reports=report_dir or loaded.report_dir, reports_flag=report_dir is not None)
    resume_arg: str | bool | None = None if resume is None else (resume or True)

    bus, sink = event_bus(events_file)
    from cycle.assemble import build_loop

    def make(store: Store, cycle_bus: ev.EventBus, reviewer: Reviewer,
             cache: ResponseCache | None) -> Loop:
        return build_loop(loaded, store=store, bus=cycle_bus, reviewer=reviewer,
                          improve=improve_cfg, cache=cache, cases=cases)

    c = loaded.config
    from cycle.judge.panel import panel_name

    try:
        outcome = run_cycle(
            make, loaded=loaded, bus=bus, store_path=store_path, choice=choice,
            priority=priority, resume=resume_arg, headless=headless, quiet=quiet,
            use_cache=not no_cache, take_over=take_over, again=f"cycle improve {loaded.path}",
            prompt_id=c.prompt, models={k: v for k, v in (
                ("agent", c.agent_config.model),
                ("judge", panel_name(c.judges) if c.judges else None), ("improver", c.improver))
                if v})
    finally:
        if sink is not None:
            sink.close()
            if sink.failed:
                click.echo(f"warning: {sink.failed}", err=True)
    _report(outcome, store_path, report_dir or loaded.report_dir, config, loaded)


def _dry_run(loaded: LoadedConfig, improve_cfg: ImproveConfig, cases: Sequence[TestCase], *,
             as_json: bool) -> None:
    """``cycle improve --dry-run``: what the cycle would cost, with nothing called."""
    from cycle.assemble.estimate import estimate_cycle
    from cycle.cli.run import show_estimate, stored_prompt, typical_output
    from cycle.loop.stop import cost_cap

    stop = improve_cfg.stop_condition(str(loaded.base_dir))
    with stored_prompt(loaded) as prompt:
        estimate = estimate_cycle(loaded, prompt, cases, improve_cfg, stop,
                                  typical=typical_output(loaded))
    caps = [x for x in (cost_cap(stop), loaded.config.budget) if x is not None]
    show_estimate(estimate, loaded, cases, as_json=as_json, what="cycle",
                  cap=min(caps) if caps else None)


def _stored_overrides(config: Path, resume: str) -> dict[str, Any] | None:
    """The command-line settings stored with the cycle ``--resume`` names (or the latest
    resumable one of the config's prompt); None when there is none to read (the loop then
    says what is wrong) or it was stored before they were kept."""
    from cycle.assemble.config import STORE_PREFIX, load_config
    from cycle.errors import NotFoundError
    from cycle.prompts.files import load_prompt_file
    from cycle.store import Store

    loaded = load_config(config)
    found = Store.open_existing(store_of(loaded))
    if found is None:
        return None
    ref = loaded.config.prompt
    with found as store:
        try:
            if resume:
                row = store.cycles.get(store.cycles.resolve(resume))
            else:
                prompt_id = (ref[len(STORE_PREFIX):].split("@")[0] if ref.startswith(STORE_PREFIX)
                             else load_prompt_file(loaded.resolve_path(ref)).prompt.id)
                row = store.cycles.latest_resumable(prompt_id)
        except NotFoundError:
            return None
    if row is None or "overrides" not in (row.config or {}):
        return None
    return dict(row.config["overrides"])


def _reviewer(choice: str, priority: str) -> Reviewer:
    from cycle.loop.review import AutoReviewer, PromptReviewer

    return AutoReviewer(min_priority=priority) if choice == "auto" else PromptReviewer()  # type: ignore[arg-type]


def run_cycle(make: LoopMaker, *,
              loaded: LoadedConfig, bus: ev.EventBus, store_path: Path, choice: str,
              priority: str, resume: str | bool | None, headless: bool, quiet: bool,
              use_cache: bool, take_over: bool, again: str, prompt_id: str,
              models: dict[str, str]) -> CycleResult:
    """Run the cycle ``make`` builds: headless with console progress, or under the TUI (a
    person reviews when ``choice`` is tui). ``again``: the command that resumes it;
    ``prompt_id`` and ``models``: what the TUI's header names."""
    if headless:
        return _run_headless(make, loaded, bus, store_path, choice, priority, resume, quiet,
                             use_cache=use_cache, take_over=take_over, again=again)
    return _run_tui(make, loaded, bus, store_path, choice, priority, resume,
                    use_cache=use_cache, take_over=take_over, again=again,
                    prompt_id=prompt_id, models=models)


def _run_headless(make: LoopMaker,
                  loaded: LoadedConfig, bus: ev.EventBus, store_path: Path, choice: str,
                  priority: str, resume: str | bool | None, quiet: bool, *, use_cache: bool,
                  take_over: bool, again: str) -> CycleResult:
    from cycle.assemble.suite import open_cache
    from cycle.progress import Progress
    from cycle.store import Store

    if not quiet:
        bus.subscribe(CycleConsole())
        if sys.stderr.isatty():  # in a log, the round lines are progress enough
            bus.subscribe(Progress())
    started: list[str] = []
    bus.subscribe(lambda e: started.append(e.cycle_id) if isinstance(e, ev.CycleStarted) else None)
    store = Store.open(store_path)
    cache = open_cache(loaded, enabled=use_cache)
    try:
        loop = make(store, bus, _reviewer(choice, priority), cache)
        heap.settle()
        return aio.run(loop.run(resume=resume, take_over=take_over))
    except KeyboardInterrupt:
        hint = f" --resume {started[-1]}" if started else " --resume"
        click.echo(f"\nInterrupted; the cycle is saved. Resume with: {again}{hint}", err=True)
        raise click.exceptions.Exit(130) from None
    except StoreConnectionLost as e:
        hint = f" --resume {started[-1]}" if started else " --resume"
        e.hint = f"What finished is stored. Once the server answers, resume with: {again}{hint}"
        raise
    finally:
        store.close()
        if cache is not None:
            cache.close()


def _run_tui(make: LoopMaker,
             loaded: LoadedConfig, bus: ev.EventBus, store_path: Path, choice: str,
             priority: str, resume: str | bool | None, *, use_cache: bool, take_over: bool,
             again: str, prompt_id: str, models: dict[str, str]) -> CycleResult:
    try:
        from cycle.tui.app import run_cycle_app
        from cycle.tui.widgets.header import HeaderInfo
    except ImportError as e:
        raise CycleError(
            f"the TUI is not available in this installation ({e})",
            hint=f"Run headless instead: {again} --headless --yes",
        ) from e
    from cycle.assemble.suite import open_cache
    from cycle.store import Store
    from cycle.store.store import shown_target

    info = HeaderInfo(prompt_id=prompt_id, models=models,
                      offline=any(str(m).split(":")[0] in ("offline", "scripted") for m in models.values()),
                      store=shown_target(store_path))

    async def cycle(cycle_bus: ev.EventBus, tui_reviewer: Reviewer) -> CycleResult:
        store = Store.open(store_path)  # in the cycle's own process (cycle.tui.process)
        cache = open_cache(loaded, enabled=use_cache)
        try:
            reviewer = tui_reviewer if choice == "tui" else _reviewer(choice, priority)
            return await make(store, cycle_bus, reviewer, cache).run(resume=resume,
                                                                     take_over=take_over)
        finally:
            store.close()
            if cache is not None:
                cache.close()

    heap.settle()  # the cycle's child is forked with the same collector settings
    outcome = run_cycle_app(cycle, store_path=store_path, info=info, bus=bus)
    if outcome.status == "failed" and outcome.error is not None:
        raise outcome.error
    if outcome.status != "finished":
        click.echo(f"Interrupted; the cycle is saved. Resume with: {again} --resume", err=True)
        raise click.exceptions.Exit(130)
    return outcome.result


def _report(result: CycleResult, store_path: Path, report_dir: Path, config: Path,
            loaded: LoadedConfig) -> None:
    from cycle.assemble.config import file_behind_head
    from cycle.store import Store

    report_cycle(result, store_path, report_dir, loaded.report_formats)
    with Store.open(store_path) as store:
        behind = file_behind_head(loaded, store)
        final = store.get_version(result.prompt_id, result.final_version).prompt
    from cycle.safetext import printable

    moved_to = printable(str(final.params.get("model") or ""), oneline=True)
    named = printable(loaded.config.agent_config.model or "", oneline=True)
    if named and moved_to and moved_to != named:
        # the cycle ran the version on its own model; outside it, cycle.yaml's agent wins
        click.echo(f"{result.final_version} runs on {moved_to} (its params.model); cycle.yaml's "
                   f"agent names {named}, which cycle run and pytest use: set agent: {moved_to} "
                   "(or remove agent: so the prompt's params.model decides)")
    if behind is not None:  # the improved prompt back into the user's file (and git)
        click.echo(f"{_shown_path(loaded, behind[0])} still holds {behind[2]}; cycle run and "
                   f"pytest evaluate the file. Put {behind[3]} in it, comments kept:\n"
                   f"  cycle prompt export {result.prompt_id} --write "
                   f"{_shown_path(loaded, behind[0])}{store_flag(store_path)}")


def report_cycle(result: CycleResult, store_path: Path, report_dir: Path,
                 formats: Sequence[str] | None) -> None:
    """Write the cycle's report and say how it ended: rounds, versions and scores, cost,
    where the report is, and how to undo a head move."""
    from cycle.records import HEAD
    from cycle.report.cycle_report import (
        console_lines,
        cycle_report_dict,
        round_lines,
        write_cycle_report,
    )
    from cycle.store import Store

    with Store.open(store_path) as store:
        data = cycle_report_dict(store, result.cycle_id)
        paths = write_cycle_report(store, result.cycle_id, report_dir, formats, data=data)
        tree = console_lines(data)
        head = store.labels(result.prompt_id).get(HEAD)
    initial = "—" if result.initial_score is None else f"{result.initial_score:.1f}"
    final = "—" if result.final_score is None else f"{result.final_score:.1f}"
    by_role = ", ".join(f"{k} ${v:.4f}" for k, v in sorted(result.cost_by_role.items()))
    click.echo("")
    click.echo(f"cycle {result.cycle_id}: {plural(result.improvement_rounds, 'round')}, stopped: {result.stop_reason}")
    click.echo(f"{result.prompt_id}: {result.initial_version} ({initial}) -> {result.final_version} ({final})"
               + ("  [offline model]" if result.offline else ""))
    click.echo(f"total cost ${result.total_cost:.4f}" + (f" ({by_role})" if by_role else ""))
    for line in round_lines(data):
        click.echo(line)
    for line in tree:
        click.echo(line)
    for n, path in enumerate(paths.values()):
        click.echo(f"{'report:' if n == 0 else '':8}{path}")
    # only while head is still where the cycle left it (the TUI may have rolled it back)
    before = result.head_before or result.initial_version
    if result.final_version not in (result.initial_version, before) and \
            head == result.final_version:
        click.echo(f"undo with: cycle rollback {result.prompt_id} --to {before}"
                   f"{store_flag(store_path)}")


def _shown_path(loaded: LoadedConfig, ref: str) -> str:
    """The prompt file's path as the user would type it from here."""
    path = loaded.resolve_path(ref)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
