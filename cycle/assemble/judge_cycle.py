"""``cycle judge improve``: a cycle.yaml and a stored run's human labels into the ``Loop``
that improves the judge prompt (``cycle-judge``), the cycle's own loop unchanged.

- **The cases** are the run's labelled outputs, one per output and LLM criterion: its input
  shows the run's case input, the output judged, the reference and the criterion; its
  expected is people's verdict (cycle.judge.alignment.people_verdict).
- **The agent** is the judge prompt under improvement on that output, with the criterion's
  rubric: the messages a run's judge sends, one call (cycle.judge.judge_agent.JudgeAgent).
- **The rubrics** are improved with the prompt: the cycle starts from the judge prompt's
  head carrying cycle.yaml's rubric of each criterion learnt (``Prompt.rubrics``; saved
  off head as a version of its own when head does not carry them, standing for head), so
  the improver may edit a rubric like any other part of the prompt. A run's judge reads
  its rubrics from cycle.yaml: a confirmed rubric edit is written back there
  (cycle.assemble.rubric_file) by the command, after the cycle.
- **The score** is the agreement of its verdict with people's (a check, no model:
  cycle.judge.alignment); a labelled output counts as agreed at 75.
- **Held out**: ``held_out`` of the labelled outputs, stratified over people's verdict and
  the run's judge verdict (so both parts hold their disagreements in proportion), drawn
  with ``random.Random(seed)``. The improver never sees them; the acceptance rejects a
  candidate they did not gain with; the command reports the agreement on them before
  and after.

Statistics, acceptance, confirmation on fresh samples, review and budget are the loop's.
A confirmed candidate becomes head of ``cycle-judge``, which every later run's judge uses
(cycle.judge.llm_judge.judge_prompt_in); ``cycle rollback cycle-judge --to VERSION``
undoes it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from cycle.assemble.config import STORE_PREFIX, LoadedConfig, load_prompt
from cycle.assemble.improve import ImproveConfig
from cycle.assemble.suite import Models, in_flight, judge_models, load_suite_cases
from cycle.cases import TestCase
from cycle.errors import ConfigError
from cycle.events import EventBus
from cycle.improve.improver import Improver, ensure_improver_prompt
from cycle.judge import Judge
from cycle.judge.alignment import AGREED_AT, CHECK, Figures, figures, people_verdict, verdict_of
from cycle.judge.criteria import Criterion, CriterionConfig, merge, resolve, rubric_of
from cycle.judge.judge_agent import JudgeAgent, JudgedOutput
from cycle.judge.llm_judge import judge_prompt_in
from cycle.llm.budget import Budget
from cycle.llm.cache import ResponseCache
from cycle.loop.core import Loop, LoopSettings
from cycle.loop.review import Reviewer
from cycle.loop.stop import parse_stop
from cycle.records import JUDGE_PROMPT_ID, Prompt, Version
from cycle.store import Store

if TYPE_CHECKING:
    from cycle.loop.core import CycleResult
    from cycle.store.human_labels import Label

#: the labelled outputs the improver must see, and the held-out ones the figures need
MIN_SEEN = 10
MIN_HELD_OUT = 5
DEFAULT_HELD_OUT = 0.3


class LabelledSet(Struct):
    """A run's labelled outputs as the cases of a judge cycle."""

    run_id: str
    cases: list[TestCase]
    #: what each case's agent judges, by case id
    outputs: dict[str, JudgedOutput]
    #: the ids of the held-out cases
    held_out: frozenset[str]
    #: labelled outputs left out, by why
    left_out: dict[str, int]
    #: cycle.yaml's rubric of each criterion learnt (cycle.judge.criteria.rubric_of)
    rubrics: dict[str, str]


def case_id(case: str, iteration: int, criterion: str) -> str:
    return f"{case}#{iteration}.{criterion}"


def labels_needed(fraction: float) -> int:
    """The labelled outputs a split at ``fraction`` needs for MIN_SEEN and MIN_HELD_OUT."""
    return max(math.ceil(MIN_SEEN / (1 - fraction)), math.ceil(MIN_HELD_OUT / fraction))


