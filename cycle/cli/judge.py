"""``cycle judge``: people's labels of stored outputs, and how far the judge agrees with them.

    cycle judge sample RUN_ID --n 50        # outputs to label, as JSONL (the judge's scores hidden)
    cycle judge labels import labels.jsonl  # the labels, into the store
    cycle judge labels export RUN_ID        # the stored labels, as JSONL
    cycle judge agreement RUN_ID [--json]   # per criterion: agreement, kappa, alpha, bias

A label line: ``run``, ``case``, ``iteration``, ``criterion``, then ``score`` (0-100) or
``pass`` (true/false), optional ``labeler`` and ``note`` (a line of ``cycle judge sample``
also carries the ``output``, which is ignored). A line with neither score nor pass is not
labelled yet and is skipped. A score without ``pass`` passes at its criterion's pass mark in
that run, as the judge's verdict did (``cycle.judge.calibration.pass_mark``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cycle.cli.prompt import open_store
from cycle.errors import ConfigError

if TYPE_CHECKING:
    from cycle.store import Store
    from cycle.store.human_labels import Label

#: a label with a score only passes at this (the LLM criteria's default pass mark)
_KEYS = {"run", "case", "iteration", "criterion", "score", "pass", "labeler", "note", "output"}


@click.group("judge")
def judge_group() -> None:
    """People's labels of stored outputs, and the judge's agreement with them."""


def _pick(command: Any) -> Any:
    """The options that choose what to label: how many outputs, which criteria."""
    command = click.option("--criterion", "criteria", multiple=True,
                           help="Criteria to label (default: every LLM criterion of the "
                           "run).")(command)
    return click.option("--n", "count", type=click.IntRange(min=1), default=50,
                        show_default=True, help="Outputs to pick (stratified over the cases "
                        "and the judge's scores).")(command)


@judge_group.command("sample")
@click.argument("run_id")
@_pick
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The JSONL file to write (default: labels-RUN_ID.jsonl).")
@click.option("--labeler", default="", help="Who labels (written into each line).")
def sample(run_id: str, count: int, criteria: tuple[str, ...], out: Path | None,
           labeler: str) -> None:
    """Pick outputs of RUN_ID to label, stratified over cases and over the judge's scores."""
    from cycle.judge.calibration import to_label

    with open_store() as store:
        run_id = store.runs.resolve(run_id)
        chosen, rubrics = to_label(store, run_id, count, criteria)
    wanted = [c for c, _ in rubrics]
    path = out or Path(f"labels-{run_id}.jsonl")
    lines = [json.dumps({"run": run_id, "case": o["case"], "iteration": o["iteration"],
                         "criterion": c, "output": o["output"], "score": None, "pass": None,
                         "labeler": labeler, "note": ""}, ensure_ascii=False)
             for o in chosen for c in wanted if c in o["verdicts"]]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    click.echo(f"{len(chosen)} outputs of run {run_id} ({len(lines)} labels to give) written to "
               f"{path}: fill in score (0-100) or pass, then: cycle judge labels import {path}")


@judge_group.command("label")
@click.argument("run_id")
@_pick
@click.option("--labeler", default=None,
              help="Who labels (default: you: $CYCLE_AUTHOR, else your user name).")
def label(run_id: str, count: int, criteria: tuple[str, ...], labeler: str | None) -> None:
    """Label outputs of RUN_ID in the TUI: the input, the output or conversation, each
    criterion with its rubric; the judge's score shows once you have scored. Each label is
    stored as it is given."""
    import sys

    from cycle.authors import current_author
    from cycle.judge.calibration import to_label

    if not (sys.stdin.isatty() and sys.__stdout__.isatty()):
        raise click.UsageError("no terminal for the TUI: label from a file instead (cycle "
                               "judge sample RUN_ID, then cycle judge labels import FILE)")
    from cycle.tui.app import LabelApp

    who = labeler if labeler is not None else current_author()
    with open_store() as store:
        run_id = store.runs.resolve(run_id)
        outputs, rubrics = to_label(store, run_id, count, criteria)
        LabelApp(store, run_id, outputs, rubrics, labeler=who).run()
        given = sum(1 for x in store.human_labels.of_run(run_id) if x.label.labeler == who)
    click.echo(f"{given} labels by {who or 'you'} on run {run_id}; the judge's agreement: "
               f"cycle judge agreement {run_id}")


