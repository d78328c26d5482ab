"""``cycle judge improve RUN_ID``: the judge prompt improved by the cycle itself, on people's
labels of RUN_ID's outputs (cycle.assemble.judge_cycle), reviewed like any other cycle.

Exit codes as ``cycle improve``: 0 the cycle ended, 2 usage or input error (too few
labels among them), 3 a model error stopped it (resumable), 130 interrupted (resumable).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cycle.cli import FiniteFloat, store_of
from cycle.cli.improve import cycle_options, event_bus
from cycle.records import JUDGE_PROMPT_ID
from cycle.words import pct, plural

if TYPE_CHECKING:
    from cycle import events as ev
    from cycle.assemble import ImproveConfig, LoadedConfig
    from cycle.assemble.judge_cycle import HeldOut
    from cycle.assemble.rubric_file import RubricWrite
    from cycle.judge.alignment import Figures
    from cycle.llm.cache import ResponseCache
    from cycle.loop import Loop
    from cycle.loop.review import Reviewer
    from cycle.store import Store


@click.command("improve")
@click.argument("run_id")
@click.option("--config", "config", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("cycle.yaml"), show_default=True,
              help="The cycle.yaml whose judge model and criteria' rubrics judge again.")
@click.option("--criterion", "criteria", multiple=True,
              help="Learn from the labels of these criteria (default: every LLM criterion).")
@click.option("--held-out", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              default=0.3, show_default=True,
              help="The share of labelled outputs held out: never shown to the improver, "
              "and the agreement reported before and after.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Which labelled outputs are held out (the same labels and seed, the same "
              "split).")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Improving rounds at most.")
@cycle_options("the judge prompt")
@click.option("--judge", "judge_model", help="Judge model, overriding cycle.yaml.")
@click.option("--improver", "improver_model", help="Improver model, overriding cycle.yaml.")
@click.option("--budget", type=FiniteFloat(min=0), help="Hard cap in USD on the cycle's calls.")
@click.option("-n", "--iterations", type=click.IntRange(min=1),
              help="Judgements of each labelled output per evaluation (default: config, 3).")
@click.option("-c", "--concurrency", type=click.IntRange(min=1),
              help="Labelled outputs in flight (default: config, 8).")
@click.option("--dry-run", is_flag=True, help="Say what the cycle would do (the judge prompt "
              "and its version, the labelled outputs and their split, the criteria, the "
              "calls at most), calling no model and writing nothing.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: the plan as JSON.")
def improve_judge(run_id: str, config: Path, criteria: tuple[str, ...], held_out: float,
                  seed: int, rounds: int, headless: bool, yes: bool, review: str | None,
                  min_priority: str | None, resume: str | None, events_file: Path | None,
                  report_dir: Path | None, no_cache: bool, quiet: bool,
                  judge_model: str | None, improver_model: str | None, budget: float | None,
                  iterations: int | None, concurrency: int | None, dry_run: bool,
                  as_json: bool) -> None:
    """Improve the judge prompt (cycle-judge) on people's labels of RUN_ID's outputs.

    Each labelled output, on each LLM criterion, is a case: the judge prompt judges it
    again with the criterion's rubric from CONFIG, and scores by how far its verdict
    agrees with people's. The cycle's rounds, review, acceptance and confirmation on
    fresh samples are cycle improve's; a share of the labels is held out and the
    agreement on them reported before and after. A confirmed judge prompt becomes head
    of cycle-judge, which later runs judge with (undo: cycle rollback
    cycle-judge --to VERSION). Each criterion's rubric is improved with it: a confirmed
    rubric edit is written back to CONFIG, its comments and layout kept.
    """
    import sys

    from cycle.assemble.config import apply_overrides, load_config
    from cycle.assemble.improve import load_improve_config
    from cycle.assemble.judge_cycle import (
        build_judge_loop,
        judging_model,
        labelled_set,
        refuse_unsupported,
        replaced_settings,
    )
    from cycle.cli import load_env
    from cycle.cli.improve import _choose_review, report_cycle, run_cycle
    from cycle.cli.run import say_overrides
    from cycle.errors import ConfigError
    from cycle.store import Store

    given = {k: v for k, v in {"judge": judge_model, "improver": improver_model,
                               "budget": budget, "iterations": iterations,
                               "concurrency": concurrency}.items() if v is not None}
    loaded, changes = apply_overrides(load_config(config), **given)
    load_env(loaded.base_dir)
    improve_cfg = load_improve_config(loaded)
    refuse_unsupported(loaded, improve_cfg)  # before anything is read, called or written
    if as_json and not dry_run:
        raise click.UsageError("--json goes with --dry-run (a cycle's results are in its "
                               "JSON report)")
    if dry_run:
        _dry_run(loaded, run_id, criteria=criteria, held_out=held_out, seed=seed,
                 rounds=rounds, improve_cfg=improve_cfg, changes=changes, as_json=as_json)
        return
    choice = _choose_review(headless, yes, review, improve_cfg.review)
    if not headless and not (sys.stdin.isatty() and sys.__stdout__.isatty()):
        raise click.UsageError(
            "no terminal for the TUI: run headless, approving automatically (--headless "
            "--yes) or asking on standard input (--headless --review prompt)")
    judge_name = judging_model(loaded)
    store_path = store_of(loaded)
    # read before the cycle writes anything: too few labels leave the store as it was
    with Store.open(store_path) as store:
        run_id = store.runs.resolve(run_id)
        labelled = labelled_set(store, loaded, run_id, held_out=held_out, seed=seed,
                                criteria=criteria)
    say_overrides(changes, quiet=False, resumed=resume is not None)
    left = "; ".join(f"{n} {why}" for why, n in sorted(labelled.left_out.items()))
    click.echo(f"{len(labelled.cases)} labelled outputs of run {run_id}: "
               f"{len(labelled.cases) - len(labelled.held_out)} to learn from, "
               f"{len(labelled.held_out)} held out (seed {seed})"
               + (f"; left out: {left}" if left else ""))
    for note in replaced_settings(improve_cfg):
        click.echo(note)
    again = f"cycle judge improve {run_id} --config {loaded.path}"
    bus, sink = event_bus(events_file)

    def make(store: Store, cycle_bus: ev.EventBus, reviewer: Reviewer,
             cache: ResponseCache | None) -> Loop:
        return build_judge_loop(loaded, labelled, store=store, reviewer=reviewer,
                                improve=improve_cfg, rounds=rounds, bus=cycle_bus, cache=cache,
                                again=again)

    c = loaded.config
    try:
        outcome = run_cycle(
            make, loaded=loaded, bus=bus, store_path=store_path, choice=choice,
            priority=min_priority or improve_cfg.min_priority,
            resume=None if resume is None else (resume or True), headless=headless,
            quiet=quiet, use_cache=not no_cache, take_over=False, again=again,
            prompt_id=JUDGE_PROMPT_ID,
            models={"judge": judge_name, "improver": c.improver or judge_name})
    finally:
        if sink is not None:
            sink.close()
            if sink.failed:
                click.echo(f"warning: {sink.failed}", err=True)
    report_cycle(outcome, store_path, report_dir or loaded.report_dir, loaded.report_formats)
    from cycle.assemble.judge_cycle import held_out_figures, learnt_rubrics
    from cycle.assemble.rubric_file import write_rubrics

    with Store.open(store_path) as store:
        figures = held_out_figures(store, outcome, labelled)
        learnt = learnt_rubrics(store, outcome)
    if figures is not None:
        click.echo(_held_out_line(figures))
    if learnt:
        try:
            writes = write_rubrics(loaded.path, learnt)
        except ConfigError:  # said with the learnt text, which head keeps
            for cid, (_, text) in learnt.items():
                click.echo(f"the learnt rubric of criterion '{cid}' ({JUDGE_PROMPT_ID} "
                           f"{outcome.final_version}): \"{text}\"")
            raise
        for line in rubric_lines(writes, loaded.path, outcome.final_version):
            click.echo(line)


def _dry_run(loaded: LoadedConfig, run_id: str, *, criteria: tuple[str, ...],
             held_out: float, seed: int, rounds: int, improve_cfg: ImproveConfig,
             changes: list[str], as_json: bool) -> None:
    """``--dry-run``: the plan, from the store as it is (opened, never created) and
    cycle.yaml; no model is built, so no key is needed."""
    import json

    from cycle.assemble.judge_cycle import judge_plan, judging_model, labelled_set
    from cycle.cli.run import say_overrides
    from cycle.store import Store

    judge_name = judging_model(loaded)
    with Store.open(store_of(loaded), create=False) as store:
        run_id = store.runs.resolve(run_id)
        labelled = labelled_set(store, loaded, run_id, held_out=held_out, seed=seed,
                                criteria=criteria)
        plan = judge_plan(store, loaded, labelled, improve=improve_cfg, rounds=rounds,
                          held_out=held_out, seed=seed, judge_name=judge_name)
    if as_json:
        click.echo(json.dumps(plan, indent=2))
        return
    say_overrides(changes, quiet=False, resumed=False)
    for line in plan_lines(plan):
        click.echo(line)


def plan_lines(plan: dict[str, Any]) -> list[str]:
    """The dry run's plan as the terminal shows it."""
    j = plan["judge"]
    version = (f"{j['prompt']}@{j['version']}" if j["stored"] else
               f"{j['prompt']}, the built-in prompt (stored as its first version when a "
               "cycle starts)")
    per = "; ".join(f"{c}: {x['labelled']} labelled, {x['held_out']} held out"
                    for c, x in plan["criteria"].items())
    left = "; ".join(f"{n} {why}" for why, n in plan["left_out"].items())
    calls = plan["calls"]
    return [
        "dry run: no model called, nothing written",
        f"judge: {j['model']} with {version}; improver: {plan['improver']}",
        f"{plan['labelled']} labelled outputs of run {plan['run_id']}: {plan['learn_from']} "
        f"to learn from, {plan['held_out']} held out (--held-out {plan['held_out_share']:g}, "
        f"--seed {plan['seed']})" + (f"; left out: {left}" if left else ""),
        f"criteria: {per}",
        (f"calls, for at most {plural(plan['rounds'], 'round')} of "
         f"{plural(plan['iterations'], 'iteration')} (a comparison may grow to "
         f"{plan['max_iterations']}): judge {calls['judge'][0]} to {calls['judge'][1]}, "
         f"improver {calls['improver'][0]} to {calls['improver'][1]}"),
        (f"rubrics improved with the judge prompt (a confirmed edit is written to "
         f"{plan['config']}): {', '.join(plan['rubrics']) or 'none'}"),
        *plan["replaced"],
    ]


