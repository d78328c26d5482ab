"""Providers by name: ``"openai:gpt-4o-mini"`` -> the bare ``ModelAPI`` that calls it.

Providers are registered by name as ``"module:attribute"`` strings and
imported on first use, so that an SDK loads only when a model of its
provider is asked for. A factory takes ``(model_name, options)`` and returns
a ``ModelAPI``. Besides the two built in (openai, gemini), packages register
providers through the ``cycle.providers`` entry-point group, read once, when
a name is not known: that is how the offline world and the scripted model of
the test support (and any third party's provider) are found, without this
layer knowing them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from cycle.errors import ModelError, UnknownProviderError
from cycle.llm.base import ModelAPI, ProviderOptions

ProviderFactory = Callable[[str, ProviderOptions], ModelAPI]

#: provider name -> factory, or "module:attribute" of a factory (imported lazily)
_PROVIDERS: dict[str, ProviderFactory | str] = {
    "openai": "cycle.llm.openai:OpenAIAPI",
    "gemini": "cycle.llm.gemini:GeminiAPI",
}

#: the entry-point group through which packages register providers
ENTRY_POINT_GROUP = "cycle.providers"
_entry_points_read = False

#: the pip package each lazily imported SDK comes from
_SDK_PACKAGES = {"openai": "openai", "google": "google-genai"}


def register_provider(name: str, factory: ProviderFactory | str) -> None:
    """Make ``name:<model>`` resolve through ``factory(model_name, options)``.

    ``factory`` may be a ``"module:attribute"`` string, imported on first use.
    """
    if not name or ":" in name:
        raise ValueError(f"a provider name must be non-empty and contain no ':', got {name!r}")
    _PROVIDERS[name] = factory


def _read_entry_points() -> None:
    """Register the providers installed packages declare (once; explicit registrations win)."""
    global _entry_points_read
    if _entry_points_read:
        return
    _entry_points_read = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _PROVIDERS.setdefault(ep.name, ep.value)


#: providers for cycle's own tests, registered like any other but not offered to users
INTERNAL = frozenset({"scripted"})


def providers(*, internal: bool = False) -> list[str]:
    """The registered provider names, sorted (those for cycle's own tests only with
    ``internal``: a user's list of choices does not name them)."""
    _read_entry_points()
    return sorted(p for p in _PROVIDERS if internal or p not in INTERNAL)


def is_provider(name: str) -> bool:
    """Whether a provider is registered as ``name`` (the installed packages' read only when
    it is none of cycle's own)."""
    if name in _PROVIDERS:
        return True
    _read_entry_points()
    return name in _PROVIDERS


def parse_model_name(name: str) -> tuple[str, str]:
    """Split ``"provider:model"``; a clear error for any other form."""
    provider, sep, model = name.partition(":")
    provider, model = provider.strip(), model.strip()
    if not sep or not provider or not model:
        guess = _guess_provider(name.strip())
        hint = f" Did you mean '{guess}:{name.strip()}'?" if guess else ""
        raise UnknownProviderError(
            f"model name {name!r} must have the form provider:model, "
            f"e.g. openai:gpt-4o-mini, gemini:gemini-2.5-flash or offline:default.{hint}",
            hint=f"Known providers: {', '.join(providers())}.",
        )
    return provider, model


def _guess_provider(model: str) -> str | None:
    lower = model.lower()
    if lower.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
        return "openai"
    if lower.startswith("gemini"):
        return "gemini"
    return None


def _factory(provider: str, full_name: str) -> ProviderFactory:
    target = _PROVIDERS.get(provider)
    if target is None:
        _read_entry_points()
        target = _PROVIDERS.get(provider)
    if target is None:
        raise UnknownProviderError(
            f"unknown model provider {provider!r} in {full_name!r}. "
            f"Known providers: {', '.join(providers())}.",
            hint="Write the model as provider:model, e.g. openai:gpt-4o-mini.",
        )
    if not isinstance(target, str):
        return target
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        missing = (e.name or "").split(".")[0]
        package = _SDK_PACKAGES.get(missing)
        if package:
            raise ModelError(
                f"provider {provider!r} needs the {package!r} package, which is not installed",
                hint=f"pip install {package}",
            ) from e
        raise ModelError(f"provider {provider!r} is not available: {e}") from e
    factory = getattr(module, attr)
    _PROVIDERS[provider] = factory
    return factory


def get_api(name: str, options: ProviderOptions | None = None) -> ModelAPI:
    """The bare provider model for ``"provider:model"`` (no retries, cache or cost)."""
    provider, model = parse_model_name(name)
    return _factory(provider, name)(model, options or ProviderOptions())


def known_provider(name: str) -> None:
    """Raise UnknownProviderError unless ``"provider:model"`` names a known provider (no
    key asked for: a dry run sends nothing)."""
    provider, _ = parse_model_name(name)
    _factory(provider, name)


def is_offline(name: str) -> bool:
    """Whether ``"provider:model"`` is not a real model (offline, scripted): it costs
    nothing and needs no key."""
    provider, _ = parse_model_name(name)
    factory = _factory(provider, name)
    return isinstance(factory, type) and issubclass(factory, ModelAPI) and factory.offline


def batch_price(name: str) -> float:
    """The share of the list price a call of ``"provider:model"`` costs in a batch job:
    1.0 for a provider without a batch API (its calls go live) or one that is not a real
    model (it costs nothing either way)."""
    provider, _ = parse_model_name(name)
    factory = _factory(provider, name)
    if not isinstance(factory, type) or not issubclass(factory, ModelAPI) or factory.offline \
            or factory.batch_submit is ModelAPI.batch_submit:
        return 1.0
    return factory.batch_price
