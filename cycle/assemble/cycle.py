"""A cycle.yaml into a ready ``Loop``: cases, agent factory, judge, improver, stop, budget.

    loop = build_loop(load_config("cycle.yaml"), store=store, reviewer=AutoReviewer())
    result = await loop.run()

Everything is validated (``prepare``) before the store is written or a model called.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from cycle.agents import Agent, PromptAgent
from cycle.assemble.config import STORE_PREFIX, LoadedConfig, load_prompt, overridden_values
from cycle.assemble.improve import ImproveConfig, load_improve_config
from cycle.assemble.suite import (
    Models,
    agent_model_name,
    check_model,
    in_flight,
    judge_models,
    needs_judge,
    stored_config,
    validate_suite,
)
from cycle.cases import TestCase
from cycle.errors import ConfigError
from cycle.events import EventBus
from cycle.improve.improver import Improver, ensure_improver_prompt
from cycle.judge import Judge
from cycle.judge.panel import panel_name
from cycle.llm.budget import Budget
from cycle.llm.cache import ResponseCache
from cycle.llm.model import Model
from cycle.loop.core import Loop, LoopSettings
from cycle.loop.holdout import held_out_cases
from cycle.loop.review import Reviewer
from cycle.loop.stop import cost_cap, has_limit, resolve_custom
from cycle.records import Prompt, Version
from cycle.store import Store
from cycle.yamlload import relocate


def _not_a_model_agent(loaded: LoadedConfig) -> ConfigError:
    agent = loaded.config.agent_config
    return ConfigError(
        "cycle improve needs an agent that runs the prompt on a model; this config's agent "
        f"is {'a Python function' if agent.function else 'an HTTP endpoint'}, which the "
        "improved prompt would not reach",
        file=str(loaded.path), line=loaded.doc.line_of(("agent",)), field="agent",
        hint="Set 'agent: provider:model' (or leave it out and give params.model in the prompt).",
    )


def prepare(loaded: LoadedConfig, improve: ImproveConfig | None = None, *,
            keys: bool = True) -> Sequence[TestCase]:
    """Validate everything a cycle needs before the store is opened or a model called:
    the prompt, every case file, imports, templates, the models' names and keys, and the
    stop conditions' custom predicates. Returns the cases; the first problem raises a
    ``CycleError`` naming file:line (field)."""
    improve = improve or load_improve_config(loaded)
    agent = loaded.config.agent_config
    if agent.function or agent.http:
        raise _not_a_model_agent(loaded)
    cases = validate_suite(loaded, improver=True, keys=keys)
    stop = improve.stop_condition(base_dir=str(loaded.base_dir))
    where = {"file": str(loaded.path), "line": loaded.doc.line_of(("improve", "stop")),
             "field": "improve.stop"}
    try:
        resolve_custom(stop)
    except ConfigError as e:
        raise relocate(e, **where) from None
    if not has_limit(stop):
        raise ConfigError(
            f"the stop conditions ({stop.describe()}) may never hold: the cycle could run forever",
            **where, hint="Add a limit, e.g. stop: {any: [{target_score: 90}, {max_rounds: 5}]}",
        )
    known = {c.id for c in cases}
    for i, name in enumerate(improve.required_cases):
        if name not in known:  # a typo here would silently protect nothing
            close = difflib.get_close_matches(name, sorted(known), n=1)
            raise ConfigError(
                f"required case '{name}' is not among the cases this cycle runs",
                file=str(loaded.path), line=loaded.doc.line_of(("improve", "required_cases", i)),
                field=f"improve.required_cases[{i}]",
                hint=(f"Did you mean '{close[0]}'? " if close else "")
                + "Name a case id of the suite (or tag the case 'required').",
            )
    held_out(loaded, improve, cases)
    pairwise = [c.id for c in loaded.config.criteria if c.pairwise]
    if improve.objective == "cost" and pairwise:
        raise ConfigError(
            f"improve.objective: cost compares scores within a margin, and pairwise criteria "
            f"({', '.join(pairwise)}) give a preference, not a score",
            file=str(loaded.path), line=loaded.doc.line_of(("improve", "objective")),
            field="improve.objective",
            hint="Remove pairwise: true from those criteria for a cost cycle, or keep "
                 "objective: score.")
    for i, name in enumerate(improve.models):
        check_model(loaded, name, keys=keys, file=str(loaded.path),
                    line=loaded.doc.line_of(("improve", "models", i)), field=f"improve.models[{i}]")
    if improve.examples and agent.adk:
        raise ConfigError(
            "improve.examples: an ADK agent's session starts with the case's message, so a "
            "prompt's few-shot examples would not reach its model",
            file=str(loaded.path), line=loaded.doc.line_of(("improve", "examples")),
            field="improve.examples", hint="Remove improve.examples, or run the prompt on a "
            "model (agent: provider:model).")
    return cases


def held_out(loaded: LoadedConfig, improve: ImproveConfig, cases: Sequence[TestCase]) -> frozenset[str]:
    """The held-out case ids of improve.validation; a bad one names its line."""
    try:
        return held_out_cases(cases, improve.validation)
    except ConfigError as e:
        raise relocate(e, file=str(loaded.path), field="improve.validation",
                       line=loaded.doc.line_of(("improve", "validation"))) from None


def loop_settings(loaded: LoadedConfig, improve: ImproveConfig,
                  cases: Sequence[TestCase], start_model: str | None = None) -> LoopSettings:
    """How the loop evaluates and accepts, as cycle.yaml's ``run:`` and ``improve:`` say;
    ``start_model``: the agent model the cycle starts on."""
    c = loaded.config
    concurrency, timeout = in_flight(c.run, batch=improve.batch)
    return LoopSettings(
        acceptance=improve.acceptance,
        low_score=improve.low_score if improve.low_score is not None else c.pass_threshold,
        context_tokens=improve.context_tokens, bump=improve.bump,
        required_cases=frozenset(improve.required_cases), iterations=c.run.iterations,
        concurrency=concurrency, timeout=timeout,
        stop_on_first_failure=c.run.stop_on_first_failure,
        held_out=held_out(loaded, improve, cases), max_iterations=improve.max_iterations,
        allowed_variables=frozenset(improve.allowed_variables),
        min_agreement=improve.judge.min_agreement if improve.judge else None,
        confirm_labels=improve.judge.confirm_labels if improve.judge else None,
        population=improve.population, screen_cases=improve.screen_cases,
        merge=improve.merge, examples=improve.examples.max if improve.examples else 0,
        objective=improve.objective, margin=improve.margin or 0.0,
        # the model the cycle starts on is the incumbent's already: never a candidate
        models=tuple(dict.fromkeys(m for m in improve.models if m != start_model)),
    )


def build_loop(
    loaded: LoadedConfig,
    *,
    store: Store,
    reviewer: Reviewer,
    bus: EventBus | None = None,
    improve: ImproveConfig | None = None,
    cache: ResponseCache | None = None,
    cases: Sequence[TestCase] | None = None,
) -> Loop:
    """The cycle a cycle.yaml describes. ``cases``: what ``prepare`` returned, when the
    caller validated already. Nothing is called and no version is saved here: a prompt
    file becomes a version when a new cycle starts (a resumed one continues its own)."""
    improve = improve or load_improve_config(loaded)
    cases = cases if cases is not None else prepare(loaded, improve)
    c = loaded.config
    bus = bus or EventBus()
    stop = improve.stop_condition(base_dir=str(loaded.base_dir))
    caps = [x for x in (cost_cap(stop), c.budget) if x is not None]
    budget = Budget(min(caps) if caps else None)
    stored = c.prompt.startswith(STORE_PREFIX)
    # read only, to name the prompt and its models: nothing is saved before a resume
    prompt = store.resolve(c.prompt[len(STORE_PREFIX):]).prompt if stored else load_prompt(loaded)[0]

    def starting_version() -> Version:
        """A prompt file whose content is new is saved (and becomes head); an unchanged
        one continues from ``head``, where earlier cycles left it. ``store:ID@label``
        starts from that label (``store:ID``: head)."""
        p, version = load_prompt(loaded, store)
        if stored:
            return store.get_version(p.id, version or "head")
        return store.resolve(f"{p.id}@head")

    models = Models(loaded, bus=bus, budget=budget, cache=cache, store=store,
                    batch=improve.batch)

    def model(name: str, role: str) -> Model:
        # the evaluations' calls may go in batch jobs; the improver's one call stays live
        return models(name, role, live=role == "improver")

    def agent_for(version_prompt: Prompt) -> Agent:
        name = agent_model_name(loaded, version_prompt)
        if name is None:
            raise _not_a_model_agent(loaded)
        # a cost cycle's version moved to one of improve.models runs on it, whatever
        # cycle.yaml's agent says (its params.model is what the version changed)
        chosen = version_prompt.params.get("model")
        if chosen in improve.models:
            name = str(chosen)
        shared = {"owns_model": True, "mocks": c.tools.mocks, "max_steps": c.tools.max_steps,
                  "user_model": lambda user: model(user, "user_sim"),
                  "user_agents": c.tools.user_agents}
        if c.agent_config.adk:
            from cycle.agents.adk import AdkAgent

            return AdkAgent(c.agent_config.adk, version_prompt, model(name, "agent"),
                            allow_code_execution=c.agent_config.allow_code_execution,
                            prompt_agent=c.agent_config.prompt_agent, **shared)
        return PromptAgent(version_prompt, model(name, "agent"), **shared)

    agent_name = agent_model_name(loaded, prompt)
    judge_names = judge_models(loaded, prompt)
    assert judge_names
    improver_name = c.improver or judge_names[0]
    judges = [model(name, "judge") for name in judge_names] if needs_judge(loaded, cases) else []
    improver_prompt, improver_version = ensure_improver_prompt(store, improve.improver_prompt)
    improver_model = model(improver_name, "improver")
    improver = Improver(improver_model, prompt=improver_prompt, version=improver_version,
                        max_suggestions=improve.max_suggestions)
    run_config = stored_config(c)
    run_config["config_path"] = str(loaded.path)
    return Loop(
        start=starting_version, prompt_id=prompt.id, cases=cases, agent=agent_for,
        judge=Judge(c.criteria, model=judges or None, threshold=c.pass_threshold,
                    description=c.agent_config.description),
        improver=improver, reviewer=reviewer, store=store, stop=stop, budget=budget, bus=bus,
        settings=loop_settings(loaded, improve, cases, agent_name),
        record={"config_file": str(loaded.path), "improve": improve.model_dump(mode="json"),
                "overrides": overridden_values(loaded),
                "agent": (f"adk:{c.agent_config.adk} on {agent_name}" if c.agent_config.adk
                          else agent_name), "judge": panel_name(judge_names),
                "improver": improver_name},
        run_config=run_config,
        closers=[m.aclose for m in (*judges, improver_model)],
    )
