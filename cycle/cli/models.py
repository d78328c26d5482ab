"""``cycle models``: the model providers and the price table."""

from __future__ import annotations

import json
import os

import click

from cycle.llm.pricing import DEFAULT_TABLE
from cycle.llm.registry import providers

#: provider -> (environment variables that hold its key, what it is)
_PROVIDER_INFO: dict[str, tuple[tuple[str, ...], str]] = {
    "openai": (("OPENAI_API_KEY",), "OpenAI, or any OpenAI-compatible server via OPENAI_BASE_URL"),
    "gemini": (("GEMINI_API_KEY", "GOOGLE_API_KEY"), "Google Gemini Developer API"),
    "offline": ((), "deterministic, no network (results are not a real model's)"),
    "scripted": ((), "scripted outputs, for tests (cycle.testing.script)"),
}


def _provider_rows() -> list[dict[str, object]]:
    rows = []
    for name in providers():
        variables, description = _PROVIDER_INFO.get(name, ((), "registered by a plugin"))
        ready = not variables or any(os.environ.get(v) for v in variables)
        rows.append({
            "provider": name,
            "description": description,
            "key_variables": list(variables),
            # never the key itself: only whether one is set
            "key_set": ready,
            "example": f"{name}:{_EXAMPLES.get(name, 'model')}",
        })
    return rows


_EXAMPLES = {"openai": "gpt-4o-mini", "gemini": "gemini-2.5-flash", "offline": "default",
             "scripted": "name"}


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def models(as_json: bool) -> None:
    """List model providers and the price table (USD per million tokens)."""
    provider_rows = _provider_rows()
    price_rows = DEFAULT_TABLE.rows()
    if as_json:
        click.echo(json.dumps({"providers": provider_rows, "prices": price_rows,
                               "unit": "USD per 1M tokens"}, indent=2))
        return
    click.echo("Providers (name a model as provider:model)")
    for row in provider_rows:
        variables = " or ".join(row["key_variables"]) or "no key needed"  # type: ignore[arg-type]
        status = "ready" if row["key_set"] else f"set {variables}"
        if not row["key_variables"]:
            status = "ready"
        click.echo(f"  {row['provider']:<9} {row['example']:<26} {status:<38} {row['description']}")
    click.echo("")
    click.echo("Prices, USD per 1M tokens (unknown models are priced at the fallback, "
               "marked estimated)")
    click.echo(f"  {'model':<24} {'input':>8} {'cached':>8} {'output':>8}")
    for row in price_rows:
        click.echo(f"  {row['model']:<24} {row['input']:>8.3f} {row['cached_input']:>8.4f} "
                   f"{row['output']:>8.2f}")
    fb = DEFAULT_TABLE.fallback
    click.echo(f"  {'(fallback, estimated)':<24} {fb.input:>8.3f} "
               f"{(fb.cached_input if fb.cached_input is not None else fb.input):>8.4f} "
               f"{fb.output:>8.2f}")
