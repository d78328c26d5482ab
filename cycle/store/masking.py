"""What a store holds, shown with today's masking: stores written before cycle masked the
environment's keys (in answers, errors, a judge's reasoning) or dropped an endpoint's
credentials from its URL may hold them raw. What re-reads a store to show or report it
(the TUI's screens, ``cycle report``, ``cycle runs``, ``cycle compare``, ``cycle cycles``,
``cycle history``) reads it through these, as a defence in depth; the store is not
rewritten. A run writing its own reports does not: what it writes is masked as it is
stored (``scrub`` with ``environment_secrets()``), and masking it again would cost every
case its time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from cycle.store.runs import RunLog

if TYPE_CHECKING:
    from cycle.records import IterationResult, RunRow
    from cycle.store import Store

T = TypeVar("T")


def masked(value: T, secrets: tuple[str, ...] | None = None) -> T:
    """``value`` as read from the store (an iteration's result, a run's row, a report's
    data) with the environment's keys masked: ``scrub`` with ``environment_secrets()``
    (read here unless given), the masking cycle applies before it stores what code it did
    not write says. A record is copied only when it held one."""
    from pydantic import BaseModel

    from cycle.llm.http import environment_secrets, scrub

    if secrets is None:
        secrets = environment_secrets()
    if not secrets:
        return value
    if isinstance(value, BaseModel):
        data = value.model_dump()
        clean = scrub(data, secrets)
        return value if clean is data else type(value).model_validate(clean)
    return scrub(value, secrets)  # type: ignore[no-any-return]


def model_name(name: str | None) -> str | None:
    """A run's agent or judge as shown: an HTTP endpoint's URL without its user, password
    and token (``safe_url``), which stores written before cycle dropped them still hold."""
    if name and name.startswith(("http://", "https://")):
        from cycle.llm.http import safe_url

        return safe_url(name)
    return name


def masked_row(row: RunRow, secrets: tuple[str, ...] | None = None) -> RunRow:
    """A run's row with the environment's keys masked and its models named without an
    endpoint's credentials."""
    row = masked(row, secrets)
    agent, judge = model_name(row.agent_model), model_name(row.judge_model)
    if agent == row.agent_model and judge == row.judge_model:
        return row
    return row.model_copy(update={"agent_model": agent, "judge_model": judge})


class MaskedRunLog(RunLog):
    """The store's runs read with the environment's keys masked (``masked``): the rows and
    every iteration's results (output, error, trace, verdicts' reasoning). A stored run
    loaded through it (``load_run(MaskedRunLog(store), run_id)``) is reported masked, its
    results read as they are asked (in slices, shared by the reports) as from the store's
    own ``runs``."""

    def __init__(self, store: Store, secrets: tuple[str, ...] | None = None) -> None:
        from cycle.llm.http import environment_secrets

        super().__init__(store)
        self.secrets = environment_secrets() if secrets is None else secrets

    def get(self, run_id: str) -> RunRow | None:
        row = super().get(run_id)
        return None if row is None else masked_row(row, self.secrets)

    def recent(self, **filters: Any) -> list[RunRow]:
        return [masked_row(r, self.secrets) for r in super().recent(**filters)]

    def _results(self, where: str, params: list[Any]) -> list[IterationResult]:
        return [masked(r, self.secrets) for r in super()._results(where, params)]
