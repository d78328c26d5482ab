"""``cycle tui``: browse the store's prompts, versions and diffs, and roll back.

Runs nothing: it opens the History screen on the store (``--store``, else
``$CYCLE_STORE``, else ``.cycle/cycle.db``). It never creates a store. It
opens on PROMPT_ID, else on the prompt of ./cycle.yaml, else on the prompt
used last. ``r`` there lists every stored run; a store that holds only eval files run
against an endpoint (runs with no prompt) opens on that list.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cycle.cli import CliContext
from cycle.errors import CycleError, NotFoundError


def config_prompt_id(folder: Path) -> str | None:
    """The id of the prompt ./cycle.yaml names, if it can be read. Only ``prompt:`` is
    read: a config broken elsewhere is `cycle run`'s to report; browsing still works."""
    import yaml

    from cycle.assemble.config import STORE_PREFIX
    from cycle.prompts.files import load_prompt_file

    try:
        doc = yaml.safe_load((folder / "cycle.yaml").read_text(encoding="utf-8"))
        ref = doc.get("prompt") if isinstance(doc, dict) else None
        if not isinstance(ref, str):
            return None
        if ref.startswith(STORE_PREFIX):
            return ref[len(STORE_PREFIX):].split("@", 1)[0]
        return load_prompt_file(folder / ref).prompt.id
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, OverflowError,
            RecursionError, CycleError):
        return None


@click.command()
@click.argument("prompt_id", required=False)
@click.pass_context
def tui(ctx: click.Context, prompt_id: str | None) -> None:
    """Open the History screen on the store: on PROMPT_ID, else the prompt of
    ./cycle.yaml, else the prompt used last."""
    from cycle.store import Store
    from cycle.store.store import shown_target
    from cycle.tui.app import CycleApp
    from cycle.tui.widgets.header import HeaderInfo

    obj = ctx.find_object(CliContext) or CliContext()
    path = obj.store_path()
    with Store.open(path, create=False) as store:
        known = {p.id for p in store.list_prompts()}
        if prompt_id is not None and prompt_id not in known:
            shown = ", ".join(p.id for p in store.list_prompts(builtin=False)) or "none"
            raise NotFoundError(f"no prompt '{prompt_id}' in the store {store.where}",
                                hint=f"Prompts: {shown}.")
        if prompt_id is None:
            prompt_id = config_prompt_id(Path.cwd())
            if prompt_id not in known:
                prompt_id = store.last_used_prompt()
        if not (sys.stdin.isatty() and sys.__stdout__.isatty()):
            # the screen would be written into a pipe, waiting for keys that never come
            raise click.UsageError(
                "no terminal for the TUI: from a script, read the store with cycle history "
                "ID, cycle runs, cycle cycles (each with --json)")
        app = CycleApp(store=store, info=HeaderInfo(store=shown_target(path)), prompt_id=prompt_id)
        app.run()
