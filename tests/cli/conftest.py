"""A project whose agent is the real openai SDK against the loopback server, in the
current folder: ``loopback_project(prompt, cases, config)`` writes the three files
(``BASE`` in the config becomes the server's URL)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cycle.testing import LoopbackServer
from tests.stored import copied


@pytest.fixture
def server():
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture
def loopback_project(tmp_path, server, monkeypatch) -> Callable[[str, str, str], Path]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    monkeypatch.chdir(tmp_path)

    def make(prompt: str, cases: str, config: str) -> Path:
        (tmp_path / "prompts").mkdir()
        (tmp_path / "cases").mkdir()
        (tmp_path / "prompts" / "support.yaml").write_text(prompt)
        (tmp_path / "cases" / "all.yaml").write_text(cases)
        (tmp_path / "cycle.yaml").write_text(config.replace("BASE", server.openai_base_url))
        return tmp_path

    return make


@pytest.fixture
def quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """examples/quickstart copied (no store, no reports) and made the current folder."""
    project = copied("quickstart", tmp_path)
    monkeypatch.chdir(project)
    return project