@judge_group.group("labels")
def labels_group() -> None:
    """Import and export people's labels (JSONL)."""


def read_labels(path: Path) -> tuple[list[Any], int]:
    """The labels of a JSONL file, and the lines not labelled yet; a bad line is a
    ConfigError naming the file, the line and the field."""
    from cycle.store.human_labels import Label
    from cycle.yamlload import read_text, too_deep

    text = read_text(path)
    labels, open_lines = [], 0
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue

        def bad(message: str, field: str | None = None, n: int = n) -> ConfigError:
            return ConfigError(message, file=str(path), line=n, field=field,
                               hint="A line: {\"run\", \"case\", \"iteration\", \"criterion\", "
                               "\"score\": 0-100 or \"pass\": true/false}.")
        try:
            row = json.loads(line)
        except ValueError as e:
            raise bad(f"not JSON: {e}") from None
        except RecursionError:
            raise too_deep(str(path), "JSON", n) from None
        if not isinstance(row, dict):
            raise bad("a line is one JSON object")
        extra = sorted(set(row) - _KEYS)
        if extra:
            raise bad(f"unknown key {extra[0]!r}", extra[0])
        for key in ("run", "case", "criterion"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise bad(f"{key} must be a non-empty string", key)
        if isinstance(row.get("iteration"), bool) or not isinstance(row.get("iteration"), int):
            raise bad("iteration must be a whole number", "iteration")
        score, passed = row.get("score"), row.get("pass")
        if score is None and passed is None:
            open_lines += 1
            continue
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                                  or not 0 <= score <= 100):
            raise bad(f"score must be a number from 0 to 100, not {score!r}", "score")
        if passed is not None and not isinstance(passed, bool):
            raise bad(f"pass must be true or false, not {passed!r}", "pass")
        labels.append(Label(
            run=row["run"], case=row["case"], iteration=row["iteration"],
            criterion=row["criterion"], score=None if score is None else float(score),
            passed=passed,  # a score alone passes at the criterion's mark (with_passes)
            labeler=str(row.get("labeler") or ""), note=row.get("note") or None))
    return labels, open_lines


def with_passes(store: Store, labels: list[Any]) -> list[Any]:
    """``labels`` with a score alone passing or failing at its criterion's pass mark in its
    run (``cycle.judge.calibration.pass_mark``), as the judge's verdict did."""
    from msgspec.structs import replace

    from cycle.judge.calibration import pass_mark

    configs: dict[str, Any] = {}
    out = []
    for x in labels:
        if x.passed is None and x.score is not None:
            if x.run not in configs:
                row = store.runs.get(x.run)
                configs[x.run] = row.config if row is not None else None
            x = replace(x, passed=x.score >= pass_mark(configs[x.run], x.criterion))
        out.append(x)
    return out


@labels_group.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--labeler", default=None, help="Who labelled (for lines that do not say; "
              "default: you, $CYCLE_AUTHOR or your user name).")
def import_labels(file: Path, labeler: str | None) -> None:
    """Store the labels of FILE (JSONL), all or none; a labeler's earlier label of the same
    output and criterion is replaced."""
    from msgspec.structs import replace

    labels, open_lines = read_labels(file)
    if labeler:
        labels = [replace(x, labeler=x.labeler or labeler) for x in labels]
    with open_store() as store:
        stored = store.human_labels.add(with_passes(store, labels))
    rest = f"; {open_lines} lines not labelled yet" if open_lines else ""
    click.echo(f"{stored} labels stored from {file}{rest}")


@labels_group.command("export")
@click.argument("run_id")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The JSONL file (default: standard output).")
def export_labels(run_id: str, out: Path | None) -> None:
    """Write the stored labels of RUN_ID as JSONL."""
    with open_store() as store:
        run_id = store.runs.resolve(run_id)
        rows = store.human_labels.of_run(run_id)
    text = "".join(json.dumps({
        "run": r.label.run, "case": r.label.case, "iteration": r.label.iteration,
        "criterion": r.label.criterion, "score": r.label.score, "pass": r.label.passed,
        "labeler": r.label.labeler, "note": r.label.note}, ensure_ascii=False) + "\n"
        for r in rows)
    if not rows:
        # printed nothing, exit 0: as if the command had not run
        click.echo(f"no labels of run {run_id} in the store: label its outputs with "
                   f"cycle judge sample {run_id} (then cycle judge labels import FILE) or "
                   f"cycle judge label {run_id}", err=True)
    if out is None:
        from cycle.safetext import json_printable

        click.echo(json_printable(text), nl=False)  # JSON still, a control in a note escaped
    else:
        out.write_text(text, encoding="utf-8")
        click.echo(f"{len(rows)} labels written to {out}")


