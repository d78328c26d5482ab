"""Every path a command will write, checked before the first model call.

A reports folder that is really a file, a store under a read-only folder, an
events file that is a folder: each would otherwise fail after the whole suite
had run and been paid for. ``check_outputs`` creates the folders a command
would create anyway and writes a probe file in each, so that what is refused
is exactly what would have failed, and says which setting or flag to fix.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from cycle.assemble.config import LoadedConfig
from cycle.errors import ConfigError

#: bytes a command needs free where it writes (the store's journal and log, the reports):
#: below it, a run would fill the disk after it had paid for its calls
MIN_FREE = 16 * 1024 * 1024


def writable_folder(folder: Path, *, what: str, **where: Any) -> None:
    """``folder`` exists (created now if missing), a file can be written in it, and its
    disk has ``MIN_FREE`` bytes free. ``where``: the ConfigError's location (field=the
    flag, or file/line/field)."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"the {what} '{folder}' is a file, not a folder", **where,
                          hint="Remove or rename the file, or choose another folder.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise ConfigError(f"cannot write the {what} in '{folder}': {e.strerror or e}", **where,
                          hint="Choose a folder you can write to, or fix its permissions.") from None
    free = shutil.disk_usage(folder).free
    if free < MIN_FREE:
        raise ConfigError(
            f"only {free / 2**20:.1f} MB free on the disk of the {what} '{folder}'; a run "
            f"needs {MIN_FREE // 2**20} MB there at least", **where,
            hint="Free some space, or choose a folder on another disk.")


def writable_file(path: Path, *, what: str, **where: Any) -> None:
    """``path`` can be created or appended to (its folder is created now if missing)."""
    if path.is_dir():
        raise ConfigError(f"the {what} '{path}' is a folder, not a file", **where,
                          hint="Name a file, e.g. run.jsonl.")
    writable_folder(path.parent, what=f"folder of the {what}", **where)
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"the {what} '{path}' is not writable", **where,
                          hint="Fix its permissions, or choose another file.")


def _setting(loaded: LoadedConfig, *path: str) -> dict[str, Any]:
    """Where a setting is: its line in cycle.yaml, or (left at its default) no line."""
    line = loaded.doc.lines.get(path)
    return {"file": str(loaded.path), "line": line,
            "field": ".".join(path) + ("" if line else " (the default)")}


def _store_setting(loaded: LoadedConfig | None, store: Path) -> dict[str, Any]:
    """Where the store was named: cycle.yaml's ``store:`` or its default beside cycle.yaml
    (so that a message blames neither --store nor CYCLE_STORE when neither was given)."""
    if loaded is not None and not os.environ.get("CYCLE_STORE"):
        if loaded.store is not None and str(loaded.store) == str(store):
            return _setting(loaded, "store")
        if loaded.store is None and Path(store) == loaded.base_dir / ".cycle" / "cycle.db":
            return _setting(loaded, "store")
    return {"field": "--store / CYCLE_STORE"}


def check_outputs(
    loaded: LoadedConfig | None,
    *,
    store: Path,
    reports: Path | None = None,
    reports_flag: bool = False,
    cache: bool = True,
    events: Path | None = None,
) -> None:
    """The store, the reports folder (None: none written), the response cache (when on)
    and the events file can all be written; else a ConfigError naming the setting."""
    from cycle.store.postgres import is_url

    if not is_url(store):  # a database server's room is its own to check
        if loaded is not None and not Path(store).exists():
            from cycle.assemble.config import STORE_PREFIX

            ref = loaded.config.prompt
            if ref.startswith(STORE_PREFIX):  # an empty store would be made, then refused
                raise ConfigError(
                    f"the prompt is {ref}, but there is no store at {store}",
                    file=str(loaded.path), line=loaded.doc.line_of(("prompt",)),
                    field="prompt", hint="Run it where the store that holds the prompt is "
                    "(or point --store / CYCLE_STORE at it), or import the prompt first: "
                    "cycle prompt import FILE.")
        writable_file(store, what="store", **_store_setting(loaded, store))
    if reports is not None:
        where = ({"field": "--report-dir"} if reports_flag or loaded is None
                 else _setting(loaded, "reports"))
        writable_folder(reports, what="reports folder", **where)
    if loaded is not None and cache and loaded.config.cache.enabled:
        writable_file(loaded.resolve_path(loaded.config.cache.path), what="response cache",
                      **_setting(loaded, "cache", "path"))
    if events is not None:
        writable_file(events, what="events file", field="--events")
