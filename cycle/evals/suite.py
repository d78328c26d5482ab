"""From a loaded cycle.yaml to a ready Runner: prompt, cases, agent, judge, models.

    suite = build_suite(loaded, store=store, bus=bus)
    result = await suite.runner(store=store, bus=bus).run(meta=suite.meta())
    await suite.aclose()

Every file (config, prompt, cases) is validated here, before any model is
called. The loop builds a suite per prompt version with ``prompt=``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cycle.config import LoadedConfig, load_prompt
from cycle.errors import ConfigError
from cycle.evals.agent import Agent, CallableAgent, HttpAgent, PromptAgent
from cycle.evals.case import TestCase, load_cases, select
from cycle.evals.runner import Runner
from cycle.events import EventBus
from cycle.judge import Judge
from cycle.llm.base import ProviderOptions
from cycle.llm.budget import Budget
from cycle.llm.cache import ResponseCache
from cycle.llm.model import Model
from cycle.llm.pricing import DEFAULT_TABLE, PriceTable
from cycle.llm.registry import get_model
from cycle.prompt import Prompt


def provider_options(loaded: LoadedConfig, model_name: str) -> ProviderOptions | None:
    """The connection settings cycle.yaml gives for a model's provider, if any."""
    provider = model_name.partition(":")[0]
    settings = loaded.config.providers.get(provider)
    if settings is None:
        return None
    return ProviderOptions(base_url=settings.base_url, api_version=settings.api_version,
                           timeout=settings.timeout, max_connections=settings.max_connections)


def price_table(loaded: LoadedConfig) -> PriceTable:
    """The built-in prices with cycle.yaml's ``pricing:`` overrides."""
    overrides = {name: p.model_dump(exclude_none=True) for name, p in loaded.config.pricing.items()}
    return DEFAULT_TABLE.with_overrides(overrides) if overrides else DEFAULT_TABLE


def open_cache(loaded: LoadedConfig, *, enabled: bool = True) -> ResponseCache | None:
    """The response cache cycle.yaml asks for, or None when it (or ``--no-cache``) says off."""
    options = loaded.config.cache
    if not (enabled and options.enabled):
        return None
    return ResponseCache(loaded.resolve_path(options.path), ttl=float(options.ttl))


def make_model(
    loaded: LoadedConfig,
    name: str,
    *,
    role: str,
    bus: EventBus | None = None,
    budget: Budget | None = None,
    cache: ResponseCache | None = None,
) -> Model:
    """A model as cycle.yaml configures it: provider options, prices, cache, budget, events."""
    return get_model(name, options=provider_options(loaded, name), bus=bus, budget=budget,
                     cache=cache, pricing=price_table(loaded), role=role)


def agent_model_name(loaded: LoadedConfig, prompt: Prompt | None) -> str | None:
    """The agent's model: cycle.yaml's agent (or agent.model), else the prompt's params.model."""
    spec = loaded.config.agent_config
    if spec.function or spec.http:
        return None
    name = spec.model or (prompt.params.get("model") if prompt else None)
    if not name:
        raise ConfigError(
            "no agent model: cycle.yaml names none and the prompt has no params.model",
            file=str(loaded.path), field="agent",
            hint="Add e.g. 'agent: openai:gpt-4o-mini' (or offline:default) to cycle.yaml.",
        )
    return str(name)


def judge_model_name(loaded: LoadedConfig, prompt: Prompt | None) -> str | None:
    """The judge's model: cycle.yaml's judge, else the agent's model."""
    return loaded.config.judge or agent_model_name(loaded, prompt)