@judge_group.command("agreement")
@click.argument("run_id")
@click.option("--labels", "labels_file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Labels in a JSONL file, beside those in the store.")
@click.option("--json", "as_json", is_flag=True, help="Print only the JSON.")
def agreement(run_id: str, labels_file: Path | None, as_json: bool) -> None:
    """How far the judge of RUN_ID agrees with people's labels, per criterion (a judge
    panel: the panel, then each member)."""
    with open_store() as store:
        run_id = store.runs.resolve(run_id)
        run = store.runs.get(run_id)
        extra = with_passes(store, read_labels(labels_file)[0]) if labels_file is not None else []
        members = list(dict.fromkeys(m for by in store.runs.panel_means(run_id).values()
                                     for m in by))
        labels, figures, settled = _agreement_of(store, run_id, extra)
        each = {m: _agreement_of(store, run_id, extra, member=m) for m in members}
    assert run is not None
    judge = f"{run.judge_model} cycle-judge@{run.judge_version}"
    data: dict[str, Any] = {"run": run_id, "judge": judge, "labels": labels, "criteria": figures}
    if members:  # what each member of the panel would have scored, beside the same labels
        data["members"] = {m: each[m][1] for m in members}
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(f"judge {judge} on run {run_id}: {labels} labels")
    if not figures:
        click.echo("no labels: the judge is uncalibrated (cycle judge sample "
                   f"{run_id}, then cycle judge labels import FILE)")
        return
    _agreement_table(figures, settled)
    for m in members:
        click.echo(f"\npanel member {m}:")
        _agreement_table(*each[m][1:])


def _agreement_of(store: Store, run_id: str, extra: list[Label], *, member: str | None = None
                  ) -> tuple[int, dict[str, dict[str, Any]], dict[str, int]]:
    """The labels of ``run_id`` (and ``extra``, a file's) beside the judge's verdicts (or a
    panel ``member``'s): how many, each criterion's figures as ``--json`` gives them, and
    the labelled outputs each corrected mean rests on."""
    from msgspec.structs import replace

    from cycle.authors import current_author
    from cycle.judge.agreement import measure
    from cycle.judge.calibration import corrected_mean, ratings_of
    from cycle.store.human_labels import Labelled

    labelled = store.human_labels.of_run(run_id, member=member)
    outputs = store.human_labels.outputs(run_id, member=member)
    verdicts = {(o["case"], o["iteration"], c): v for o in outputs
                for c, v in o["verdicts"].items()}
    # a file's label replaces the stored one of the same output, criterion and labeler (as
    # importing it would): the same labels given twice counted every one twice
    author = current_author() if extra else ""
    given = {(x.run, x.case, x.iteration, x.criterion, x.labeler or author) for x in extra}
    labelled = [x for x in labelled if (x.label.run, x.label.case, x.label.iteration,
                                        x.label.criterion, x.label.labeler) not in given]
    for x in extra:
        if x.run != run_id:
            continue
        x = replace(x, labeler=x.labeler or author)
        v = verdicts.get((x.case, x.iteration, x.criterion))
        labelled.append(Labelled(label=x, judge_score=v and v["score"],
                                 judge_passed=v and v["passed"]))
    judged: dict[str, list[float]] = {}
    for o in outputs:
        for c, v in o["verdicts"].items():
            if v["score"] is not None:
                judged.setdefault(c, []).append(v["score"])
    by_criterion = ratings_of(labelled)
    if member is not None:  # a member scored the LLM criteria only
        by_criterion = {c: r for c, r in by_criterion.items() if c in judged}
    figures = {c: measure(r) for c, r in by_criterion.items()}
    fixed = {c: corrected_mean(judged.get(c, []), r) for c, r in by_criterion.items()}
    settled = {c: k.n_labelled for c, k in fixed.items() if k is not None}
    return len(labelled), {
        c: {"n": a.n, "outputs": a.outputs, "agreement": a.agreement, "kappa": a.kappa,
            "kappa_ci": a.kappa_ci, "base_rate": a.base_rate, "alpha": a.alpha,
            "alpha_ci": a.alpha_ci, "bias": a.bias, "bias_ci": a.bias_ci,
            "correlation": a.correlation, "correlation_ci": a.correlation_ci,
            "labelers": a.labelers, "unmatched": a.unmatched,
            "notes": a.notes() + _corrected_note(fixed[c], by_criterion[c]),
            "judged_mean": fixed[c].judged if fixed[c] else None,
            "corrected_mean": fixed[c].corrected if fixed[c] else None,
            "corrected_ci": fixed[c].ci if fixed[c] else None,
            "corrected_power": fixed[c].power if fixed[c] else None}
        for c, a in figures.items()}, settled


