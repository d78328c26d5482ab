"""``cycle import adk`` and ``cycle export adk``: Google ADK EvalSets in and out
(``cycle.formats.adk`` says how the fields map)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cycle.cli import CliContext, FiniteFloat
from cycle.errors import ConfigError
from cycle.words import plural


@click.group("import")
def import_group() -> None:
    """Turn other tools' eval files into cycle case files."""


@click.group("export")
def export_group() -> None:
    """Write cycle's cases, or a run's recorded traces, in other tools' formats."""


@import_group.command("adk")
@click.argument("evalset", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The case file to write (YAML); it must not exist.")
def import_adk(evalset: Path, out: Path) -> None:
    """Write the eval cases of an ADK EVALSET as a cycle case file: the user turns, the
    expected final response, the session state, and the expected tool uses as trajectory
    checks."""
    from cycle.cases import append_to_case_file
    from cycle.formats.adk import cases_from_evalset, load_evalset

    if out.exists():
        raise ConfigError(f"{out} exists; cycle does not overwrite a case file",
                          field="--out", hint="Choose a new file, or remove that one.")
    cases = cases_from_evalset(load_evalset(evalset))
    append_to_case_file(out, cases)  # a new file, which must read back as valid cases
    click.echo(f"wrote {len(cases)} case{'s' * (len(cases) != 1)} to {out}; "
               "add it to cases: in cycle.yaml")


@export_group.command("adk")
@click.argument("config", type=click.Path(path_type=Path), default="cycle.yaml", required=False)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The EvalSet file: created, or its eval cases appended to.")
@click.option("--run", "run_id", metavar="RUN_ID",
              help="Export this stored run's recorded traces (each case's representative "
              "iteration) instead of the suite's cases.")
@click.pass_context
def export_adk(ctx: click.Context, config: Path, out: Path, run_id: str | None) -> None:
    """Append the cases of CONFIG's suite (or, with --run, a run's recorded traces) to an
    ADK EvalSet file."""
    from cycle.formats.adk import append_cases, evalset_case, evalset_case_from_trace

    if run_id is not None:
        from cycle.evals.results import load_run
        from cycle.store import Store

        obj = ctx.find_object(CliContext) or CliContext()
        from cycle.store.masking import MaskedRunLog

        with Store.open(obj.store_path(), create=False) as store:
            # an older store may hold keys raw: exported masked (cycle.store.masking)
            result = load_run(MaskedRunLog(store), store.runs.resolve(run_id))
            cases = [evalset_case_from_trace(c.representative, c.case_id)
                     for c in result.cases.values() if c.representative is not None]
        name = result.prompt_id or result.agent_model or result.run_id
    else:
        from cycle.agents.agent import prompt_messages
        from cycle.assemble.config import load_config
        from cycle.assemble.suite import load_suite_cases
        from cycle.cli.run import stored_prompt

        loaded = load_config(config)
        suite = load_suite_cases(loaded)
        with stored_prompt(loaded) as prompt:
            cases = [evalset_case(c, prompt_messages(prompt, c)[-1].content) for c in suite]
            name = prompt.id
    evalset = append_cases(out, cases, name=name)
    click.echo(f"appended {len(cases)} eval case{'s' * (len(cases) != 1)} to {out} "
               f"({evalset.eval_set_id}: {len(evalset.eval_cases)} in all)")


@export_group.command("otel")
@click.argument("run_id")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the traces as OTLP JSON to this file.")
@click.option("--endpoint", default=None, metavar="URL",
              help="Send them to an OpenTelemetry collector over OTLP/HTTP (e.g. "
              "http://localhost:4318).")
# bounded and finite: inf (or 1e300) overflowed the deadline into an internal error
@click.option("--timeout", type=FiniteFloat(min=0.1, max=3600), default=10.0,
              show_default=True, help="Seconds the collector has to take them (retries "
              "included; at most an hour).")
@click.option("--content", is_flag=True,
              help="Include what was said: the messages, tool arguments and results, and each "
              "case's input (the conventions' opt-in content attributes; what cycle import "
              "otel reads back into cases).")
def export_otel(run_id: str, out: Path | None, endpoint: str | None, timeout: float,
                content: bool) -> None:
    """A stored run as OpenTelemetry traces (GenAI conventions): one trace per iteration,
    spans for model turns and tool calls, the verdicts as evaluation events."""
    import json

    from cycle.cli.prompt import open_store
    from cycle.errors import CycleError
    from cycle.evals.results import load_run
    from cycle.formats.otel import otlp_json, send, spans_of
    from cycle.llm.http import safe_url

    if out is None and endpoint is None:
        raise click.UsageError("say where: --out FILE (OTLP JSON) or --endpoint URL (OTLP/HTTP)")
    from cycle.store.masking import MaskedRunLog

    with open_store() as store:
        # an older store may hold keys raw: exported masked (cycle.store.masking)
        run = load_run(MaskedRunLog(store), store.runs.resolve(run_id))
        spans = spans_of(run, content=content)
    traces = len({s.context.trace_id for s in spans})
    if out is not None:
        out.write_text(json.dumps(otlp_json(spans)), encoding="utf-8")
        click.echo(f"{traces} traces ({len(spans)} spans) of run {run.run_id} written to {out}")
    if endpoint is not None:
        if not send(spans, endpoint, timeout=timeout):
            raise CycleError(f"the collector at {safe_url(endpoint)} did not take the traces",
                             hint="Check the URL (an OTLP/HTTP receiver, e.g. port 4318) and "
                             "that the collector runs.")
        click.echo(f"{traces} traces ({len(spans)} spans) of run {run.run_id} sent to {safe_url(endpoint)}")


@import_group.command("otel")
@click.argument("traces", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The case file to write (YAML); it must not exist.")
@click.option("--where", "where", multiple=True, metavar="KEY=VALUE",
              help="Only traces with a span whose attribute KEY is VALUE (KEY!=VALUE: none "
              "is; KEY alone: some span has it). Repeat: all must hold.")
@click.option("--sample", type=click.IntRange(min=1), default=None, metavar="N",
              help="At most N of the matching traces, drawn at random (--seed).")
@click.option("--seed", type=int, default=0, show_default=True, help="The sample's seed.")
@click.option("--no-expected", is_flag=True,
              help="Leave the final answers out (by default each is the case's expected).")
def import_otel(traces: Path, out: Path, where: tuple[str, ...], sample: int | None,
                seed: int, no_expected: bool) -> None:
    """Turn the GenAI traces of an OTLP JSON file (an agent in production, Phoenix, cycle
    export otel --content) into cases: the user turns as input, the tools mocked from what
    they returned, the final answer as expected."""
    from cycle.cases import append_to_case_file
    from cycle.formats.otel_cases import import_traces

    if out.exists():
        raise ConfigError(f"{out} exists; cycle does not overwrite a case file",
                          field="--out", hint="Choose a new file, or remove that one.")
    done = import_traces(traces, where=where, sample=sample, seed=seed,
                         expected=not no_expected)
    for note in done.notes:
        click.echo(f"note: {note}", err=True)
    if not done.cases:
        raise ConfigError(f"no case in {traces}: {done.traces} traces, none matched and held "
                          "a user message", file=str(traces),
                          hint="Loosen --where, or export the traces with their content.")
    append_to_case_file(out, done.cases)  # a new file, which must read back as valid cases
    mocked = sum(1 for c in done.cases if c.get("mocks"))
    click.echo(f"wrote {len(done.cases)} case{'s' * (len(done.cases) != 1)} to {out} from "
               f"{done.traces} traces ({mocked} with their tools mocked from the trace); "
               "add it to cases: in cycle.yaml")


def write_project(out: Path, *, prompt_id: str, system: str, user_template: str,
                  cases: list[dict[str, Any]], criteria: list[dict[str, Any]], model: str,
                  gaps: list[str], source: str, files: dict[str, str] | None = None) -> None:
    """A converted project in ``out``: cycle.yaml (what was not converted listed at its top),
    the prompt file and the case file; the case file must read back as valid cases."""
    import yaml

    from cycle.cases import append_to_case_file

    (out / "prompts").mkdir(parents=True, exist_ok=True)
    (out / "cases").mkdir(exist_ok=True)
    prompt = {"id": prompt_id, "system": system, "user_template": user_template}
    (out / "prompts" / f"{prompt_id}.yaml").write_text(
        f"# converted from {source}\n" + yaml.safe_dump(prompt, sort_keys=False,
                                                       allow_unicode=True), encoding="utf-8")
    append_to_case_file(out / "cases" / f"{prompt_id}.yaml", cases)
    for relative, text in (files or {}).items():  # the checks' code, beside cycle.yaml
        (out / relative).write_text(text, encoding="utf-8")
    config = {"prompt": f"prompts/{prompt_id}.yaml", "agent": model, "judge": model,
              "improver": model, "criteria": criteria, "cases": ["cases/*.yaml"]}
    notes = "".join(f"#   - {gap}\n" for gap in gaps)
    (out / "cycle.yaml").write_text(
        f"# converted from {source}\n" + (f"# not converted:\n{notes}" if notes else "")
        + yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    # "1 cases, 1 criteria" read as a slip
    # with no criterion, cycle run would refuse it: the next step is to add one
    step = ("run it" if criteria else "add a criterion to its criteria, then run it")
    click.echo(f"wrote {out}: {plural(len(cases), 'case')}, "
               f"{plural(len(criteria), 'criterion', 'criteria')} (prompt {prompt_id}); "
               f"{step}: cycle run {out / 'cycle.yaml'}")
    for gap in gaps:
        click.echo(f"not converted: {gap}")


def _fresh(out: Path) -> None:
    if (out / "cycle.yaml").exists():
        raise ConfigError(f"{out / 'cycle.yaml'} exists; cycle does not overwrite a project",
                          field="--out", hint="Choose a new folder.")


def _prompt_id(name: str | None, stem: str) -> str:
    import re

    return name or re.sub(r"[^a-z0-9-]+", "-", stem.lower()).strip("-") or "imported"


@import_group.command("openai-evals")
@click.argument("items", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--graders", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The eval's graders (its testing_criteria, as JSON), or the openai/evals "
              "registry YAML defining the eval (its class: Match, Includes).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="The project folder to write (it must not hold a cycle.yaml).")
@click.option("--model", default="openai:gpt-4o-mini", show_default=True,
              help="The agent's, judge's and improver's model.")
@click.option("--name", default=None, help="The prompt's id (default: the items file's name).")
def import_openai_evals(items: Path, graders: Path | None, out: Path, model: str,
                        name: str | None) -> None:
    """Write a cycle project from an OpenAI Evals items file (JSONL) and its graders: the
    prompt, the cases, the criteria; what cannot be converted is listed."""
    from cycle.formats.openai_evals import convert, read_graders, read_items

    _fresh(out)
    prompt_id = _prompt_id(name, items.stem)
    done = convert(read_items(items), read_graders(graders, items) if graders else None,
                   name=prompt_id, source=str(items))
    write_project(out, prompt_id=prompt_id, system=done.system, user_template="{{ question }}",
                  cases=done.cases, criteria=done.criteria, model=model, gaps=done.gaps,
                  source=items.name + (f" and {graders.name}" if graders else "")
                  + " by cycle import openai-evals")


@import_group.command("promptfoo")
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="The project folder to write (it must not hold a cycle.yaml).")
@click.option("--model", default="openai:gpt-4o-mini", show_default=True,
              help="The judge's and improver's model, and the agent's when the config's "
              "first provider is not one cycle has.")
@click.option("--prompt", "prompt_number", type=click.IntRange(min=1), default=1,
              show_default=True, help="Which of the config's prompts to import.")
@click.option("--name", default=None, help="The prompt's id (default: the config's folder).")
def import_promptfoo(config: Path, out: Path, model: str, prompt_number: int,
                     name: str | None) -> None:
    """Write a cycle project from a promptfoo config: a prompt, its first provider, the
    tests as cases, the assertions as criteria; what cannot be converted is listed."""
    from cycle.formats.promptfoo import CHECKS_MODULE, convert
    from cycle.yamlload import parse_yaml, read_text

    _fresh(out)
    loaded = parse_yaml(read_text(config), str(config))
    doc = loaded.data
    if not isinstance(doc, dict):
        raise ConfigError("a promptfoo config is a mapping (prompts, providers, tests)",
                          file=str(config))
    prompt_id = _prompt_id(name, config.resolve().parent.name)
    done = convert(doc, config.parent, name=prompt_id, prompt_index=prompt_number - 1,
                   source=str(config), line=loaded.line_of(("prompts",)), project=out)
    module = done.checks_module()
    write_project(out, prompt_id=prompt_id, system=done.system, user_template=done.prompt,
                  cases=done.cases, criteria=done.criteria, model=done.model or model,
                  gaps=done.gaps, source=f"{config.name} by cycle import promptfoo",
                  files={f"{CHECKS_MODULE}.py": module} if module else None)
    if module:
        click.echo(f"the config's code assertions are {out / CHECKS_MODULE}.py: cycle runs "
                   "that code, with your permissions, whenever it judges a case")
