"""``cycle tui``: browse the store's prompts, versions and diffs, and roll back.

Runs nothing: it opens the History screen on the store (``--store``, else
``$CYCLE_STORE``, else ``.cycle/cycle.db``). It never creates a store.
"""

from __future__ import annotations

import click

from cycle.cli import CliContext
from cycle.errors import NotFoundError


@click.command()
@click.argument("prompt_id", required=False)
@click.pass_context
def tui(ctx: click.Context, prompt_id: str | None) -> None:
    """Open the History screen on the store (optionally on PROMPT_ID)."""
    from cycle.store import Store
    from cycle.tui.app import CycleApp
    from cycle.tui.widgets.header import HeaderInfo

    obj = ctx.find_object(CliContext) or CliContext()
    path = obj.store_path()
    with Store.open(path, create=False) as store:
        if prompt_id is not None and prompt_id not in {p.id for p in store.list_prompts()}:
            known = ", ".join(p.id for p in store.list_prompts()) or "none"
            raise NotFoundError(f"no prompt '{prompt_id}' in the store {path}", hint=f"Prompts: {known}.")
        app = CycleApp(store=store, info=HeaderInfo(store=str(path)), prompt_id=prompt_id)
        app.run()
