"""Prompt commands: ``cycle prompt list|import|export``, ``history`` (and
``history --labels``, the record of label moves), ``show``, ``diff``,
``rollback``, ``label``, ``promote``, and ``protect`` / ``unprotect`` (who may move a
label).

Every version and label move records its author (cycle.authors.current_author:
``$CYCLE_AUTHOR``, else the OS user). A protected label moves only by the people its
protection names, or with ``--force``.

Each takes ``--json`` for scripts. The store is ``--store``, else
``$CYCLE_STORE``, else ``.cycle/cycle.db`` in the current directory.
Read-only commands never create a store.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from cycle.authors import current_author
from cycle.cli import MAX_ROWS, CliContext, local_minute
from cycle.errors import NotFoundError
from cycle.prompts.files import dump_prompt, load_prompt_file, save_prompt_file
from cycle.prompts.semver import BUMPS
from cycle.records import ALL_PROMPTS, HEAD, PRODUCTION, Protection, Version
from cycle.store import Store
from cycle.words import pct

F = TypeVar("F", bound=Callable[..., Any])

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


@contextmanager
def open_store(*, create: bool = False) -> Iterator[Store]:
    """The store of the current command (``--store`` / ``CYCLE_STORE`` / ``.cycle/cycle.db``)."""
    ctx = click.get_current_context()
    obj = ctx.find_object(CliContext) or CliContext()
    store = Store.open(obj.store_path(), create=create)
    try:
        yield store
    finally:
        store.close()


def _print_exact(text: str) -> None:
    """A prompt's text as it is stored, for a file or a pipe (``cycle prompt export ID >
    FILE``, which must import back exactly): the terminal filter, and click's stripping
    of escape sequences off a pipe, changed it (a right-to-left mark in a Hebrew prompt
    came back as the six characters ``\\u200f``). On a terminal it is filtered like any
    text (cycle.safetext)."""
    from cycle.safetext import exact

    click.echo(text, nl=False, file=exact(sys.stdout), color=True)


def emit_json(data: Any) -> None:
    from cycle.safetext import json_printable

    # a C1 control or DEL in a prompt or an answer, shown by the terminal stream as "\\x85",
    # made the output no JSON: written as JSON's own escape instead
    click.echo(json_printable(json.dumps(data, indent=2, ensure_ascii=False, default=str)))


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """Plain aligned columns; the last column is not padded."""
    all_rows = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(headers))]
    lines = []
    for r in all_rows:
        cells = [c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def labels_of(version: str, labels: dict[str, str]) -> str:
    names = [name for name, v in labels.items() if v == version]
    return f"[{', '.join(names)}]" if names else ""


def when(v: Version) -> str:
    return local_minute(v.created_at)


def parents(v: Version) -> str:
    """The version(s) ``v`` was made from: ``1.0.1 + 1.0.3`` for a merge."""
    return f"{v.parent} + {v.second_parent}" if v.second_parent else v.parent or "-"


def version_json(v: Version, labels: dict[str, str]) -> dict[str, Any]:
    data = v.model_dump(mode="json")
    data["labels"] = [name for name, target in labels.items() if target == v.version]
    return data


# -- cycle prompt ... --------------------------------------------------------


@click.group()
def prompt() -> None:
    """Prompts in the store: list them, import and export prompt files."""


@prompt.command("list")
@click.option("--all", "show_all", is_flag=True, help="Also cycle's own prompts (the improver's).")
@json_option
def list_(show_all: bool, as_json: bool) -> None:
    """List the prompts in the store with their latest version and labels."""
    obj = click.get_current_context().find_object(CliContext) or CliContext()
    found = Store.open_existing(obj.store_path())
    if found is None:
        prompts = []  # no store yet is an empty list, not an error
    else:
        with found as store:
            prompts = store.list_prompts(builtin=show_all)
    if as_json:
        emit_json([p.model_dump(mode="json") for p in prompts])
        return
    if not prompts:
        click.echo("No prompts yet: import one with  cycle prompt import FILE")
        return
    rows = [
        [
            p.id, p.latest, str(p.versions),
            "[" + ", ".join(f"{k} {v}" for k, v in p.labels.items()) + "]",
            local_minute(p.updated_at),
        ]
        for p in prompts
    ]
    click.echo(table(rows, ["PROMPT", "LATEST", "VERSIONS", "LABELS", "UPDATED"]))


@prompt.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--bump", type=click.Choice(BUMPS), default="patch", show_default=True,
              help="Which part of the version number a new version bumps.")
@click.option("-m", "--message", default="", help="Why this version exists.")
@click.option("--no-head", is_flag=True, help="Store the version without moving the head label.")
@click.option("--force", is_flag=True,
              help="Move head even if it is protected and you are not allowed (recorded).")
@json_option
def import_(file: str, bump: str, message: str, no_head: bool, force: bool, as_json: bool) -> None:
    """Store the prompt of a YAML prompt FILE as a new version (or find its identical one)."""
    loaded = load_prompt_file(file)  # errors before the store is touched
    with open_store(create=True) as store:
        before = store.find_version(loaded.prompt)
        v = before or store.save_version(
            loaded.prompt, bump=bump, message=message or f"imported from {file}",
            version=loaded.version, move_head=not no_head, force=force,
        )
        labels = store.labels(v.prompt_id)
    if as_json:
        emit_json({"created": before is None, **version_json(v, labels)})
        return
    tag = labels_of(v.version, labels)
    if before is not None:
        click.echo(f"{v.ref} unchanged: the store already holds this content {tag}".rstrip())
        head = labels.get(HEAD)
        if head != v.version and not no_head:
            # identical content is never stored twice, so head did not move: say how to move it
            click.echo(f"note: head is at {head}; to use {v.version} again: "
                       f"cycle rollback {v.prompt_id} --to {v.version}", err=True)
        return
    click.echo(f"{v.ref} stored ({v.source}, {v.hash[:12]}) {tag}".rstrip())
    if loaded.version and loaded.version != v.version:
        click.echo(f"note: {file} names version {loaded.version}, which is not above the latest; "
                   f"stored as {v.version}", err=True)


@prompt.command("export")
@click.argument("ref", metavar="ID[@VERSION|@LABEL]")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write to this file instead of stdout.")
@click.option("--system", "system_only", is_flag=True,
              help="Only the system prompt, as plain text (an ADK agent's instruction).")
@click.option("--write", "write_to", type=click.Path(dir_okay=False, exists=True), default=None,
              metavar="FILE", help="Rewrite this prompt file in place to hold the version, "
              "keeping its comments and layout (the file cycle.yaml names: the improved "
              "prompt back in git).")
def export(ref: str, output: str | None, system_only: bool, write_to: str | None) -> None:
    """Write a version as a YAML prompt file (the head version by default)."""
    with open_store() as store:
        v = store.resolve(ref)
    if write_to:
        if output or system_only:
            raise click.UsageError("--write rewrites a prompt file in place; it does not go "
                                   "with -o or --system")
        from cycle.prompts.files import write_back

        write_back(write_to, v.prompt, v.version)
        click.echo(f"{v.ref} written back to {write_to} (its comments and layout kept)", err=True)
    elif system_only:
        if output:
            Path(output).write_text(v.prompt.system, encoding="utf-8")
            click.echo(f"{v.ref}'s system prompt written to {output}", err=True)
        else:
            _print_exact(v.prompt.system + "\n")
    elif output:
        save_prompt_file(output, v.prompt, v.version)
        click.echo(f"{v.ref} written to {output}", err=True)
    else:
        _print_exact(dump_prompt(v.prompt, v.version))


# -- history, show, diff -------------------------------------------------------


@click.command()
@click.argument("prompt_id", metavar="ID")
@click.option("-n", "--limit", default=50, show_default=True, type=click.IntRange(1, MAX_ROWS),
              help="Versions per page.")
@click.option("--offset", default=0, type=click.IntRange(0, MAX_ROWS),
              help="Skip this many of the newest versions.")
@click.option("--labels", "show_moves", is_flag=True,
              help="Show the recorded label moves (from, to, why, who, when) instead of the versions.")
@click.option("--label", "only_label", default=None, metavar="NAME",
              help="With --labels: only the moves of label NAME.")
@json_option
def history(prompt_id: str, limit: int, offset: int, show_moves: bool, only_label: str | None,
            as_json: bool) -> None:
    """The versions of prompt ID, newest first, with labels, source, score and message.

    With --labels: every recorded move of its labels instead, newest first.
    """
    if only_label is not None and not show_moves:
        raise click.UsageError("--label NAME goes with --labels: cycle history ID --labels --label NAME")
    if show_moves:
        label_log(prompt_id, only_label, limit=limit, offset=offset, as_json=as_json)
        return
    from cycle.store.masking import masked

    with open_store() as store:
        versions = store.history(prompt_id, limit=limit, offset=offset)
        labels = store.labels(prompt_id)
        scores = store.latest_scores(prompt_id)
        total = store.count_versions(prompt_id)
    # a version's message (a cycle's improver wrote most) is shown masked, as the runs
    if as_json:
        emit_json(masked({
            "prompt_id": prompt_id, "total": total, "offset": offset, "labels": labels,
            "versions": [{**version_json(v, labels), "score": scores.get(v.version),
                          "words": v.prompt.words} for v in versions],
        }))
        return
    rows = masked([
        [
            v.version, labels_of(v.version, labels), v.source,
            f"{scores[v.version]:.1f}" if v.version in scores else "-", str(v.prompt.words),
            when(v), v.author or "-", parents(v),
            v.message.splitlines()[0] if v.message else "",
        ]
        for v in versions
    ])
    shown = f"{offset + 1}-{offset + len(versions)} of {total}" if total > len(versions) else str(total)
    click.echo(f"{prompt_id}: {shown} version{'s' if total != 1 else ''}")
    click.echo(table(rows, ["VERSION", "LABELS", "SOURCE", "SCORE", "WORDS", "CREATED", "AUTHOR",
                            "PARENT", "MESSAGE"]))


def label_log(prompt_id: str, only_label: str | None, *, limit: int, offset: int, as_json: bool) -> None:
    """The body of ``cycle history ID --labels``: the audit of label moves."""
    with open_store() as store:
        store.get_version(prompt_id, HEAD)  # an unknown prompt says which exist
        if only_label is not None and only_label not in store.labels(prompt_id):
            raise NotFoundError(
                f"prompt '{prompt_id}' has no label '{only_label}'",
                hint="Labels: " + ", ".join(store.labels(prompt_id)) + ".",
            )
        moves = store.label_moves(prompt_id, label=only_label, limit=limit, offset=offset)
        total = store.count_label_moves(prompt_id, label=only_label)
        guarded = [p for p in store.protections.all(prompt_id)
                   if only_label is None or p.label == only_label]
    if as_json:
        emit_json({"prompt_id": prompt_id, "label": only_label, "total": total, "offset": offset,
                   "moves": [m.model_dump(mode="json") for m in moves],
                   "protected": [p.model_dump(mode="json") for p in guarded]})
        return
    rows = [
        [m.at.astimezone().strftime("%Y-%m-%d %H:%M:%S"), m.label, m.from_version or "(new)",
         m.to_version, m.action + (" (forced)" if m.forced else ""), m.who,
         m.reason.splitlines()[0] if m.reason else ""]
        for m in moves
    ]
    what = f"label {only_label}" if only_label else "labels"
    shown = f"{offset + 1}-{offset + len(moves)} of {total}" if total > len(moves) else str(total)
    click.echo(f"{prompt_id}: {shown} move{'s' if total != 1 else ''} of {what}")
    for p in guarded:
        click.echo(f"{p.label} is protected: {_may_move(p)}")
    click.echo(table(rows, ["WHEN", "LABEL", "FROM", "TO", "ACTION", "WHO", "WHY"]))


@click.command()
@click.argument("ref", metavar="ID[@VERSION|@LABEL]")
@json_option
def show(ref: str, as_json: bool) -> None:
    """Show one version: its number, labels, hash, source and content."""
    with open_store() as store:
        v = store.resolve(ref)
        labels = store.labels(v.prompt_id)
    if as_json:
        emit_json(version_json(v, labels))
        return
    tag = labels_of(v.version, labels)
    click.echo(f"# {v.ref} {tag}".rstrip())
    click.echo(f"# hash    {v.hash}")
    click.echo(f"# source  {v.source}, parent {parents(v)}, created {when(v)} "
               f"by {v.author or '-'}")
    if v.message:
        click.echo(f"# message {v.message}")
    click.echo(dump_prompt(v.prompt, v.version), nl=False)


@click.command()
@click.argument("prompt_id", metavar="ID")
@click.argument("a")
@click.argument("b")
@click.option("--color/--no-color", default=None, help="Colour the diff (default: when stdout is a terminal).")
@click.option("--lines", "by_line", is_flag=True,
              help="A plain unified diff, line by line (for patch), not word by word.")
@json_option
def diff(prompt_id: str, a: str, b: str, color: bool | None, by_line: bool, as_json: bool) -> None:
    """Diffs, field by field, from version A to version B (numbers, labels or hashes): a
    changed line as its word changes, ``~ keep [-old-]{+new+}``; --lines for unified."""
    with open_store() as store:
        d = store.diff(prompt_id, a, b)
    if as_json:
        emit_json(d.to_dict())
        return
    if color is None:
        color = sys.stdout.isatty()
    if color:  # made printable line by line, then coloured: written past the filter
        from cycle.safetext import raw

        click.echo(d.render(color=True, words=not by_line), nl=False, color=True,
                   file=raw(sys.stdout))
    else:
        click.echo(d.render(color=False, words=not by_line), nl=False)


# -- moving labels --------------------------------------------------------------


def label_move_options(f: F) -> F:
    """--message, --force and --json, shared by commands that move a label."""
    f = click.option("-m", "--message", default="", help="Why: recorded with the move.")(f)
    f = click.option("--force", is_flag=True,
                     help="Move a protected label though you are not allowed to (recorded as "
                     "forced, with your name).")(f)
    return json_option(f)


@click.command()
@click.argument("prompt_id", metavar="ID")
@click.option("--to", "to_version", default=None, help="The version to go back to (number, label or hash).")
@click.option("--label", default=HEAD, show_default=True, help="The label to move.")
@click.option("--round", "round_no", type=click.IntRange(min=0), default=None,
              help="With --cycle: go back to the version round N of that cycle evaluated (0: where it started).")
@click.option("--cycle", "cycle_id", default=None, metavar="CYCLE_ID", help="The improvement cycle of --round.")
@label_move_options
def rollback(prompt_id: str, to_version: str, label: str, message: str, as_json: bool,
             round_no: int | None = None, cycle_id: str | None = None, force: bool = False) -> None:
    """Move the head label (or --label) of prompt ID back to an earlier version.

    Give the version with --to, or as a round of an improvement cycle with
    --round N --cycle CYCLE_ID. Nothing is deleted; the move is recorded and
    can itself be undone.
    """
    if round_no is not None or cycle_id is not None:
        if round_no is None or cycle_id is None:
            raise click.UsageError("--round and --cycle go together: --round N --cycle CYCLE_ID")
        if to_version:
            raise click.UsageError("give either --to VERSION or --round N --cycle CYCLE_ID, not both")

        with open_store() as store:
            cycle_prompt, to_version = store.cycles.round_version(cycle_id, round_no)
        if cycle_prompt != prompt_id:
            raise click.UsageError(f"cycle {cycle_id} improved '{cycle_prompt}', not '{prompt_id}'")
        message = message or f"back to round {round_no} of cycle {cycle_id}"
    if not to_version:
        raise click.UsageError("say which version to go back to: --to VERSION (or --round N --cycle CYCLE_ID)")
    do_rollback(prompt_id, to_version, label=label, message=message, as_json=as_json, force=force)


def do_rollback(prompt_id: str, to_version: str, *, label: str, message: str, as_json: bool,
                force: bool = False) -> None:
    """The body of ``cycle rollback``, for commands that find the target another way."""
    with open_store() as store:
        before = store.labels(prompt_id).get(label) if store.has_prompt(prompt_id) else None
        v = store.rollback(prompt_id, to_version, label=label, reason=message,
                           who=current_author(), force=force)
        labels = store.labels(prompt_id)
    moved = before != v.version
    if as_json:
        emit_json({"prompt_id": prompt_id, "label": label, "from": before, "to": v.version,
                   "moved": moved, "labels": labels})
        return
    if moved:
        click.echo(f"{prompt_id}: {label} {before} -> {v.version}")
    else:
        click.echo(f"{prompt_id}: {label} already at {v.version}; nothing changed")


@click.command()
@click.argument("prompt_id", metavar="ID")
@click.argument("version")
@click.argument("name")
@label_move_options
def label(prompt_id: str, version: str, name: str, message: str, force: bool, as_json: bool) -> None:
    """Point label NAME of prompt ID at VERSION (creating the label if new)."""
    with open_store() as store:
        move = store.set_label(prompt_id, name, version, reason=message, who=current_author(),
                               force=force)
        labels = store.labels(prompt_id)
    if as_json:
        emit_json({"prompt_id": prompt_id, "label": name, "to": labels[name],
                   "move": move.model_dump(mode="json") if move else None, "labels": labels})
        return
    if move is None:
        click.echo(f"{prompt_id}: {name} already at {labels[name]}; nothing changed")
    else:
        click.echo(f"{prompt_id}: {name} {move.from_version or '(new)'} -> {move.to_version}")


@click.command()
@click.argument("prompt_id", metavar="ID")
@click.argument("version", default=HEAD)
@label_move_options
def promote(prompt_id: str, version: str, message: str, force: bool, as_json: bool) -> None:
    """Point the production label of prompt ID at VERSION (default: head).

    Saving and improving never move production: it is where a person says a
    version is the one to ship. Shows the version's latest score, so the
    decision has its evidence; `cycle rollback ID --label production --to V`
    undoes it.
    """
    with open_store() as store:
        target = store.resolve(f"{prompt_id}@{version}")
        move = store.set_label(prompt_id, PRODUCTION, target.version,
                               reason=message or "promoted", who=current_author(), force=force)
        runs = store.runs.recent(prompt_id=prompt_id, version=target.version, limit=1)
    evidence = runs[0].summary if runs and runs[0].summary else None
    if as_json:
        emit_json({"prompt_id": prompt_id, "label": PRODUCTION, "to": target.version,
                   "from": move.from_version if move else target.version, "moved": move is not None,
                   "latest_run": runs[0].id if runs else None,
                   "score": evidence.get("score") if evidence else None})
        return
    if move is None:
        click.echo(f"{prompt_id}: production already at {target.version}; nothing changed")
        return
    click.echo(f"{prompt_id}: production {move.from_version or '(none)'} -> {target.version}")
    if evidence and evidence.get("score") is not None:
        click.echo(f"  its latest run {runs[0].id} scored {evidence['score']:.1f}"
                   f" (pass rate {pct(evidence.get('pass_rate'))})")
    else:
        click.echo(f"  {target.version} has never been evaluated: cycle run cycle.yaml")


# -- protecting labels --------------------------------------------------------------


def _whose(p: Protection) -> str:
    return "every prompt" if p.prompt_id == ALL_PROMPTS else p.prompt_id


def _may_move(p: Protection) -> str:
    if not p.allowed:
        return f"nobody moves it without --force ({_whose(p)})"
    return f"only {p.who_may()} move{'s' if len(p.allowed) == 1 else ''} it without --force ({_whose(p)})"


def _protection_json(p: Protection) -> dict[str, Any]:
    return p.model_dump(mode="json")


@click.command()
@click.argument("label_name", metavar="[LABEL]", required=False)
@click.option("--prompt", "prompt_id", default=None, metavar="ID",
              help="Protect the label of prompt ID only (default: of every prompt).")
@click.option("--allow", multiple=True, metavar="NAME",
              help="Someone who may move the label without --force (repeat for several; "
              "none: nobody).")
@click.option("--force", is_flag=True,
              help="Change a protection that does not allow you to.")
@json_option
def protect(label_name: str | None, prompt_id: str | None, allow: tuple[str, ...], force: bool,
            as_json: bool) -> None:
    """Protect label LABEL: it then moves only by the people --allow names, or with --force.

    Without LABEL: list the protected labels. The protection is kept in the store the
    team shares, so no edit of cycle.yaml lifts it; changing or lifting it needs someone
    it allows, or --force.
    """
    if label_name is None:
        if allow or prompt_id or force:
            raise click.UsageError("say which label to protect: cycle protect LABEL [--allow NAME]")
        obj = click.get_current_context().find_object(CliContext) or CliContext()
        found: list[Protection] = []
        if obj.store_path().exists():  # no store yet protects nothing
            with open_store() as store:
                found = store.protections.all()
        if as_json:
            emit_json([_protection_json(p) for p in found])
        elif not found:
            click.echo("No label is protected: protect one with  cycle protect production "
                       "--allow NAME")
        else:
            click.echo(table([[p.label, _whose(p), ", ".join(p.allowed) or "(nobody)",
                               p.by or "-", local_minute(p.at) if p.at else "-"] for p in found],
                             ["LABEL", "PROMPT", "MAY MOVE IT", "BY", "SINCE"]))
        return
    with open_store(create=True) as store:
        p = store.protections.protect(label_name, prompt_id=prompt_id or ALL_PROMPTS,
                                      allowed=allow, by=current_author(), force=force)
    if as_json:
        emit_json(_protection_json(p))
        return
    click.echo(f"{label_name} is protected: {_may_move(p)}")


@click.command()
@click.argument("label_name", metavar="LABEL")
@click.option("--prompt", "prompt_id", default=None, metavar="ID",
              help="Lift the protection of prompt ID's label (default: the one of every prompt).")
@click.option("--force", is_flag=True, help="Lift a protection that does not allow you to.")
@json_option
def unprotect(label_name: str, prompt_id: str | None, force: bool, as_json: bool) -> None:
    """Lift the protection of label LABEL (of every prompt, or of --prompt ID)."""
    with open_store() as store:
        p = store.protections.unprotect(label_name, prompt_id=prompt_id or ALL_PROMPTS,
                                        by=current_author(), force=force)
        still = store.protection(prompt_id, label_name) if prompt_id else None
    if as_json:
        emit_json({"unprotected": _protection_json(p),
                   "still": _protection_json(still) if still else None})
        return
    click.echo(f"{label_name} of {_whose(p)} is no longer protected")
    if still is not None:
        click.echo(f"note: {label_name} is still protected for {_whose(still)}: {_may_move(still)}",
                   err=True)


__all__ = ["diff", "do_rollback", "history", "label", "open_store", "promote", "prompt",
           "protect", "rollback", "show", "unprotect"]
