"""Several agents and prompt versions on the same cases: every combination, one suite each.

``cycle run --agent A --agent B --prompt-version 1.0.0 --prompt-version head``
makes four cells. Each cell is an ordinary stored run (``cycle compare`` and
``cycle runs`` see it) carrying the matrix's id; they share one budget and one
response cache, run one after another (each with the configured concurrency),
and the report puts them side by side, each paired by case against the first.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from msgspec import Struct

from cycle.assemble.config import LoadedConfig, apply_overrides, load_prompt
from cycle.assemble.suite import build_suite, validate_suite
from cycle.errors import ConfigError

if TYPE_CHECKING:
    from cycle.cases import TestCase
    from cycle.events import EventBus
    from cycle.llm.budget import Budget
    from cycle.llm.cache import ResponseCache
    from cycle.records import Prompt, RunResult
    from cycle.store import Store


class Cell(Struct, frozen=True):
    """One combination: the config with its agent, and the prompt version it runs."""

    label: str
    loaded: LoadedConfig
    prompt: Prompt | None = None
    version: str | None = None


def new_matrix_id() -> str:
    return "m-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def plan(loaded: LoadedConfig, *, agents: Sequence[str], versions: Sequence[str],
         store: Store | None) -> list[Cell]:
    """Every (prompt version, agent) combination, in the order given (the first is the
    baseline). With no version, the config's prompt; with no agent, the config's."""
    if versions and store is None:
        raise ConfigError("--prompt-version needs the store the versions are in")
    prompts: list[tuple[str, Prompt | None, str | None]] = [("", None, None)]
    if versions:
        assert store is not None
        # a stored prompt is read from the store; a file is read, not saved
        prompt_id = load_prompt(loaded, store if loaded.prompt_is_stored else None)[0].id
        prompts = []
        for ref in versions:
            found = store.resolve(f"{prompt_id}@{ref}")
            prompts.append((found.version, found.prompt, found.version))
    models: list[str | None] = list(agents) or [None]
    cells = []
    for label_v, prompt, version in prompts:
        for agent in models:
            cell_config = apply_overrides(loaded, agent=agent)[0] if agent else loaded
            label = " · ".join(x for x in (label_v and f"v{label_v}", agent) if x)
            cells.append(Cell(label=label, loaded=cell_config, prompt=prompt, version=version))
    labels = [c.label for c in cells]
    if len(set(labels)) != len(labels):
        raise ConfigError("the same combination is asked for twice: " + ", ".join(labels),
                          hint="Give each --agent and --prompt-version once.")
    return cells


def validate(cells: Sequence[Cell], *, tags: Sequence[str], ids: Sequence[str]) -> Sequence[TestCase]:
    """Check every cell's inputs (models, keys, templates) before anything runs; the case
    files are read once, for the first."""
    cases = validate_suite(cells[0].loaded, tags=tags, ids=ids)
    for cell in cells[1:]:
        validate_suite(cell.loaded, cases=cases)
    return cases


async def run_matrix(
    cells: Sequence[Cell], cases: Sequence[TestCase], *, matrix_id: str, store: Store, bus: EventBus,
    budget: Budget | None, cache: ResponseCache | None,
    on_cell: Callable[[int, Cell], None] | None = None,
) -> list[RunResult]:
    """Run every cell on ``cases``; a cell stopped by the budget ends the matrix there."""
    results: list[RunResult] = []
    for n, cell in enumerate(cells):
        if on_cell is not None:
            on_cell(n, cell)
        suite = build_suite(cell.loaded, store=store, bus=bus, budget=budget, cache=cache,
                            cases=cases, prompt=cell.prompt, version=cell.version)
        try:
            meta = suite.meta()
            meta["config"]["matrix"] = {"id": matrix_id, "cell": n, "label": cell.label}
            result = await suite.runner(store=store, bus=bus).run(meta=meta)
        finally:
            await suite.aclose()
        results.append(result)
        if budget is not None and budget.exceeded:
            break
    return results
