"""Semantic version numbers of prompt versions: parse, compare, bump."""

from __future__ import annotations

import re
from typing import Literal

Bump = Literal["patch", "minor", "major"]
BUMPS: tuple[str, ...] = ("patch", "minor", "major")
FIRST = "1.0.0"

_SEMVER = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


def is_semver(text: str) -> bool:
    """True for ``1.2.3`` (a leading ``v`` is accepted: ``v1.2.3``)."""
    return bool(_SEMVER.match(text))


def parse(text: str) -> tuple[int, int, int]:
    """``"1.2.3"`` -> ``(1, 2, 3)``; ValueError if it is not MAJOR.MINOR.PATCH."""
    m = _SEMVER.match(text.strip())
    if not m:
        raise ValueError(f"'{text}' is not a version number like 1.2.3")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def normalize(text: str) -> str:
    """``"v1.02.3"`` is not valid; ``"v1.2.3"`` -> ``"1.2.3"``."""
    return "{}.{}.{}".format(*parse(text))


def bump(version: str, kind: str = "patch") -> str:
    """The next version: patch ``1.2.3 -> 1.2.4``, minor ``-> 1.3.0``, major ``-> 2.0.0``."""
    major, minor, patch = parse(version)
    if kind == "patch":
        return f"{major}.{minor}.{patch + 1}"
    if kind == "minor":
        return f"{major}.{minor + 1}.0"
    if kind == "major":
        return f"{major + 1}.0.0"
    raise ValueError(f"unknown bump '{kind}': use one of {', '.join(BUMPS)}")