def labelled_set(store: Store, loaded: LoadedConfig, run_id: str, *, held_out: float,
                 seed: int, criteria: Sequence[str] = ()) -> LabelledSet:
    """The labelled outputs of ``run_id`` on the LLM criteria of cycle.yaml (``criteria``:
    these only), split. ConfigError when there are too few to learn from and to hold out:
    it says how many more to label."""
    if not 0 < held_out < 1:
        raise ConfigError(f"--held-out is a fraction of the labels between 0 and 1, got "
                          f"{held_out:g}", field="--held-out", hint="e.g. --held-out 0.3")
    c = loaded.config
    llm = {x.id: x for x in c.criteria if x.check is None}
    unknown = [x for x in criteria if x not in llm]
    if unknown:
        raise ConfigError(f"{loaded.path} has no LLM criterion {unknown[0]!r}",
                          file=str(loaded.path), field="--criterion",
                          hint=f"Its LLM criteria: {', '.join(llm) or 'none'}.")
    wanted = set(criteria or llm)
    by_output: dict[tuple[str, int, str], list[Label]] = {}
    stored_judge: dict[tuple[str, int, str], bool | None] = {}
    left_out: dict[str, int] = {}
    for x in store.human_labels.of_run(run_id):
        key = (x.label.case, x.label.iteration, x.label.criterion)
        if x.label.criterion not in wanted:
            why = ("not an LLM criterion of cycle.yaml" if x.label.criterion not in llm
                   else "a criterion not asked for")
            left_out[why] = left_out.get(why, 0) + 1
            continue
        by_output.setdefault(key, []).append(x.label)
        stored_judge[key] = x.judge_passed
    configured = _config_cases(loaded, {k[0] for k in by_output})
    results = {(r.case_id, r.iteration): r for rs in store.runs.load_cases(
        run_id, sorted({k[0] for k in by_output})).values() for r in rs} if by_output else {}
    resolved: dict[str, Criterion] = {}
    rubrics: dict[str, str] = {}
    cases: list[TestCase] = []
    outputs: dict[str, JudgedOutput] = {}
    strata: dict[str, tuple[bool, bool | None]] = {}
    for (case, iteration, cid), labels in sorted(by_output.items()):
        result = results.get((case, iteration))
        if result is None or result.status == "error":
            left_out["the output errored"] = left_out.get("the output errored", 0) + 1
            continue
        source = configured.get(case)
        criterion = _criterion(llm, source, cid, c.pass_threshold, resolved)
        if criterion.per_turn:
            left_out["judged per turn"] = left_out.get("judged per turn", 0) + 1
            continue
        rubrics[cid] = rubric_of(llm[cid])[1]
        people = people_verdict(labels, criterion.pass_mark)
        shown_input = source.input if source is not None else result.input
        reference = source.expected if source is not None else None
        cid_ = case_id(case, iteration, cid)
        cases.append(TestCase(id=cid_, tags=[cid], input={
            "input": shown_input, "output": result.output, "reference": reference,
            "criterion": cid}, expected=people))
        outputs[cid_] = JudgedOutput(criterion=criterion, input=shown_input,
                                     output=result.output, expected=reference,
                                     trace=result.trace,
                                     config=_rubric_config(llm[cid], source),
                                     threshold=c.pass_threshold)
        strata[cid_] = (people["passed"], stored_judge[(case, iteration, cid)])
    chosen = split(strata, held_out, seed)
    seen = len(cases) - len(chosen)
    if seen < MIN_SEEN or len(chosen) < MIN_HELD_OUT:
        need = labels_needed(held_out)
        more = max(need - len(cases), 1)
        raise ConfigError(
            f"run {run_id} has {len(cases)} labelled outputs on "
            f"{', '.join(sorted(wanted)) or 'no LLM criterion'}: cycle judge improve needs "
            f"at least {need} to learn from {MIN_SEEN} and hold out {MIN_HELD_OUT} "
            f"(--held-out {held_out:g}); label {more} more",
            field="RUN_ID",
            hint=f"cycle judge sample {run_id} --n {more}, label them, then cycle judge "
            f"labels import FILE (or label in the TUI: cycle judge label {run_id}).")
    return LabelledSet(run_id=run_id, cases=cases, outputs=outputs, held_out=chosen,
                       left_out=left_out, rubrics=rubrics)


