"""Who is acting: the name recorded with every version, label move, review decision and
human label.

``current_author()`` is ``$CYCLE_AUTHOR`` (from the shell, or the project's git-ignored
``.env``, which the CLI loads at start), else the operating system's user name, else
``"unknown"``. It is not a cycle.yaml setting on purpose: cycle.yaml is shared in git,
so a name written there would be every teammate's.

What cycle does by itself is recorded on a person's behalf, as ``agent (person)``: a
cycle's candidate versions and its head moves are by ``cycle (alice)`` when alice ran
``cycle improve``; the headless review policy's decisions are by ``policy:auto (alice)``.
So the history says both that no person wrote the text or chose the move, and whose
command did.
"""

from __future__ import annotations

import getpass
import os

#: the environment variable naming the person at the keyboard
AUTHOR_VARIABLE = "CYCLE_AUTHOR"
#: what the improvement loop is recorded as (on a person's behalf: ``cycle (alice)``)
LOOP = "cycle"
#: when no name can be found at all
UNKNOWN = "unknown"
#: a name is a label in listings, not a document: longer ones are cut
MAX_LENGTH = 100


def current_author() -> str:
    """Who is acting: ``$CYCLE_AUTHOR``, else the OS user, else ``"unknown"``."""
    name = clean(os.environ.get(AUTHOR_VARIABLE, ""))
    if name:
        return name
    try:
        name = clean(getpass.getuser())
    except (KeyError, OSError):  # no name for this uid (some containers)
        name = ""
    return name or UNKNOWN


def on_behalf(agent: str, person: str | None = None) -> str:
    """``agent (person)``: what ``agent`` did automatically for ``person`` (default: the
    current author), e.g. ``cycle (alice)``."""
    return f"{agent} ({person or current_author()})"


def clean(name: str) -> str:
    """A name as stored: one line, no surrounding blanks, at most MAX_LENGTH characters."""
    return " ".join(name.split())[:MAX_LENGTH]
