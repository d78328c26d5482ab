"""The stored id a person means by part of it: a unique prefix (``run-20261122-1643``) or
suffix (the random ``7dd7d1``), as runs and cycles are named on the command line."""

from __future__ import annotations

from typing import Any

from cycle.errors import NotFoundError

#: ids a lookup reads at most: enough to show several that match
_SHOWN = 5


def by_part(db: Any, table: str, ref: str, *, what: str, hint: str) -> str:
    """The one id of ``table`` (runs, cycles) that is ``ref`` or starts or ends with it;
    NotFoundError naming them when several do, or with ``hint`` when none does."""
    if db.execute(f"SELECT 1 FROM {table} WHERE id = ?", (ref,)).fetchone() is not None:
        return ref
    like = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    matches = [r[0] for r in db.execute(
        f"SELECT id FROM {table} WHERE id LIKE ? ESCAPE '\\' OR id LIKE ? ESCAPE '\\' "
        "ORDER BY started_at DESC LIMIT ?", (like + "%", "%" + like, _SHOWN + 1)).fetchall()]
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(matches[:_SHOWN]) + (", ..." if len(matches) > _SHOWN else "")
        raise NotFoundError(f"'{ref}' matches several {what}s: {shown}",
                            hint="Give more of the id.")
    raise NotFoundError(f"no {what} '{ref}' in the store", hint=hint)
