"""``cycle doctor``: what a model's endpoint accepts, and the settings that fit it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cycle import aio
from cycle.cli import FiniteFloat
from cycle.errors import ConfigError

#: the cap of a doctor's calls when cycle.yaml sets no budget (USD)
DOCTOR_BUDGET = 0.05


@click.command("doctor")
@click.argument("config", required=False, type=click.Path(path_type=Path))
@click.option("--model", "model_name", help="The model to probe (provider:model, or a model "
              "of --provider); default: cycle.yaml's agent.")
@click.option("--provider", type=click.Choice(["openai", "gemini"]), default=None,
              help="The provider of --model when it names none.")
@click.option("--budget", type=FiniteFloat(min=0), default=None, help="A cap in USD on the probes' calls "
              f"(default: cycle.yaml's budget, at most {DOCTOR_BUDGET}).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
def doctor(config: Path | None, model_name: str | None, provider: str | None,
           budget: float | None, as_json: bool) -> None:
    """Probe a model's endpoint: what works, and the settings that fit it.

    A few tiny calls (a plain answer, structured output in each form, a tool call, usage,
    streaming, latency); prints what works, what cycle does about what does not, and the
    settings to write. Costs at most a few cents on a paid API, under a budget. Exit 1
    when the model cannot run a judged suite (no answer, or no structured form works)."""
    from cycle.assemble.config import load_config
    from cycle.assemble.suite import agent_model_name, price_table, provider_options
    from cycle.llm.budget import Budget
    from cycle.llm.doctor import diagnose, planned_calls

    if config is None and Path("cycle.yaml").exists():
        config = Path("cycle.yaml")
    loaded = load_config(config) if config is not None else None
    name = model_name
    if name and ":" not in name:
        if provider is None:
            raise click.UsageError(f"--model {name}: name its provider (openai:{name}) or "
                                   "give --provider")
        name = f"{provider}:{name}"
    if name is None and loaded is not None:
        name = agent_model_name(loaded, None)
    if name is None:
        raise ConfigError("no model to probe: give --model (e.g. openai:gpt-4o-mini), or run "
                          "it beside a cycle.yaml whose agent is a model", field="--model")
    if name.startswith(("offline:", "scripted:")):
        raise click.UsageError(f"{name} is cycle's own stand-in model: there is no endpoint "
                               "to probe")
    options = provider_options(loaded, name) if loaded is not None else None
    cap = budget if budget is not None else min(
        DOCTOR_BUDGET, (loaded.config.budget if loaded and loaded.config.budget else DOCTOR_BUDGET))
    if not as_json:
        click.echo(f"cycle doctor: up to {planned_calls(name, False)} tiny calls to {name}; on a "
                   f"paid API at most ${cap:g} (the cap).")
    result = aio.run(diagnose(name, options, budget=Budget(cap),
                              pricing=price_table(loaded) if loaded is not None else None))
    if as_json:
        click.echo(json.dumps({
            "model": result.model, "endpoint": result.endpoint, "usable": result.usable,
            "probes": [{"name": p.name, "ok": p.ok, "detail": p.detail, "latency": p.latency}
                       for p in result.probes],
            "notes": result.notes, "settings": result.settings, "spent": result.spent},
            indent=2))
    else:
        click.echo(f"{result.model} at {result.endpoint}\n")
        for p in result.probes:
            mark = {True: "ok", False: "no", None: "-"}[p.ok]
            click.echo(f"  {p.name:<30} {mark:<3} {p.detail}")
        if result.notes:
            click.echo("")
            for note in result.notes:
                click.echo(f"- {note}")
        if result.settings:
            click.echo("\nsettings that fit (cycle.yaml):")
            for key, value in result.settings.items():
                click.echo(f"  {key}: {value}")
        click.echo(f"\nspent ${result.spent:.4f}")
    if not result.usable:
        raise SystemExit(1)