def rubric_lines(writes: list[RubricWrite], path: Path, version: str) -> list[str]:
    """What became of each learnt rubric, with the text it replaced (to put it back)."""
    out = []
    for w in writes:
        if w.written:
            out.append(f"{path}:{w.line}: the {w.field} of criterion '{w.criterion}' is now "
                       f"{JUDGE_PROMPT_ID} {version}'s: \"{w.after}\" (was: \"{w.before}\")")
        else:
            out.append(f"the learnt {w.field} of criterion '{w.criterion}' was not written: "
                       f"{w.why}; it is: \"{w.after}\"")
    return out


def _held_out_line(h: HeldOut) -> str:
    """The agreement on the held-out labels, before -> after."""
    def kappa(f: Figures) -> str:
        if f.kappa is None:
            return "—"
        ci = f" [{f.kappa_ci[0]:.2f}, {f.kappa_ci[1]:.2f}]" if f.kappa_ci else ""
        return f"{f.kappa:.2f}{ci}"

    def share(x: float | None) -> str:
        return "—" if x is None else pct(x)

    def points(x: float | None) -> str:
        return "—" if x is None else f"{x:.1f}"

    b, a = h.before, h.after
    if h.before_version == h.after_version:
        return (f"held-out labels ({b.outputs}): judge {h.after_version} unchanged: kappa "
                f"{kappa(a)}, verdicts agreeing {share(a.agreement)}, mean absolute error "
                f"{points(a.mean_abs_error)} points")
    return (f"held-out labels ({b.outputs}), {h.before_version} -> {h.after_version}: kappa "
            f"{kappa(b)} -> {kappa(a)}, verdicts agreeing {share(b.agreement)} -> "
            f"{share(a.agreement)}, mean absolute error {points(b.mean_abs_error)} -> "
            f"{points(a.mean_abs_error)} points")
