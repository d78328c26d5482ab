"""Shared fixtures. Tests never reach the internet: provider keys are scrubbed
and base URLs point at the loopback server where a test needs a provider."""

from __future__ import annotations

import pytest

_PROVIDER_VARS = (
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI", "CYCLE_STORE",
)


@pytest.fixture(autouse=True)
def _no_real_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROVIDER_VARS:
        monkeypatch.delenv(name, raising=False)


#: who every test acts as (cycle.authors): the same on every machine, so that recorded
#: authors and the screenshots that show them do not depend on who runs the tests
AUTHOR = "tester"


@pytest.fixture(autouse=True)
def _author(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CYCLE_AUTHOR", AUTHOR)


@pytest.fixture(autouse=True)
def _fresh_compat():
    """What compatible servers were found to accept is learned per process: each test
    starts from nothing (a loopback server's address is shared by a module's tests)."""
    from cycle.llm import compat

    compat.forget()
    yield
    compat.forget()


@pytest.fixture(scope="session")
def postgres():
    """One throw-away PostgreSQL server for the whole session (cycle.testing.postgres).
    Skipped, saying why, where the binaries are missing; under CYCLE_REQUIRE_POSTGRES
    (set by .ci/run once it installed them) that is a failure instead."""
    import os

    from cycle.testing.postgres import ThrowawayPostgres, find_binaries

    missing = find_binaries()
    if isinstance(missing, str):
        if os.environ.get("CYCLE_REQUIRE_POSTGRES"):
            pytest.fail(missing)
        pytest.skip(missing)
    with ThrowawayPostgres() as pg:
        yield pg


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request: pytest.FixtureRequest, tmp_path):
    """Where a store test's store is, once per backend: a SQLite file, then a fresh
    schema of the session's PostgreSQL server."""
    if request.param == "sqlite":
        return tmp_path / ".cycle" / "cycle.db"
    return request.getfixturevalue("postgres").schema_url()
