"""The user's regular expressions, matched with a time limit.

A pattern from a config, a case, a mock or an eval file (``regex`` checks, ``match:
regex`` arguments, ``$regex`` in a query, tool-forge's ``responseMatches`` and
``matches``) may backtrack catastrophically: ``^(a+)+$`` against forty a's and a b
takes longer than the universe, and Python's ``re`` holds the GIL while it tries,
so the whole run stops with it. The ``regex`` module (re's syntax, ``V0``) matches
with a timeout: a pattern that takes longer is an error of that iteration, naming
the pattern, never a hang.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cycle.errors import EvalError

if TYPE_CHECKING:
    import regex

#: seconds one match may take
TIMEOUT = 1.0


def __getattr__(name: str) -> Any:
    """``IGNORECASE``, ``MULTILINE``, ``Pattern`` and ``error`` (what a bad pattern
    raises): regex's own, imported by the first use (5 ms of a start-up otherwise, for
    every run, whether or not it has a pattern)."""
    if name in ("IGNORECASE", "MULTILINE", "Pattern", "error"):
        import regex

        return getattr(regex, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def compile_pattern(pattern: str, flags: int = 0) -> regex.Pattern[str]:
    """``pattern`` compiled as ``re`` would read it; a bad one raises ``error``."""
    import regex

    return regex.compile(pattern, flags | regex.V0)


def search(pattern: str | regex.Pattern[str], text: str, flags: int = 0
           ) -> regex.Match[str] | None:
    """``pattern.search(text)``, stopped after ``TIMEOUT`` seconds with an EvalError."""
    compiled = compile_pattern(pattern, flags) if isinstance(pattern, str) else pattern
    try:
        return compiled.search(text, timeout=TIMEOUT)
    except TimeoutError:
        raise EvalError(
            f"the pattern /{compiled.pattern}/ took longer than {TIMEOUT:g} s on "
            f"{len(text):,} characters (it backtracks without end: simplify it, e.g. "
            "(a+)+ -> a+)") from None
