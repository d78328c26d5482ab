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
