"""Model names to ready models: ``"openai:gpt-4o-mini"`` -> a ``Model`` with retries,
cache, cost, budget and events around the provider (``cycle.llm.providers``)."""

from __future__ import annotations

from cycle.llm.base import GenerateConfig, ProviderOptions
from cycle.llm.batch import BatchSettings
from cycle.llm.model import NO_SERVICES, Model, ModelServices, RetryPolicy
from cycle.llm.providers import get_api, parse_model_name, providers, register_provider

__all__ = ["get_api", "get_model", "parse_model_name", "providers", "register_provider"]


def get_model(
    name: str,
    services: ModelServices = NO_SERVICES,
    *,
    options: ProviderOptions | None = None,
    config: GenerateConfig | None = None,
    role: str = "agent",
    retry: RetryPolicy | None = None,
    batch: BatchSettings | None = None,
) -> Model:
    """A ready ``Model`` for ``"provider:model"``, sharing ``services`` (cache, events,
    budget, prices, journal) with the other models of its run.

    Raises UnknownProviderError for an unknown provider or a name without
    ``provider:``, MissingCredentialsError when the provider's key is not set.
    """
    return Model(get_api(name, options), services, config=config, role=role, retry=retry,
                 batch=batch)
