"""``cycle store``: whole stores.

    cycle store copy .cycle/cycle.db 'postgresql://me@db.team/cycle?options=-csearch_path%3Dsupport'
    cycle store copy 'postgresql://...' backup.db --json

A store is a SQLite file or a ``postgresql://`` URL, as ``--store`` takes it; a URL's
password is never shown (messages name a store by ``Store.where``).
"""

from __future__ import annotations

import time

import click

from cycle.cli.prompt import emit_json, table


@click.group("store")
def store_group() -> None:
    """Whole stores: copy one into another (SQLite or PostgreSQL), verified."""


@store_group.command("copy")
@click.argument("src")
@click.argument("dst")
@click.option("--json", "as_json", is_flag=True, help="Print the copy's figures as JSON.")
def copy(src: str, dst: str, as_json: bool) -> None:
    """Copy the store SRC whole into DST, a new or blank store, and verify the copy.

    Each is a file or a postgresql:// URL: start on a local file, move the project to the
    team's database (or back). Every row of every table is copied with its ids, in one
    transaction on DST that is kept only if every table read back from DST has SRC's row
    count and content hash (sha256). A DST holding any row is refused, never merged into;
    a DST file that does not exist is created, an empty PostgreSQL schema set up. Opening
    SRC migrates it to this release first, as any command would. Copy when nothing is
    running on SRC: the copy is SRC as it was when the copy began.
    """
    from cycle.errors import NotFoundError
    from cycle.store import Store
    from cycle.store.copying import SHOWN_HASH, copy_store
    from cycle.store.store import shown_target, store_target

    started = time.perf_counter()
    try:
        source = Store.open(store_target(src), create=False)
    except NotFoundError as e:
        raise NotFoundError(f"no cycle store at {shown_target(store_target(src))} to copy",
                            hint="SRC is the store to copy: its file (e.g. .cycle/cycle.db, "
                            "beside cycle.yaml) or its postgresql:// URL.") from e
    with source, Store.open(store_target(dst)) as target:
        copied = copy_store(source, target)
        where = source.where, target.where
    seconds = time.perf_counter() - started
    rows = sum(t.rows for t in copied)
    if as_json:
        emit_json({"source": where[0], "destination": where[1], "verified": True,
                   "rows": rows, "seconds": round(seconds, 3),
                   "tables": [{"table": t.table, "rows": t.rows, "sha256": t.sha256}
                              for t in copied]})
        return
    click.echo(f"{where[0]} -> {where[1]}")
    width = max(len("rows"), *(len(str(t.rows)) for t in copied))
    click.echo(table([(t.table, str(t.rows).rjust(width), t.sha256[:SHOWN_HASH])
                      for t in copied], ("table", "rows".rjust(width), "sha256")))
    click.echo(f"copied {rows} rows in {len(copied)} tables, verified ({seconds:.2f} s). "
               f"Point --store or CYCLE_STORE at {where[1]} to work on the copy.")
