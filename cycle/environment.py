"""The environment API keys come from: the process's, and a ``.env`` file beside the config."""

from __future__ import annotations

from pathlib import Path


def load_env(directory: str | Path) -> None:
    """Read ``.env`` in ``directory`` into the environment; variables already set win.

    Keys live in the environment or a git-ignored ``.env``, never in cycle.yaml,
    so that no key reaches the store, a report or a log.
    """
    path = Path(directory) / ".env"
    if path.is_file():
        from dotenv import load_dotenv  # only then: it costs 10 ms of start-up

        load_dotenv(path, override=False)
