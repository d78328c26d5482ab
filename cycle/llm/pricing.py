"""What a call cost: a price table in USD per million tokens.

Prices are the providers' published list prices for standard (non-batch)
text tokens, as of late 2025. A user overrides or adds entries with
``PriceTable.with_overrides({...})`` (``pricing:`` in cycle.yaml). A model
the table does not know is priced with the fallback and the cost is marked
*estimated* everywhere it is shown. A provider that is not a real model
(``ModelAPI.offline``) costs nothing, and that is exact: ``Model`` does not
price its calls.

Lookup: the exact name, else the name with a vendor prefix (``openai/``,
``models/``) and a date or ``-latest`` suffix removed, else the longest table
key the name starts with at a ``-`` boundary, so ``gpt-4o-mini-2024-07-18``
finds ``gpt-4o-mini`` (not ``gpt-4o``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from cycle.errors import ConfigError
from cycle.records import Usage


class Price(Struct, frozen=True):
    """USD per million tokens. ``cached_input`` None means: same as ``input``.

    ``long_context`` (with ``long_context_threshold`` prompt tokens) is the
    higher tier some models charge for long prompts (gemini-2.5-pro above 200k).
    """

    input: float
    output: float
    cached_input: float | None = None
    long_context_threshold: int | None = None
    long_context: Price | None = None

    def cost(self, usage: Usage) -> float:
        """USD for ``usage``."""
        price = self
        if (
            self.long_context is not None
            and self.long_context_threshold is not None
            and usage.input_tokens > self.long_context_threshold
        ):
            price = self.long_context
        cached = min(usage.cached_input_tokens, usage.input_tokens)
        cached_price = price.input if price.cached_input is None else price.cached_input
        return (
            (usage.input_tokens - cached) * price.input
            + cached * cached_price
            + usage.output_tokens * price.output
        ) / 1_000_000

    @classmethod
    def parse(cls, value: Price | Mapping[str, Any], *, name: str = "") -> Price:
        """A Price from a Price or a mapping ``{input, output, cached_input?}``."""
        if isinstance(value, Price):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"price for {name!r} must be a mapping with input and output (USD per 1M tokens)",
                field=f"pricing.{name}",
            )
        unknown = set(value) - {"input", "output", "cached_input"}
        if unknown or "input" not in value or "output" not in value:
            raise ConfigError(
                f"price for {name!r} needs input and output (and optionally cached_input), "
                f"in USD per million tokens; got {sorted(value)}",
                field=f"pricing.{name}",
            )
        try:
            return cls(
                input=float(value["input"]),
                output=float(value["output"]),
                cached_input=None if value.get("cached_input") is None else float(value["cached_input"]),
            )
        except (TypeError, ValueError) as e:
            raise ConfigError(f"price for {name!r} is not a number: {e}", field=f"pricing.{name}") from e


class Cost(Struct, frozen=True):
    """The cost of one call, and whether the price was a guess."""

    usd: float
    estimated: bool = False


def _p(input: float, cached: float | None, output: float, **kw: Any) -> Price:
    return Price(input=input, cached_input=cached, output=output, **kw)


#: the built-in table, model name -> price
DEFAULT_PRICES: dict[str, Price] = {
    # OpenAI
    "gpt-5": _p(1.25, 0.125, 10.00),
    "gpt-5-mini": _p(0.25, 0.025, 2.00),
    "gpt-5-nano": _p(0.05, 0.005, 0.40),
    "gpt-5-chat": _p(1.25, 0.125, 10.00),
    "gpt-4.1": _p(2.00, 0.50, 8.00),
    "gpt-4.1-mini": _p(0.40, 0.10, 1.60),
    "gpt-4.1-nano": _p(0.10, 0.025, 0.40),
    "gpt-4o": _p(2.50, 1.25, 10.00),
    "gpt-4o-mini": _p(0.15, 0.075, 0.60),
    "gpt-4-turbo": _p(10.00, None, 30.00),
    "gpt-3.5-turbo": _p(0.50, None, 1.50),
    "o1": _p(15.00, 7.50, 60.00),
    "o1-mini": _p(1.10, 0.55, 4.40),
    "o3": _p(2.00, 0.50, 8.00),
    "o3-mini": _p(1.10, 0.55, 4.40),
    "o4-mini": _p(1.10, 0.275, 4.40),
    # Google Gemini (Developer API, paid tier, text)
    "gemini-2.5-pro": _p(
        1.25, 0.125, 10.00,
        long_context_threshold=200_000, long_context=_p(2.50, 0.25, 15.00),
    ),
    "gemini-2.5-flash": _p(0.30, 0.03, 2.50),
    "gemini-2.5-flash-lite": _p(0.10, 0.01, 0.40),
    "gemini-2.0-flash": _p(0.10, 0.025, 0.40),
    "gemini-2.0-flash-lite": _p(0.075, None, 0.30),
    "gemini-1.5-pro": _p(1.25, 0.3125, 5.00),
    "gemini-1.5-flash": _p(0.075, 0.01875, 0.30),
}

#: what an unknown model is priced at (a mid-range model): marked estimated
DEFAULT_FALLBACK = _p(2.50, 1.25, 10.00)

_VENDOR_PREFIX = re.compile(r"^(?:models/|[a-z0-9_.-]+/)", re.IGNORECASE)
_SUFFIX = re.compile(r"(?:-\d{4}-\d{2}-\d{2}|-\d{8}|-\d{2}-\d{2}|-\d{4}|-latest|-exp)$")


class PriceTable(Struct, frozen=True):
    """Model name -> Price, with a fallback for unknown models."""

    prices: Mapping[str, Price] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    fallback: Price = DEFAULT_FALLBACK

    def with_overrides(
        self,
        overrides: Mapping[str, Price | Mapping[str, Any]],
        *,
        fallback: Price | Mapping[str, Any] | None = None,
    ) -> PriceTable:
        """A new table with ``overrides`` (name -> Price or ``{input, output, cached_input}``).

        A key may be ``provider:model`` or a bare model name; ``"*"`` sets the fallback.
        """
        prices = dict(self.prices)
        new_fallback = self.fallback if fallback is None else Price.parse(fallback, name="*")
        for name, value in overrides.items():
            if name == "*":
                new_fallback = Price.parse(value, name="*")
                continue
            prices[_override_key(name)] = Price.parse(value, name=name)
        return replace(self, prices=prices, fallback=new_fallback)

    def lookup(self, model: str) -> tuple[Price | None, str | None]:
        """The price of ``model`` ("provider:name" or "name") and the key that matched."""
        name = _bare(model).lower()
        if name in self.prices:
            return self.prices[name], name
        name = _VENDOR_PREFIX.sub("", name)
        while True:
            if name in self.prices:
                return self.prices[name], name
            stripped = _SUFFIX.sub("", name)
            if stripped == name:
                break
            name = stripped
        best = max(
            (key for key in self.prices if name.startswith(key + "-")),
            key=len,
            default=None,
        )
        if best is not None:
            return self.prices[best], best
        return None, None

    def cost(self, model: str, usage: Usage) -> Cost:
        """The cost of a call of ``model`` ("provider:name") that used ``usage``."""
        price, _ = self.lookup(model)
        if price is None:
            return Cost(self.fallback.cost(usage), estimated=True)
        return Cost(price.cost(usage), estimated=False)

    def rows(self) -> list[dict[str, Any]]:
        """The table as rows (for ``cycle models``)."""
        return [
            {
                "model": name,
                "input": price.input,
                "cached_input": price.input if price.cached_input is None else price.cached_input,
                "output": price.output,
            }
            for name, price in sorted(self.prices.items())
        ]


def _bare(model: str) -> str:
    """The model part of "provider:model" (the model may itself hold ':', as Ollama tags do)."""
    return model.split(":", 1)[1] if ":" in model else model


def _override_key(name: str) -> str:
    # "openai:gpt-4o" names a provider; "llama3.1:8b" is a bare model with a tag
    from cycle.llm.providers import providers

    prefix, sep, rest = name.partition(":")
    return (rest if sep and prefix in providers(internal=True) else name).lower()


#: the table used when none is given
DEFAULT_TABLE = PriceTable()
