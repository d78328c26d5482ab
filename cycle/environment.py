"""The environment API keys come from: the process's, and a ``.env`` file beside the config."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cycle.errors import ConfigError

#: base-URL variable -> the key variables sent to it
_ROUTES = {
    "OPENAI_BASE_URL": ("OPENAI_API_KEY",),
    "GOOGLE_GEMINI_BASE_URL": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
#: hosts a shell's key may be sent to from a .env's base URL: ``export CYCLE_TRUST_HOSTS=h1,h2``
TRUST_VARIABLE = "CYCLE_TRUST_HOSTS"
_LOCAL = ("localhost", "127.", "::1", "0.0.0.0")


def load_env(directory: str | Path) -> None:
    """Read ``.env`` in ``directory`` into the environment; variables already set win.

    Keys live in the environment or a git-ignored ``.env``, never in cycle.yaml,
    so that no key reaches the store, a report or a log. A ``.env`` (say, of a project
    just cloned) that points a provider at another server while the key would come from
    the shell is refused: the shell's key would go to a host nobody chose for it.
    """
    path = Path(directory) / ".env"
    if path.is_file():
        import io
        import logging

        # only then: it costs 10 ms of start-up
        from dotenv import dotenv_values
        from dotenv.parser import parse_stream

        text = _read(path)
        if _LOADED.get(path.resolve()) == text:
            return  # read already by this process (the CLI, then the command)
        # python-dotenv says of a line it cannot read "could not parse statement starting
        # at line 2", without the file, once a parse: said here once, naming the file
        quiet = logging.getLogger("dotenv.main")
        was, quiet.disabled = quiet.disabled, True
        try:
            values = dotenv_values(stream=io.StringIO(text))
        finally:
            quiet.disabled = was
        _refuse_key_redirect(path, values)
        for binding in parse_stream(io.StringIO(text)):
            if binding.error:
                sys.stderr.write(f"warning: {path}:{binding.original.line}: not NAME=value, "
                                 "skipped\n")
        for name, value in values.items():
            if value is not None and name not in os.environ:  # the environment's win
                os.environ[name] = value
        _LOADED[path.resolve()] = text


#: each .env read, with the text it had: read once a process while it stays the same
_LOADED: dict[Path, str] = {}


def _read(path: Path) -> str:
    """The .env's text; bytes that are not UTF-8, or a NUL (which no variable can hold),
    are a ConfigError naming the line: both were internal errors (UnicodeDecodeError,
    'ValueError: embedded null byte') of every command run beside the file."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read file: {e.strerror}", file=str(path)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})",
                          file=str(path), line=raw.count(b"\n", 0, e.start) + 1,
                          hint="Save the file as UTF-8, or remove it.") from None
    if "\x00" in text:
        raise ConfigError("holds a NUL character, which no variable can hold", file=str(path),
                          line=text.count("\n", 0, text.index("\x00")) + 1)
    return text


def _refuse_key_redirect(path: Path, values: dict[str, str | None]) -> None:
    from urllib.parse import urlsplit

    trusted = {h.strip().lower() for h in os.environ.get(TRUST_VARIABLE, "").split(",") if h}
    for url_variable, keys in _ROUTES.items():
        url = values.get(url_variable)
        if not url or os.environ.get(url_variable):  # the shell's own base URL wins
            continue
        try:
            host = (urlsplit(url).hostname or "").lower()
        except ValueError:
            host = ""
        if host.startswith(_LOCAL) or host in trusted:
            continue
        # the shell's variables win over the .env's: its key is the one that would go
        from_shell = [k for k in keys if os.environ.get(k)]
        if from_shell:
            raise ConfigError(
                f"{path} sets {url_variable} to the host {host or '(unreadable)'}, but "
                f"{from_shell[0]} would come from your shell: your key would be sent there",
                file=str(path), field=url_variable,
                hint=f"If that server should have your key, allow it: export "
                f"{TRUST_VARIABLE}={host}. Otherwise unset {from_shell[0]} in the shell and "
                f"put the key meant for that server in {path.name}, or remove "
                f"{url_variable} from it.")