def _corrected_note(fixed: Any, ratings: list[Any]) -> list[str]:
    """Why a criterion has no corrected mean, or that its interval was cut to 0-100."""
    if fixed is not None:
        return ["the corrected interval is cut to the 0-100 scale"] if fixed.clipped else []
    scored = len({r.output for r in ratings
                  if r.person_score is not None and r.judge_score is not None})
    return [(f"no corrected mean: {scored} labelled output(s) with a score from both the "
             "judge and a person, it takes 2")]


def _agreement_table(figures: dict[str, dict[str, Any]], settled: dict[str, int]) -> None:
    """The figures a criterion a line, then each criterion's corrected mean."""
    from cycle.report.format import figure

    click.echo(f"{'criterion':<16} {'n':>4} {'agree':>6} {'kappa (95% CI)':<22} {'base':>5} "
               f"{'alpha (95% CI)':<22} {'bias, points (95% CI)':<24}")
    for c, a in figures.items():
        click.echo(f"{c:<16} {a['n']:>4} {figure(a['agreement']):>6} "
                   f"{figure(a['kappa'], a['kappa_ci']):<22} {figure(a['base_rate']):>5} "
                   f"{figure(a['alpha'], a['alpha_ci']):<22} "
                   f"{figure(a['bias'], a['bias_ci'], 1):<24}")
    for c, a in figures.items():
        if a["corrected_mean"] is not None:
            click.echo(f"{c}: judged {a['judged_mean']:.1f}, corrected with {settled[c]} labels "
                       f"{figure(a['corrected_mean'], a['corrected_ci'], 1)} (the interval "
                       f"holds the judge's error; the judge weighed {a['corrected_power']:.2f})")
    for c, a in figures.items():
        for note in a["notes"]:
            click.echo(f"{c}: {note}")


@judge_group.command("consistency")
@click.argument("run_id")
@click.option("--config", "config", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("cycle.yaml"), show_default=True,
              help="The cycle.yaml whose judge and criteria judge again.")
@click.option("--repeats", type=click.IntRange(min=2, max=100), default=3, show_default=True,
              help="Fresh judgements of each output (at most 100: each is a judging of the "
              "whole run).")
@click.option("--max-flips", type=click.FloatRange(0, 1), default=0.1, show_default=True,
              help="The share of outputs whose pass/fail may change between repeats before a "
              "criterion is flagged (exit 1).")
