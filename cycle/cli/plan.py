"""``cycle plan``: before a cycle, the cases and iterations a gain needs, and what the
budget buys (cycle.loop.planning), from a stored run of the suite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cycle.cli import FiniteFloat
from cycle.errors import NotFoundError

if TYPE_CHECKING:
    from cycle.store import Store


@click.command()
@click.argument("config", type=click.Path(path_type=Path), default="cycle.yaml", required=False)
@click.option("--gain", type=FiniteFloat(min=0, min_open=True), required=True,
              help="The smallest gain (points of score, 0-100) the cycle should find.")
@click.option("--run", "run_id",
              help="The run to read the noise and price from (default: the newest finished "
                   "run of the prompt with 2+ iterations).")
@click.option("--budget", type=FiniteFloat(min=0),
              help="USD for the whole cycle (default: improve.stop's max_cost, else budget).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def plan(config: Path, gain: float, run_id: str | None, budget: float | None,
         as_json: bool) -> None:
    """Say how many cases and iterations a gain of --gain points needs.

    From a stored run of the suite (its within-case spread and its price per
    case-iteration): per number of iterations, the smallest gain the suite's cases
    find 80% of the time at the confirmation's level, the cases --gain needs, and
    one evaluation's cost; with a budget, the improving rounds it pays for. Nothing
    is called.
    """
    import msgspec

    from cycle.assemble.config import load_config
    from cycle.assemble.improve import load_improve_config
    from cycle.assemble.suite import validate_suite
    from cycle.cli import store_of
    from cycle.cli.run import stored_prompt
    from cycle.evals.results import load_run
    from cycle.loop.planning import plan as make_plan
    from cycle.loop.planning import plan_lines
    from cycle.loop.stop import cost_cap
    from cycle.store import Store
    from cycle.store.store import shown_target

    loaded = load_config(config)
    improve_cfg = load_improve_config(loaded)
    cases = validate_suite(loaded, keys=False)
    with stored_prompt(loaded) as prompt:
        prompt_id = prompt.id
    if budget is None:
        caps = [x for x in (cost_cap(improve_cfg.stop_condition(str(loaded.base_dir))),
                            loaded.config.budget) if x is not None]
        budget = min(caps) if caps else None
    path = store_of(loaded)
    found = Store.open_existing(path)
    if found is None:
        raise NotFoundError(f"no store at {shown_target(path)}: the plan reads a stored run "
                            "of the suite", hint=f"Run the suite first, twice or more per case: "
                                                 f"cycle run {config} -n 3")
    with found as store:
        if run_id is None:
            run_id = _newest_repeated(store, prompt_id, config)
        result = load_run(store.runs, store.runs.resolve(run_id))
        improver = store.runs.mean_call_cost("improver")
    made = make_plan(result, gain=gain, suite_cases=len(cases),
                     iterations=loaded.config.run.iterations, budget=budget,
                     improver_cost=improver or 0.0)
    if as_json:
        click.echo(json.dumps(msgspec.to_builtins(made), indent=2))
        return
    for line in plan_lines(made):
        click.echo(line)


def _newest_repeated(store: Store, prompt_id: str, config: Path) -> str:
    """The newest finished run of ``prompt_id`` that judged its cases twice or more."""
    for row in store.runs.recent(prompt_id=prompt_id, limit=50):
        if row.status == "finished" and store.runs.repeats_cases(row.id):
            return row.id
    raise NotFoundError(
        f"no finished run of '{prompt_id}' judged a case twice: the plan needs a case's "
        "spread from one iteration to the next", hint=f"Run: cycle run {config} -n 3")