def _config_cases(loaded: LoadedConfig, ids: set[str]) -> dict[str, TestCase]:
    """cycle.yaml's cases by id, of those labelled (a case gone from it since the run is
    judged with the run's stored input, on the suite's criteria)."""
    if not ids:
        return {}
    return {x.id: x for x in load_suite_cases(loaded) if x.id in ids}


def _criterion(llm: dict[str, CriterionConfig], case: TestCase | None, cid: str,
               threshold: float, cache: dict[str, Criterion]) -> Criterion:
    """The criterion as the judge of ``case`` reads it: cycle.yaml's, with the case's
    overrides."""
    if case is None or not any(x.id == cid for x in case.criteria):
        if cid not in cache:
            cache[cid] = resolve(llm[cid], threshold=threshold)
        return cache[cid]
    return resolve(next(x for x in merge(list(llm.values()), case.criteria) if x.id == cid),
                   threshold=threshold)


def _rubric_config(suite: CriterionConfig, case: TestCase | None) -> CriterionConfig | None:
    """The criterion's entry as the case's judge reads it, whose rubric the carried one
    replaces; None when the case sets its own rubric (or description): it keeps it."""
    own = next((x for x in case.criteria if x.id == suite.id), None) if case else None
    if own is None:
        return suite
    if own.model_fields_set & {"rubric", "description"}:
        return None
    return next(x for x in merge([suite], [own]) if x.id == suite.id)


def split(strata: dict[str, tuple[bool, bool | None]], fraction: float,
          seed: int) -> frozenset[str]:
    """About ``fraction`` of the case ids, held out: each stratum (people's verdict, the
    run's judge verdict) gives its share, the remainders rounded where they are largest,
    ties and the picks by ``random.Random(seed)``: the same labels and seed, the same
    split."""
    rng = random.Random(seed)
    groups: dict[tuple[bool, bool | None], list[str]] = {}
    for cid in sorted(strata):
        groups.setdefault(strata[cid], []).append(cid)
    keys = sorted(groups, key=str)
    total = round(len(strata) * fraction)
    quota = {k: math.floor(len(groups[k]) * fraction) for k in keys}
    rest = sorted(keys, key=lambda k: (-(len(groups[k]) * fraction - quota[k]), rng.random()))
    for k in rest[:max(0, total - sum(quota.values()))]:
        quota[k] += 1
    chosen: set[str] = set()
    for k in keys:
        members = groups[k]
        rng.shuffle(members)
        chosen.update(members[:quota[k]])
    return frozenset(chosen)


#: improve: settings a judge cycle cannot honour, with why: each asks for a search or a gate
#: the judge cycle does not run, or names the prompt's cases and variables, not the judge's
UNSUPPORTED = {
    "population": "it proposes one candidate a round (no population, screen or merge)",
    "screen_cases": "it has no population to screen",
    "merge": "it has no population to merge from",
    "examples": "the judge prompt takes no few-shot examples",
    "batch": "its judge calls are live, one labelled output at a time",
    "judge": "its score is a check of agreement with people, not an LLM judge to gate",
    "required_cases": "its cases are labelled outputs, not the suite's cases",
    "allowed_variables": "the judge prompt reads only what a run's judge is given",
}
#: improve: settings the judge cycle has its own of, and what it uses instead
REPLACED = {
    "stop": "it stops after --rounds (and at the budget)",
    "low_score": "the outputs under the agreement mark (75) go to the improver",
    "validation": "--held-out holds out labelled outputs",
}