@click.option("--json", "as_json", is_flag=True, help="Print only the JSON.")
def consistency(run_id: str, config: Path, repeats: int, max_flips: float,
                as_json: bool) -> None:
    """Judge RUN_ID's stored outputs again, REPEATS times each on fresh samples: per LLM
    criterion, the spread of its scores and the share of verdicts that flip."""
    import asyncio
    import statistics

    from cycle import aio
    from cycle.assemble.config import load_config
    from cycle.assemble.suite import build_suite, run_budget
    from cycle.records import AgentResult, Usage
    from cycle.records.scope import CallScope

    loaded = load_config(config)
    with open_store() as store:
        run_id = store.runs.resolve(run_id)
        results = [r for r in store.runs.load_results(run_id) if r.status != "error"]
        suite = build_suite(loaded, store=store, budget=run_budget(loaded))
        # judged with the store's judge prompt, as the runs were: the figures are that judge's
        version = suite.judge.register(store)
    llm = [c.id for c in suite.judge.criteria if c.kind == "llm"]
    cases = {c.id: c for c in suite.cases}
    outputs = [r for r in results if r.case_id in cases]
    if not llm or not outputs:
        raise ConfigError(f"nothing to judge again: run {run_id} has "
                          f"{'no stored output of these cases' if llm else 'no LLM criterion'}",
                          field="RUN_ID")
    if not as_json:
        click.echo(f"{len(outputs)} outputs x {repeats} repeats = {len(outputs) * repeats} "
                   f"judge calls ({suite.judge.name})")

    async def judge_all() -> list[list[Any]]:
        gate = asyncio.Semaphore(max(1, loaded.config.run.concurrency))

        async def again(r: Any, k: int) -> Any:
            answer = AgentResult(output=r.output, tool_calls=r.tool_calls, trace=r.trace,
                                 state=r.state, latency=r.latency, cost=r.agent_cost,
                                 usage=Usage(input_tokens=r.input_tokens,
                                             output_tokens=r.output_tokens))
            async with gate:  # a fresh sample each: the cache never answers for another
                return await suite.judge.judge(cases[r.case_id], answer, iteration=r.iteration,
                                               scope=CallScope(case_id=r.case_id,
                                                               iteration=r.iteration,
                                                               sample=f"{run_id}:again:{k}"))
        try:
            return [list(x) for x in zip(*[await asyncio.gather(*(again(r, k) for r in outputs))
                                           for k in range(repeats)], strict=True)]
        finally:
            await suite.aclose()

    judged = aio.run(judge_all())
    figures: dict[str, dict[str, Any]] = {}
    for criterion in llm:
        spreads, flips = [], 0
        for verdicts in judged:
            got = [next(v for v in j.verdicts if v.criterion_id == criterion) for j in verdicts]
            spreads.append(statistics.pstdev(v.score for v in got))
            flips += len({v.passed for v in got}) > 1
        share = flips / len(judged)
        figures[criterion] = {"outputs": len(judged), "repeats": repeats,
                              "spread": statistics.fmean(spreads), "flip_share": share,
                              "flagged": share > max_flips}
    from cycle.store.judge_consistency import Consistency

    with open_store() as store:  # kept: every report of this judge flags what flips too often
        store.judge_consistency.record(
            [Consistency(run=run_id, criterion=c, outputs=x["outputs"], repeats=repeats,
                         spread=x["spread"], flip_share=x["flip_share"], max_flips=max_flips)
             for c, x in figures.items()], model=suite.judge.name, version=version)
    data = {"run": run_id, "judge": suite.judge.name, "max_flips": max_flips,
            "criteria": figures}
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(f"{'criterion':<16} {'spread (points, SD)':>20} {'verdicts that flip':>19}")
        for c, x in figures.items():
            flag = "  FLAGGED: over --max-flips" if x["flagged"] else ""
            click.echo(f"{c:<16} {x['spread']:>20.1f} {x['flip_share']:>18.0%}{flag}")
    if any(x["flagged"] for x in figures.values()):
        raise SystemExit(1)


@judge_group.command("pairwise")
@click.argument("base_run")
@click.argument("head_run")
@click.option("--config", "config", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("cycle.yaml"), show_default=True,
              help="The cycle.yaml whose judge and criteria compare.")
@click.option("--criterion", "criteria", multiple=True,
              help="Criteria to compare on (default: every LLM criterion of the config).")
@click.option("--judge", "judge_model", metavar="MODEL",
              help="The judge model (default: the config's; one member of a judge panel).")
