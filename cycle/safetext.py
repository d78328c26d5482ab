"""Text from outside made safe for a terminal, in one place.

A provider's error message, a model's answer, an improver's edit, a case id or a file's
contents may hold escape sequences (an OSC title, an OSC 8 link, ``ESC[2J``), a carriage
return that overwrites a line, or bidirectional overrides that reorder it. Printed raw,
they act on the user's terminal. ``printable`` shows each as a visible escape
(``\\x1b``, ``\\r``, ``\\u202e``); ``oneline`` also shows newlines, for a value that
must stay on its line (a case id cannot forge a console line).

``TerminalStream`` applies it to everything a command prints: ``cycle.cli`` puts it in
front of stdout and stderr for the command's run (the TUI writes to the terminal
itself, through Textual, whose text drops control characters).
"""

from __future__ import annotations

import re
from typing import Any, TextIO

#: C0 and C1 controls but tab and newline, DEL, and the bidirectional overrides
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown(m: re.Match[str]) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def printable(text: str, *, oneline: bool = False) -> str:
    """``text`` with every control and escape character shown as a visible escape (tabs
    and newlines kept, unless ``oneline``)."""
    pattern = _UNSAFE_LINE if oneline else _UNSAFE
    return pattern.sub(_shown, text) if pattern.search(text) else text


def json_printable(text: str) -> str:
    """JSON text (written with ``ensure_ascii=False``) with each character ``printable``
    would escape written as a JSON escape (``\\u0085``) instead: the same JSON, and
    nothing left for the terminal stream to turn into a ``\\x85`` no JSON reader takes.
    (JSON escapes every other control character itself, and the characters outside its
    strings are ASCII.)"""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _UNSAFE.search(text) else text


#: what cycle itself writes to redraw the progress line on a terminal
REDRAW = "\r\x1b[2K"


class TerminalStream:
    """A text stream whose writes are made ``printable``, every one of them (cycle's own
    line redraw goes to the stream behind it, ``raw``: a write that began with the redraw
    was let through, and so was an outsider's text that began with it)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            return self._stream.write(text)
        return self._stream.write(printable(text))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, buffer...
        return getattr(self._stream, name)


def raw(stream: TextIO) -> TextIO:
    """The terminal behind ``stream``, for text cycle has made printable itself and then
    styled (a coloured diff): its colours are cycle's, not an outsider's."""
    return stream._stream if isinstance(stream, TerminalStream) else stream


def exact(stream: TextIO) -> TextIO:
    """Where data a command prints goes to be kept as it is (a prompt file's text): the
    stream behind the filter when that is no terminal (a file, a pipe), the filter on a
    terminal."""
    if isinstance(stream, TerminalStream) and not stream.isatty():
        return stream._stream
    return stream