def _asks_for(improve: ImproveConfig, key: str) -> bool:
    """Whether cycle.yaml sets ``improve.<key>`` to something the judge cycle would do
    otherwise (population 1, examples off, batch false: what it does anyway)."""
    if key not in improve.model_fields_set:
        return False
    value = getattr(improve, key)
    if key == "population":
        return bool(value > 1)
    if key in ("merge", "batch"):
        return value is True
    if key == "judge":
        return value is not None and (value.min_agreement is not None
                                      or value.confirm_labels is not None)
    if key in ("required_cases", "allowed_variables"):
        return bool(value)
    return value is not None  # examples (off is None), screen_cases


def refuse_unsupported(loaded: LoadedConfig, improve: ImproveConfig) -> None:
    """ConfigError naming each ``improve:`` setting of cycle.yaml a judge cycle cannot
    honour (``UNSUPPORTED``), at the line of the first, rather than run without it."""
    found = [k for k in UNSUPPORTED if _asks_for(improve, k)]
    if not found:
        return
    fields = ", ".join(f"improve.{k}" for k in found)
    why = "; ".join(f"improve.{k}: {UNSUPPORTED[k]}" for k in found)
    raise ConfigError(
        f"cycle judge improve cannot honour {fields} ({why})",
        file=str(loaded.path), line=loaded.doc.line_of(("improve", found[0])),
        field=f"improve.{found[0]}",
        hint=f"Remove {'it' if len(found) == 1 else 'them'} from the improve: section, or "
        "point --config at a cycle.yaml without them (the same judge, criteria and "
        "improver), kept for the judge cycle.")


def replaced_settings(improve: ImproveConfig) -> list[str]:
    """What cycle.yaml sets that the judge cycle has its own of, each with what it uses
    instead (said before the cycle, never applied silently)."""
    return [f"improve.{k} is cycle improve's: {why}" for k, why in REPLACED.items()
            if k in improve.model_fields_set and getattr(improve, k) is not None]


def judge_plan(store: Store, loaded: LoadedConfig, labelled: LabelledSet, *,
               improve: ImproveConfig, rounds: int, held_out: float, seed: int,
               judge_name: str) -> dict[str, Any]:
    """What ``cycle judge improve --dry-run`` says it would do, read from the store and
    cycle.yaml with nothing called or written: the judge prompt and its version, the
    labelled outputs and their split, per criterion, and the calls at each end (as
    ``cycle improve --dry-run`` counts them: low, the baseline evaluation alone; high, every
    round, the confirmation's two evaluations, and each comparison grown to
    improve.max_iterations)."""
    from cycle.judge.llm_judge import current_judge_prompt

    _, version = current_judge_prompt(store)
    c = loaded.config
    n = len(labelled.cases)
    iterations = c.run.iterations
    most = max(improve.max_iterations or 2 * iterations, iterations)
    per_criterion: dict[str, dict[str, int]] = {}
    for case in labelled.cases:
        counts = per_criterion.setdefault(case.tags[0], {"labelled": 0, "held_out": 0})
        counts["labelled"] += 1
        counts["held_out"] += case.id in labelled.held_out
    judge_high = n * iterations * (1 + rounds + 2) + 2 * n * (most - iterations) * (rounds + 1)
    return {
        "kind": "judge_improve_plan",
        "run_id": labelled.run_id,
        "config": str(loaded.path),
        "judge": {"model": judge_name, "prompt": JUDGE_PROMPT_ID, "version": version,
                  # the built-in prompt, not stored yet: the cycle stores it first
                  "stored": version is not None},
        "improver": c.improver or judge_name,
        "labelled": n, "learn_from": n - len(labelled.held_out),
        "held_out": len(labelled.held_out), "held_out_share": held_out, "seed": seed,
        "criteria": dict(sorted(per_criterion.items())),
        # improved with the prompt; a confirmed edit is written back to cycle.yaml
        "rubrics": dict(sorted(labelled.rubrics.items())),
        "left_out": dict(sorted(labelled.left_out.items())),
        "rounds": rounds, "iterations": iterations, "max_iterations": most,
        # one judge call a labelled output an iteration; one improver call a round
        "calls": {"judge": [n * iterations, judge_high], "improver": [0, rounds]},
        "replaced": replaced_settings(improve),
    }