@click.option("--json", "as_json", is_flag=True, help="Print only the JSON.")
def pairwise(base_run: str, head_run: str, config: Path, criteria: tuple[str, ...],
             judge_model: str | None, as_json: bool) -> None:
    """Compare two runs' outputs directly: each case's iteration in both runs, judged on each
    LLM criterion twice with the order swapped; a preference that follows the position
    counts as a tie. Per criterion: the cases that prefer each run, the sign test's p, and
    the share of order flips."""
    import asyncio

    from cycle import aio
    from cycle.assemble.config import STORE_PREFIX, load_config, load_prompt
    from cycle.assemble.suite import (
        Models,
        judge_models,
        load_suite_cases,
        open_cache,
        run_budget,
    )
    from cycle.judge.criteria import BUILTIN_CRITERIA
    from cycle.judge.pairwise import compare, summarize

    loaded = load_config(config)
    llm = {c.id: c.rubric or BUILTIN_CRITERIA.get(c.id) or c.description or ""
           for c in loaded.config.criteria if c.check is None}
    unknown = [c for c in criteria if c not in llm]
    if unknown or not llm:
        raise ConfigError(f"{config} has no LLM criterion {unknown[0]!r}" if unknown else
                          f"{config} has no LLM criterion to compare on", file=str(config),
                          field="--criterion", hint=f"Its LLM criteria: {', '.join(llm) or 'none'}.")
    chosen = {c: llm[c] for c in (criteria or llm)}
    prompt = None if loaded.config.prompt.startswith(STORE_PREFIX) else load_prompt(loaded)[0]
    judges = judge_models(loaded, prompt)
    if judge_model is None and len(judges) > 1:
        # a pairwise preference has no mean: which member compares is the user's choice
        raise ConfigError(f"the judge of {config} is a panel ({', '.join(judges)}); a pairwise "
                          "comparison is one judge's", file=str(config), field="judge",
                          hint="Choose the member that compares: --judge " + judges[0] + ".")
    name = judge_model or (judges[0] if judges else None)
    if name is None:
        raise ConfigError(f"{config} names no judge model", file=str(config), field="judge",
                          hint="Set judge: in cycle.yaml, or pass --judge MODEL.")
    expected = {c.id: c.expected for c in load_suite_cases(loaded)}
    cache = open_cache(loaded)
    with open_store() as store:
        base_id, head_id = store.runs.resolve(base_run), store.runs.resolve(head_run)
        base, head = ({(r.case_id, r.iteration): r for r in store.runs.load_results(run_id)
                       if r.status != "error"} for run_id in (base_id, head_id))
        both = sorted(set(base) & set(head))
        if not both:
            raise ConfigError(f"runs {base_id} and {head_id} share no judged case iteration",
                              field="RUN", hint="Compare two runs of the same cases.")
        if not as_json:
            click.echo(f"{len(both)} pairs x {len(chosen)} criteria x 2 orders = "
                       f"{len(both) * len(chosen) * 2} judge calls ({name})")
        model = Models(loaded, budget=run_budget(loaded), cache=cache, store=store)(name, "judge")

        async def judge_all() -> list[Any]:
            gate = asyncio.Semaphore(max(1, loaded.config.run.concurrency))

            async def one(key: tuple[str, int], criterion: str) -> Any:
                async with gate:
                    return await compare(model, criterion, chosen[criterion], base[key],
                                         head[key], expected=expected.get(key[0]),
                                         sample=f"{base_id}:{head_id}")
            try:
                return list(await asyncio.gather(*(one(k, c) for k in both for c in chosen)))
            finally:
                await model.aclose()

        try:
            pairs = aio.run(judge_all())
        finally:
            if cache is not None:
                cache.close()
    summaries = [summarize(c, [p for p in pairs if p.criterion == c]) for c in chosen]
    data = {"base": base_id, "head": head_id, "judge": name, "offline": model.offline,
            "criteria": {s.criterion: {"pairs": s.pairs, "head_cases": s.head_cases,
                                       "base_cases": s.base_cases, "tied_cases": s.tied_cases,
                                       "p_value": s.p_value, "order_flips": s.order_flips}
                         for s in summaries}}
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    if model.offline:
        click.echo("offline model: these preferences are not a real judge's")
    click.echo(f"{'criterion':<16} {'head better':>11} {'base better':>11} {'tie':>5} "
               f"{'sign test p':>11} {'order flips':>11}   (cases; base {base_id}, head {head_id})")
    for s in summaries:
        click.echo(f"{s.criterion:<16} {s.head_cases:>11} {s.base_cases:>11} {s.tied_cases:>5} "
                   f"{s.p_value:>11.3f} {s.order_flips:>11.0%}")


# its own module (one command), on the group here: cycle judge improve
from cycle.cli.judge_improve import improve_judge

judge_group.add_command(improve_judge)
