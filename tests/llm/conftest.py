"""Fixtures for the model layer: one loopback server per module, reset per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from cycle.events import Event, EventBus, ModelCalled
from cycle.llm.base import ProviderOptions
from cycle.llm.model import Model, ModelServices, RetryPolicy
from cycle.llm.registry import get_model
from cycle.testing import LoopbackServer, clear_scripts

#: fast backoff so retry tests take milliseconds (Retry-After still wins)
FAST_RETRY = RetryPolicy(attempts=3, initial_wait=0.01, max_wait=0.05, jitter=0.0)

@pytest.fixture(scope="module")
def _server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture
def server(_server: LoopbackServer) -> Iterator[LoopbackServer]:
    _server.reset()
    _server.latency = 0.0
    _server.responder = None
    _server.stream_chars, _server.stream_delay = 4, 0.0
    _server.compat = None
    yield _server
    _server.reset()


@pytest.fixture(autouse=True)
def _no_scripts() -> Iterator[None]:
    yield
    clear_scripts()


#: the keywords that are ModelServices' fields
SERVICES = ("cache", "bus", "budget", "pricing", "journal", "forms")


def options_for(name: str, server: LoopbackServer, **kwargs: Any) -> ProviderOptions:
    """ProviderOptions that point ``name``'s provider at the loopback server."""
    if name.startswith("openai:"):
        return server.openai_options(**kwargs)
    return server.gemini_options(**kwargs)


@pytest.fixture
async def make_model(server: LoopbackServer) -> AsyncIterator[Callable[..., Model]]:
    """``make_model(name, **kwargs)``: a real provider on the loopback server, with fast
    retries unless ``retry=`` is given; the services (``cache=``, ``bus=``, ``budget=``,
    ``pricing=``, ``journal=``, ``forms=``) by keyword too. Closed after the test."""
    made: list[Model] = []

    def make(name: str, *, options: dict[str, Any] | None = None, **kwargs: Any) -> Model:
        kwargs.setdefault("retry", FAST_RETRY)
        shared = {k: kwargs.pop(k) for k in SERVICES if k in kwargs}
        model = get_model(name, ModelServices(**shared),
                          options=options_for(name, server, **(options or {})), **kwargs)
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


class Recorder:
    """Collects events from a bus."""

    def __init__(self) -> None:
        self.bus = EventBus()
        self.events: list[Event] = []
        self.bus.subscribe(self.events.append)

    @property
    def calls(self) -> list[ModelCalled]:
        return [e for e in self.events if isinstance(e, ModelCalled)]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