def judging_model(loaded: LoadedConfig) -> str:
    """The model the judge runs on: cycle.yaml's judge (or --judge), else the agent's. A
    panel is refused: its members share the judge prompt, but the cycle measures one
    model's agreement with people, which the user chooses."""
    c = loaded.config
    agent = c.agent_config
    prompt = (None if c.judges or agent.function or agent.http or
              c.prompt.startswith(STORE_PREFIX) else load_prompt(loaded)[0])
    names = judge_models(loaded, prompt)
    if len(names) > 1:
        raise ConfigError(f"the judge of {loaded.path} is a panel ({', '.join(names)}); "
                          "cycle judge improve improves the judge prompt on one model's "
                          "agreement with people", file=str(loaded.path), field="judge",
                          hint=f"Choose the member it learns on: --judge {names[0]}.")
    if not names:  # the agent is a function or an endpoint: no model to fall back on
        raise ConfigError("cycle judge improve needs a judge model: cycle.yaml names none",
                          file=str(loaded.path), field="judge",
                          hint="Add e.g. 'judge: openai:gpt-4o-mini' to cycle.yaml, or pass "
                          "--judge.")
    return names[0]


def build_judge_loop(
    loaded: LoadedConfig,
    labelled: LabelledSet,
    *,
    store: Store,
    reviewer: Reviewer,
    improve: ImproveConfig,
    rounds: int,
    bus: EventBus | None = None,
    cache: ResponseCache | None = None,
    again: str = "cycle judge improve",
) -> Loop:
    """The cycle that improves the judge prompt on ``labelled`` (see the module docstring),
    ``rounds`` improving rounds at most, cycle.yaml's ``budget`` its cap. ``again``: the
    command that resumes it."""
    c = loaded.config
    bus = bus or EventBus()
    budget = Budget(c.budget)
    models = Models(loaded, bus=bus, budget=budget, cache=cache, store=store)
    judge_name = judging_model(loaded)
    improver_name = c.improver or judge_name

    def start() -> Version:
        _, version = judge_prompt_in(store)  # the judge later runs would use
        return carrying_rubrics(store, store.get_version(JUDGE_PROMPT_ID, version),
                                labelled.rubrics)

    def agent_for(prompt: Prompt) -> JudgeAgent:
        return JudgeAgent(prompt, models(judge_name, "judge"), labelled.outputs,
                          description=c.agent_config.description)

    improver_prompt, improver_version = ensure_improver_prompt(store, improve.improver_prompt)
    improver_model = models(improver_name, "improver", live=True)
    concurrency, timeout = in_flight(c.run, batch=False)
    scoring = Judge([CriterionConfig(
        id="agreement", description="The judge's verdict agrees with people's label",
        check={"type": "python", "function": CHECK}, pass_mark=AGREED_AT)],  # type: ignore[arg-type]
        threshold=AGREED_AT)
    about = {"run": labelled.run_id, "labelled": len(labelled.cases),
             "held_out": sorted(labelled.held_out)}
    return Loop(
        start=start, prompt_id=JUDGE_PROMPT_ID, cases=labelled.cases, agent=agent_for,
        judge=scoring,
        improver=Improver(improver_model, prompt=improver_prompt, version=improver_version,
                          max_suggestions=improve.max_suggestions),
        reviewer=reviewer, store=store, stop=parse_stop({"max_rounds": rounds}),
        budget=budget, bus=bus,
        settings=LoopSettings(
            acceptance=improve.acceptance, low_score=AGREED_AT,
            context_tokens=improve.context_tokens, bump=improve.bump,
            iterations=c.run.iterations, concurrency=concurrency, timeout=timeout,
            held_out=labelled.held_out, max_iterations=improve.max_iterations),
        record={"config_file": str(loaded.path), "resume_command": again,
                "low_score_setting": "the agreement mark",
                "judge_improve": about, "agent": f"cycle-judge on {judge_name}",
                "judge": "agreement with people's labels", "improver": improver_name},
        run_config={"judge_improve": about, "config_path": str(loaded.path)},
        closers=[improver_model.aclose],
        head_of_start=lambda v: stands_for(store, v),
    )


