"""``cycle run`` with several ``--agent`` or ``--prompt-version``: every combination on
the same cases, reported side by side (cycle.assemble.matrix, cycle.report.matrix).

The exit code is the worst of the cells': 3 when errors kept some case from being
judged, 1 when a case failed, else 0.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cycle import aio, heap

if TYPE_CHECKING:
    from cycle.assemble import LoadedConfig


def run_matrix_command(loaded: LoadedConfig, *, store_path: Path, agents: Sequence[str],
                       versions: Sequence[str], tags: Sequence[str], case_ids: Sequence[str],
                       report_dir: Path | None, no_reports: bool, no_cache: bool, quiet: bool,
                       as_json: bool) -> int:
    from cycle.assemble.matrix import Cell, new_matrix_id, plan, run_matrix, validate
    from cycle.assemble.outputs import check_outputs
    from cycle.assemble.suite import open_cache, run_budget
    from cycle.events import EventBus
    from cycle.progress import Progress
    from cycle.report.matrix import matrix_dict, render_matrix_console, write_matrix_reports
    from cycle.store import Store

    # every cell is checked before the store is written or a model called
    if versions:
        with Store.open(store_path, create=False) as existing:
            cells = plan(loaded, agents=agents, versions=versions, store=existing)
    else:
        cells = plan(loaded, agents=agents, versions=versions, store=None)
    cases = validate(cells, tags=tags, ids=case_ids)
    check_outputs(loaded, store=store_path, cache=not no_cache,
                  reports=None if no_reports else report_dir or loaded.report_dir,
                  reports_flag=report_dir is not None)
    store = Store.open(store_path)
    cache = None
    try:
        cache = open_cache(loaded, enabled=not no_cache)
        bus = EventBus()
        matrix_id = new_matrix_id()
        talk = not (quiet or as_json)
        if talk and sys.stderr.isatty():
            bus.subscribe(Progress())

        def announce(n: int, cell: Cell) -> None:
            if talk:
                click.echo(f"cell {n + 1} of {len(cells)}: {cell.label}", err=True)

        heap.settle()
        results = aio.run(run_matrix(cells, cases, matrix_id=matrix_id, store=store, bus=bus,
                                     budget=run_budget(loaded),
                                     cache=cache, on_cell=announce))
    finally:
        store.close()
        if cache is not None:
            cache.close()
    data = matrix_dict(matrix_id, [c.label for c in cells], results)
    paths = {} if no_reports else write_matrix_reports(data, report_dir or loaded.report_dir)
    if as_json:
        click.echo(json.dumps({**data, "reports": {k: str(v) for k, v in paths.items()}},
                              indent=2, default=str))
    elif not quiet:
        click.echo(render_matrix_console(data))
        for kind, p in paths.items():
            click.echo(f"{kind + ' report':16} {p}")
    codes = [r.exit_code for r in results]
    if len(results) < len(cells):
        codes.append(3)  # the budget stopped the matrix before every cell ran
    return 3 if 3 in codes else max(codes, default=0)
