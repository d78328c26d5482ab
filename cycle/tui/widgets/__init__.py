"""cycle.tui.widgets."""

from __future__ import annotations

from typing import Any, TypeVar

from rich.text import Text

T = TypeVar("T")


def plain(value: Any) -> Any:
    """A table cell or line that came from outside (a case id, an improver's edit, a
    version message, a judge's reasoning) as literal text: Textual and Rich read a plain
    str as markup, where ``[/b]`` is an error that stops the app and ``[link=...]`` a
    link nobody wrote. Anything not a str passes as it is."""
    return Text(value) if isinstance(value, str) else value


def masked(value: T, secrets: tuple[str, ...] | None = None) -> T:
    """``value`` as read from the store (an iteration's result, a run's row, an output to
    label) with the environment's keys masked: ``scrub`` with ``environment_secrets()``
    (read here unless given), the masking cycle applies before it stores what code it did
    not write says. A store written before that masking existed may hold them raw; the
    screens show it masked without rewriting it. A record is copied only when it held one."""
    from pydantic import BaseModel

    from cycle.llm.http import environment_secrets, scrub

    if secrets is None:
        secrets = environment_secrets()
    if not secrets:
        return value
    if isinstance(value, BaseModel):
        data = value.model_dump()
        clean = scrub(data, secrets)
        return value if clean is data else type(value).model_validate(clean)
    return scrub(value, secrets)  # type: ignore[no-any-return]


def model_name(name: str | None) -> str | None:
    """A run's agent or judge as shown: an HTTP endpoint's URL without its user, password
    and token (``safe_url``), which stores written before cycle dropped them still hold."""
    if name and name.startswith(("http://", "https://")):
        from cycle.llm.http import safe_url

        return safe_url(name)
    return name
