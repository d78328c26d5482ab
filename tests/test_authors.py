"""Who is acting (cycle.authors): CYCLE_AUTHOR, else the OS user, else 'unknown'."""

from __future__ import annotations

import getpass

import pytest

from cycle.authors import current_author, on_behalf


def test_the_variable_names_the_author(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CYCLE_AUTHOR", "  Ada   Lovelace \n")
    assert current_author() == "Ada Lovelace"  # one line, as listings show it
    assert on_behalf("cycle") == "cycle (Ada Lovelace)"
    monkeypatch.setenv("CYCLE_AUTHOR", "x" * 500)
    assert len(current_author()) == 100


def test_without_it_the_os_user_then_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CYCLE_AUTHOR", " ")  # blank is not a name
    monkeypatch.setattr(getpass, "getuser", lambda: "ada")
    assert current_author() == "ada"

    def no_name() -> str:
        raise OSError("no user name for this uid")

    monkeypatch.setattr(getpass, "getuser", no_name)
    assert current_author() == "unknown"
