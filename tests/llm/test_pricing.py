"""The price table: lookups, cost arithmetic, overrides, estimates."""

from __future__ import annotations

import pytest

from cycle.errors import ConfigError
from cycle.llm.model import ModelServices
from cycle.llm.pricing import Price, PriceTable
from cycle.records import Usage

TABLE = PriceTable()


@pytest.mark.parametrize(("name", "key"), [
    ("openai:gpt-4o-mini", "gpt-4o-mini"),
    ("openai:gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ("openai:gpt-4o-2024-08-06", "gpt-4o"),
    ("openai:gpt-4.1-nano-2025-04-14", "gpt-4.1-nano"),
    ("openai:gpt-5-mini-2025-08-07", "gpt-5-mini"),
    ("openai:o4-mini-2025-04-16", "o4-mini"),
    ("openai:openai/gpt-4o-mini", "gpt-4o-mini"),  # OpenRouter names
    ("gemini:gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
    ("gemini:gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
    ("gemini:models/gemini-2.0-flash-001", "gemini-2.0-flash"),
    ("gemini:gemini-2.5-pro", "gemini-2.5-pro"),
])
def test_lookup_by_prefix_and_date_suffix(name, key):
    assert TABLE.lookup(name)[1] == key


def test_cost_counts_cached_tokens_at_their_price():
    usage = Usage(input_tokens=1_000_000, cached_input_tokens=200_000, output_tokens=100_000)
    cost = TABLE.cost("openai:gpt-4.1", usage)
    assert cost.usd == pytest.approx(0.8 * 2.00 + 0.2 * 0.50 + 0.1 * 8.00)
    assert not cost.estimated


def test_long_context_tier():
    short = TABLE.cost("gemini:gemini-2.5-pro", Usage(input_tokens=100_000)).usd
    long = TABLE.cost("gemini:gemini-2.5-pro", Usage(input_tokens=300_000)).usd
    assert short == pytest.approx(0.125) and long == pytest.approx(0.75)


def test_unknown_model_uses_fallback_marked_estimated():
    cost = TABLE.cost("openai:my-finetune", Usage(input_tokens=1000, output_tokens=1000))
    assert cost.estimated and cost.usd > 0


def test_offline_and_scripted_are_free_and_exact():
    from cycle.llm.registry import get_model
    from cycle.records import Message
    from cycle.testing import clear_scripts, script

    script("free", "an answer")
    try:
        for name in ("offline:default", "scripted:free"):
            # a price table that would charge a fortune for anything it does not know
            model = get_model(name, ModelServices(
                pricing=TABLE.with_overrides({"*": {"input": 1e6, "output": 1e6}})))
            out = model.generate_sync([Message.user("hello")])
            assert out.cost == 0 and not out.cost_estimated, name
            assert out.usage.input_tokens > 0
    finally:
        clear_scripts()


def test_overrides_and_fallback():
    table = TABLE.with_overrides({
        "openai:gpt-4o-mini": {"input": 1, "output": 1},
        "qwen2.5:7b": Price(input=0.0, output=0.0),
        "*": {"input": 9, "output": 9},
    })
    assert table.cost("openai:gpt-4o-mini", Usage(input_tokens=10**6)).usd == 1
    assert table.cost("openai:qwen2.5:7b", Usage(output_tokens=10**6)).usd == 0
    unknown = table.cost("openai:mystery", Usage(input_tokens=10**6))
    assert unknown.usd == 9 and unknown.estimated
    assert TABLE.cost("openai:gpt-4o-mini", Usage(input_tokens=10**6)).usd == 0.15  # unchanged


def test_bad_override_names_the_field():
    with pytest.raises(ConfigError, match="pricing.gpt-x"):
        TABLE.with_overrides({"gpt-x": {"input": 1}})