#: the message of a judge prompt version saved to carry cycle.yaml's rubrics
CARRIES_RUBRICS = "cycle.yaml's rubrics, carried for cycle judge improve"


def carrying_rubrics(store: Store, head: Version, rubrics: dict[str, str]) -> Version:
    """``head`` when it carries exactly ``rubrics``, else the version that does: head's
    prompt with them, saved off head (runs read the rubrics from cycle.yaml, so head need
    not move), standing for head (``stands_for``)."""
    if head.prompt.rubrics == rubrics:
        return head
    from cycle.authors import LOOP, on_behalf

    return store.save_version(head.prompt.model_copy(update={"rubrics": rubrics}),
                              parent=head.version, move_head=False, source="manual",
                              message=CARRIES_RUBRICS, author=on_behalf(LOOP))


def stands_for(store: Store, start: Version) -> str:
    """The version head is at that ``start`` stands for: head, when its prompt is
    ``start``'s but for the rubrics (what a run's judge sends is the same); else ``start``
    itself (head was moved elsewhere: the cycle leaves it)."""
    head = store.resolve(JUDGE_PROMPT_ID)

    def bare(v: Version) -> str:
        return v.prompt.model_copy(update={"rubrics": {}}).content_hash

    return head.version if bare(head) == bare(start) else start.version


def learnt_rubrics(store: Store, result: CycleResult) -> dict[str, tuple[str, str]]:
    """The rubrics the cycle changed, by criterion: (the rubric it started from, the
    learnt one); none unless head is at the version the cycle ended on."""
    if result.final_version == result.initial_version or \
            store.resolve(JUDGE_PROMPT_ID).version != result.final_version:
        return {}
    before = store.get_version(JUDGE_PROMPT_ID, result.initial_version).prompt.rubrics
    after = store.get_version(JUDGE_PROMPT_ID, result.final_version).prompt.rubrics
    return {cid: (before[cid], text) for cid, text in after.items()
            if cid in before and before[cid] != text}


class HeldOut(Struct, frozen=True):
    """The judge's agreement with people on the held-out labels, before and after."""

    before: Figures
    after: Figures
    #: the versions measured, and the runs their verdicts come from
    before_version: str
    after_version: str
    before_run: str
    after_run: str


def held_out_figures(store: Store, result: CycleResult, labelled: LabelledSet) -> HeldOut | None:
    """The held-out figures of the starting version and of the version the cycle ended
    on, from their latest runs in the cycle (the confirmation's fresh ones when head
    moved); None when a version has no run (the cycle stopped before)."""
    cases = {x.id: x for x in labelled.cases if x.id in labelled.held_out}

    def measured(version: str) -> tuple[Figures, str] | None:
        runs = store.runs.recent(cycle_id=result.cycle_id, version=version, limit=1)
        if not runs:
            return None
        pairs: list[tuple[str, Any, dict[str, Any]]] = [
            (r.case_id, verdict_of(r.output), cases[r.case_id].expected)
            for rs in store.runs.load_cases(runs[0].id, sorted(cases)).values() for r in rs
            if r.status != "error"]
        return figures(pairs), runs[0].id

    before = measured(result.initial_version)
    after = measured(result.final_version)
    if before is None or after is None:
        return None
    # the start carrying cycle.yaml's rubrics is, for a run's judge, the head it stands for
    def shown(version: str) -> str:
        return (result.head_before or version) if version == result.initial_version else version

    return HeldOut(before=before[0], after=after[0],
                   before_version=shown(result.initial_version),
                   after_version=shown(result.final_version), before_run=before[1],
                   after_run=after[1])
