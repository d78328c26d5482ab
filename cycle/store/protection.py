"""Protected labels: a label that moves only by the authors its protection names, or with
``--force`` (table ``protected_labels``, m014).

The protections live in the store, not in cycle.yaml: a team shares the store, and an
edit of a file in a pull request must not be able to lift the protection of
``production``. A protection is of one prompt's label, or of a label of every prompt
(``prompt_id`` '*', cycle's own prompts excepted: their heads move as cycle upgrades
them); a prompt's own protection takes the place of the one of every prompt.

Changing a protection is guarded by the protection it changes: protecting a label that
is protected already (to change who may move it), or lifting a protection, needs an
author it allows, or ``force``. So nobody widens a protection for themselves quietly.

Every move of a protected label by an author it does not allow, with ``force``, is
recorded as forced (``label_moves.forced``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cycle.authors import clean, current_author
from cycle.errors import NotFoundError, ProtectedLabelError
from cycle.ids import now_iso
from cycle.records import ALL_PROMPTS, BUILTIN_PROMPTS, Protection

if TYPE_CHECKING:
    from cycle.store.store import Store

_COLUMNS = "prompt_id, label, allowed, protected_by, protected_at"


def _protection(row: tuple[Any, ...]) -> Protection:
    prompt_id, label, allowed, by, at = row
    return Protection(prompt_id=prompt_id, label=label, allowed=tuple(json.loads(allowed or "[]")),
                      by=by, at=datetime.fromisoformat(at) if at else None)


def describe(p: Protection) -> str:
    """``production of every prompt`` / ``production of support-reply``."""
    return f"'{p.label}' of {'every prompt' if p.prompt_id == ALL_PROMPTS else p.prompt_id}"


class Protections:
    """The ``protected_labels`` table (``store.protections``)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[Protection]:
        return [_protection(r) for r in self.store.db.execute(
            f"SELECT {_COLUMNS} FROM protected_labels WHERE {sql}", params).fetchall()]

    def of(self, prompt_id: str, label: str) -> Protection | None:
        """The protection that covers ``label`` of ``prompt_id``: its own, else the one of
        every prompt (not for cycle's own prompts); None: the label is not protected."""
        rows = {p.prompt_id: p for p in self._rows(
            "label = ? AND prompt_id IN (?, ?)", (label, prompt_id, ALL_PROMPTS))}
        if prompt_id in rows:
            return rows[prompt_id]
        if prompt_id in BUILTIN_PROMPTS:
            return None
        return rows.get(ALL_PROMPTS)

    def all(self, prompt_id: str | None = None) -> list[Protection]:
        """Every protection (those that cover ``prompt_id``, when given), by prompt and label."""
        if prompt_id is None:
            found = self._rows("1 = 1", ())
        else:
            found = self._rows("prompt_id IN (?, ?)", (prompt_id, ALL_PROMPTS))
            covered = {(p.prompt_id, p.label) for p in found}
            # a prompt's own protection takes the place of the one of every prompt
            found = [p for p in found if p.prompt_id != ALL_PROMPTS
                     or ((prompt_id, p.label) not in covered and prompt_id not in BUILTIN_PROMPTS)]
        return sorted(found, key=lambda p: (p.prompt_id != ALL_PROMPTS, p.prompt_id, p.label))

    def check(self, prompt_id: str, label: str, who: str, *, force: bool) -> bool:
        """Whether moving ``label`` of ``prompt_id`` by ``who`` needs ``force`` (True: it is
        forced past the protection); ProtectedLabelError if it needs it and ``force`` is
        false. Callers hold the write transaction that moves the label."""
        p = self.of(prompt_id, label)
        if p is None or p.allows(who):
            return False
        if force:
            return True
        raise refused(p, who, prompt_id=prompt_id, doing="move")

    def protect(self, label: str, *, prompt_id: str = ALL_PROMPTS, allowed: tuple[str, ...] = (),
                by: str | None = None, force: bool = False) -> Protection:
        """Protect ``label`` (of ``prompt_id``, default every prompt) so that only the authors
        ``allowed`` move it without ``force``. Changing a protection that covers it already
        needs an author it allows, or ``force``."""
        from cycle.store.store import check_label_name

        check_label_name(label)
        by = by or current_author()
        names = tuple(dict.fromkeys(n for n in (clean(a) for a in allowed) if n))
        with self.store.transaction() as db:
            if prompt_id != ALL_PROMPTS:
                self.store._require_prompt(prompt_id)  # a typo would protect nothing
            current = self.of(prompt_id, label) if prompt_id != ALL_PROMPTS else next(
                iter(self._rows("prompt_id = ? AND label = ?", (ALL_PROMPTS, label))), None)
            if current is not None and not current.allows(by) and not force:
                raise refused(current, by, prompt_id=prompt_id, doing="change")
            at = now_iso()
            db.execute(
                f"INSERT INTO protected_labels ({_COLUMNS}) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (prompt_id, label) DO UPDATE SET allowed = excluded.allowed, "
                "protected_by = excluded.protected_by, protected_at = excluded.protected_at",
                (prompt_id, label, json.dumps(list(names), ensure_ascii=False), by, at))
        return Protection(prompt_id=prompt_id, label=label, allowed=names, by=by,
                          at=datetime.fromisoformat(at))

    def unprotect(self, label: str, *, prompt_id: str = ALL_PROMPTS, by: str | None = None,
                  force: bool = False) -> Protection:
        """Lift the protection of ``label`` of ``prompt_id`` (default: of every prompt), which
        needs an author it allows, or ``force``; the protection lifted."""
        by = by or current_author()
        with self.store.transaction() as db:
            own = self._rows("prompt_id = ? AND label = ?", (prompt_id, label))
            if not own:
                raise NotFoundError(f"{describe(Protection(prompt_id=prompt_id, label=label))} "
                                    "is not protected", hint=self._unprotect_hint(prompt_id, label))
            if not own[0].allows(by) and not force:
                raise refused(own[0], by, prompt_id=prompt_id, doing="unprotect")
            db.execute("DELETE FROM protected_labels WHERE prompt_id = ? AND label = ?",
                       (prompt_id, label))
        return own[0]

    def _unprotect_hint(self, prompt_id: str, label: str) -> str:
        """What is protected instead: the commands that would lift a protection of
        ``label``, else every protected label."""
        same = [p for p in self.all() if p.label == label]
        if same:
            return "It is protected " + "; ".join(
                "for every prompt: cycle unprotect " + label if p.prompt_id == ALL_PROMPTS
                else f"for {p.prompt_id}: cycle unprotect {label} --prompt {p.prompt_id}"
                for p in same) + "."
        shown = ", ".join(f"{p.label} ({'every prompt' if p.prompt_id == ALL_PROMPTS else p.prompt_id})"
                          for p in self.all())
        return f"Protected labels: {shown}." if shown else "No label is protected."