@dataclass
class Suite:
    """Everything a run needs, built from one config."""

    loaded: LoadedConfig
    prompt: Prompt | None
    version: str | None
    cases: list[TestCase]
    agent: Agent
    judge: Judge
    _closers: list[Any] = field(default_factory=list)

    def runner(
        self,
        *,
        store: Any = None,
        bus: EventBus | None = None,
        iterations: int | None = None,
        concurrency: int | None = None,
        timeout: float | None = None,
        stop_on_first_failure: bool | None = None,
    ) -> Runner:
        run = self.loaded.config.run
        return Runner(
            agent=self.agent, judge=self.judge, cases=self.cases,
            iterations=iterations or run.iterations,
            concurrency=concurrency or run.concurrency,
            timeout=timeout if timeout is not None else run.timeout,
            store=store, bus=bus,
            stop_on_first_failure=run.stop_on_first_failure if stop_on_first_failure is None
            else stop_on_first_failure,
        )

    def meta(self, **extra: Any) -> dict[str, Any]:
        """The run metadata to store: prompt id and version, and the config as run."""
        cfg = self.loaded.config.model_dump(mode="json", exclude={"improve"})
        cfg["config_path"] = str(self.loaded.path)
        return {
            "prompt_id": self.prompt.id if self.prompt else None,
            "version": self.version,
            "config": cfg,
            **extra,
        }

    async def aclose(self) -> None:
        for closer in self._closers:
            await closer()
        self._closers.clear()


def load_suite_cases(
    loaded: LoadedConfig, *, tags: Sequence[str] = (), ids: Sequence[str] = ()
) -> list[TestCase]:
    """The config's cases, validated, filtered by tags (config's and given) and ids."""
    c = loaded.config
    cases = load_cases(c.cases, loaded.base_dir, criteria=c.criteria, threshold=c.pass_threshold)
    selected = select(cases, tags=list(tags) or c.run.tags, ids=ids)
    if not selected:
        raise ConfigError(
            "no case matches the filters", file=str(loaded.path),
            hint="Check --tag/--case and run.tags; known tags: "
            + (", ".join(sorted({t for x in cases for t in x.tags})) or "none") + ".",
        )
    return selected


def build_suite(
    loaded: LoadedConfig,
    *,
    store: Any = None,
    bus: EventBus | None = None,
    budget: Any = None,
    cache: ResponseCache | None = None,
    prompt: Prompt | None = None,
    version: str | None = None,
    tags: Sequence[str] = (),
    ids: Sequence[str] = (),
    agent_model: str | None = None,
    judge_model: str | None = None,
    cases: Sequence[TestCase] | None = None,
) -> Suite:
    """Validate every input, then build the agent and judge (models are created, not called)."""
    if prompt is None:
        prompt, version = load_prompt(loaded, store)
    case_list = list(cases) if cases is not None else load_suite_cases(loaded, tags=tags, ids=ids)
    closers: list[Any] = []

    def model(name: str, role: str) -> Any:
        m = make_model(loaded, name, role=role, bus=bus, budget=budget, cache=cache)
        closers.append(m.aclose)
        return m

    spec = loaded.config.agent_config
    agent: Agent
    if spec.function:
        agent = CallableAgent(spec.function)
    elif spec.http:
        http = HttpAgent(spec.http, headers=spec.headers,
                         timeout=loaded.config.run.timeout or 120.0, prompt=prompt)
        closers.append(http.aclose)
        agent = http
    else:
        name = agent_model or agent_model_name(loaded, prompt)
        assert name is not None and prompt is not None
        agent = PromptAgent(prompt, model(name, "agent"))
    judge_name = judge_model or loaded.config.judge or agent_model or agent_model_name(loaded, prompt)
    c = loaded.config
    needs_llm = any(x.check is None for x in c.criteria) or any(
        x.check is None and x.rubric is not None for case in case_list for x in case.criteria)
    judge_llm = model(judge_name, "judge") if (judge_name and needs_llm) else None
    judge = Judge(c.criteria, model=judge_llm, threshold=c.pass_threshold)
    return Suite(loaded=loaded, prompt=prompt, version=version, cases=case_list, agent=agent,
                 judge=judge, _closers=closers)
