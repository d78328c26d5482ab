"""Model names to ready models: ``"openai:gpt-4o-mini"`` -> a ``Model`` with retries,
cache, cost, budget and events around the provider (``cycle.llm.providers``)."""

from __future__ import annotations

from cycle.events import EventBus
from cycle.llm.base import GenerateConfig, ProviderOptions
from cycle.llm.batch import BatchSettings
from cycle.llm.budget import Budget
from cycle.llm.cache import ResponseCache
from cycle.llm.journal import CallJournal
from cycle.llm.model import Model, RetryPolicy
from cycle.llm.pricing import PriceTable
from cycle.llm.providers import get_api, parse_model_name, providers, register_provider

__all__ = ["get_api", "get_model", "parse_model_name", "providers", "register_provider"]


def get_model(
    name: str,
    *,
    options: ProviderOptions | None = None,
    cache: ResponseCache | None = None,
    bus: EventBus | None = None,
    budget: Budget | None = None,
    pricing: PriceTable | None = None,
    config: GenerateConfig | None = None,
    role: str = "agent",
    retry: RetryPolicy | None = None,
    journal: CallJournal | None = None,
    batch: BatchSettings | None = None,
) -> Model:
    """A ready ``Model`` for ``"provider:model"``.

    Raises UnknownProviderError for an unknown provider or a name without
    ``provider:``, MissingCredentialsError when the provider's key is not set.
    """
    api = get_api(name, options)
    return Model(api, cache=cache, bus=bus, budget=budget, pricing=pricing, config=config,
                 role=role, retry=retry, journal=journal, batch=batch)