#: what a protection refuses: the action as the message says it (of the label), and as its
#: hint does (of "it")
_ACTIONS = {
    "move": ("move {label}", "move it"),
    "change": ("change the protection of {label}", "change its protection"),
    "unprotect": ("unprotect {label}", "lift its protection"),
}


def refused(p: Protection, who: str, *, prompt_id: str, doing: str) -> ProtectedLabelError:
    """The error for ``who`` doing (``move``, ``change``, ``unprotect``) what protection
    ``p`` does not allow them: it names who may, and --force."""
    label = f"'{p.label}' of {prompt_id if prompt_id != ALL_PROMPTS else 'every prompt'}"
    said, short = _ACTIONS[doing]
    how = [f"by {p.by}"] if p.by else []
    if p.prompt_id == ALL_PROMPTS and prompt_id != ALL_PROMPTS:
        how.append("for every prompt")
    detail = f" ({', '.join(how)})" if how else ""
    # only a move leaves a record of its --force (label_moves.forced)
    anyway = ("add --force to move it anyway (the move is recorded as forced, with your name)"
              if doing == "move" else "add --force to do it anyway")
    if p.allowed:
        hint = f"Only {p.who_may()} may {short}: ask them, or {anyway}."
    else:
        hint = f"Nobody may {short} without --force: {anyway}."
    error = ProtectedLabelError(
        f"{who} may not {said.format(label=label)}: the label is protected{detail}", hint=hint)
    error.protection = p
    return error
