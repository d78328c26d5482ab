"""From a loaded cycle.yaml to a ready Runner: prompt, cases, agent, judge, models.

    suite = build_suite(loaded, store=store, bus=bus)
    result = await suite.runner(store=store, bus=bus).run(meta=suite.meta())
    await suite.aclose()

Every file (config, prompt, cases) is validated here, before any model is
called. The loop builds a suite per prompt version with ``prompt=``.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from cycle.agents import Agent, CallableAgent, HttpAgent, PromptAgent
from cycle.assemble.config import (
    STORE_PREFIX,
    LoadedConfig,
    ProviderSettings,
    RunOptions,
    load_prompt,
    overridden_values,
)
from cycle.cases import (
    CaseList,
    FunctionUser,
    SimulatedUser,
    TestCase,
    expand_patterns,
    load_case_files,
    select,
)
from cycle.errors import ConfigError, UnknownProviderError
from cycle.evals.runner import Runner
from cycle.events import EventBus
from cycle.judge import Judge
from cycle.judge.criteria import CriterionConfig
from cycle.llm.base import ProviderOptions
from cycle.llm.batch import BatchSettings
from cycle.llm.budget import Budget
from cycle.llm.cache import ResponseCache
from cycle.llm.http import safe_url
from cycle.llm.model import Model, ModelServices, RetryPolicy
from cycle.llm.pricing import DEFAULT_TABLE, PriceTable
from cycle.llm.providers import known_provider
from cycle.llm.registry import get_api, get_model
from cycle.mocks import MockSpec
from cycle.prompts import render
from cycle.records import Prompt, ToolDef
from cycle.store import Store
from cycle.yamlload import relocate


def provider_settings(loaded: LoadedConfig, model_name: str) -> ProviderSettings | None:
    """cycle.yaml's ``providers:`` entry for a model's provider, if any."""
    return loaded.config.providers.get(model_name.partition(":")[0])


def provider_options(loaded: LoadedConfig, model_name: str) -> ProviderOptions | None:
    """The connection settings cycle.yaml gives for a model's provider, if any."""
    settings = provider_settings(loaded, model_name)
    if settings is None:
        return None
    return ProviderOptions(base_url=settings.base_url, api_version=settings.api_version,
                           timeout=settings.timeout, max_connections=settings.max_connections,
                           max_response_mb=settings.max_response_mb,
                           extra={"structured": settings.structured})


def price_table(loaded: LoadedConfig) -> PriceTable:
    """The built-in prices with cycle.yaml's ``pricing:`` overrides."""
    overrides = {name: p.model_dump(exclude_none=True) for name, p in loaded.config.pricing.items()}
    return DEFAULT_TABLE.with_overrides(overrides) if overrides else DEFAULT_TABLE


def open_cache(loaded: LoadedConfig, *, enabled: bool = True,
               create: bool = True) -> ResponseCache | None:
    """The response cache cycle.yaml asks for, or None when it (or ``--no-cache``) says off
    (``create=False``: None, too, when the cache file does not exist yet)."""
    options = loaded.config.cache
    path = loaded.resolve_path(options.path)
    if not (enabled and options.enabled) or not (create or path.is_file()):
        return None
    return ResponseCache(path, ttl=float(options.ttl))


def run_budget(loaded: LoadedConfig) -> Budget | None:
    """The hard cap of one run: cycle.yaml's ``budget`` (or --budget), if any."""
    limit = loaded.config.budget
    return Budget(limit) if limit is not None else None


class Models:
    """The models of one run or cycle, as cycle.yaml configures each (provider options,
    retries, batch timing) around the services they share (cache, events, budget, prices,
    the store's journal and what it keeps of compatible servers). With ``batch``, their
    calls go in provider batch jobs kept in the store's batch ledger."""

    def __init__(self, loaded: LoadedConfig, *, bus: EventBus | None = None,
                 budget: Budget | None = None, cache: ResponseCache | None = None,
                 store: Store | None = None, batch: bool = False) -> None:
        self.loaded = loaded
        self.services = ModelServices(
            cache=cache, bus=bus, budget=budget, pricing=price_table(loaded),
            journal=store.journal if store is not None else None,
            forms=store.servers if store is not None else None)
        self.batch = batch
        self.ledger = store.batches if store is not None else None

    def __call__(self, name: str, role: str, *, live: bool = False) -> Model:
        """``name``'s model for ``role``; ``live``: never in a batch job."""
        settings = provider_settings(self.loaded, name)
        retry = RetryPolicy(max_retry_after=settings.max_retry_after) if settings else None
        batching = None
        if self.batch and not live:
            # without a providers: section the settings are the defaults (a Struct's class
            # attribute is its field descriptor, not the default: reading it broke batches)
            timing = {"poll": settings.batch_poll,
                      "window": settings.batch_window} if settings else {}
            batching = BatchSettings(**timing, max_requests=self.loaded.config.run.batch_size,
                                     ledger=self.ledger)
        return get_model(name, self.services, options=provider_options(self.loaded, name),
                         role=role, retry=retry, batch=batching)


def stored_config(config: Any) -> dict[str, Any]:
    """cycle.yaml's settings as a run or a cycle stores them: the URLs (a provider's
    base_url, an HTTP agent's endpoint) without the credentials they may carry, and an
    HTTP agent's headers with the secrets written in the file itself as ``***``
    (``stored_header``: a ``${NAME}`` and a scheme, ``Bearer``, are kept)."""
    cfg = config.model_dump(mode="json", exclude={"improve"})
    for settings in (cfg.get("providers") or {}).values():
        if isinstance(settings, dict) and settings.get("base_url"):
            settings["base_url"] = safe_url(settings["base_url"])
    agent = cfg.get("agent")
    if isinstance(agent, dict) and agent.get("http"):
        agent["http"] = safe_url(agent["http"])
        from cycle.agents.agent import stored_header

        agent["headers"] = {k: stored_header(k, v) for k, v in (agent.get("headers") or {}).items()}
    return cfg


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


def judge_models(loaded: LoadedConfig, prompt: Prompt | None) -> list[str]:
    """The judge's models: cycle.yaml's judge (a panel's members, in order), else the
    agent's model; [] when there is none (an agent that is not a model, no judge)."""
    given = loaded.config.judges
    if given:
        return given
    agent = agent_model_name(loaded, prompt)
    return [agent] if agent else []


def in_flight(run: RunOptions, *, batch: bool) -> tuple[int, float | None]:
    """A run's concurrency and case timeout: with batch jobs, ``batch_size`` cases in flight
    (each job holds the calls the cases make together) and no timeout (a job takes hours)."""
    return (run.batch_size, None) if batch else (run.concurrency, run.timeout)


class Suite(Struct):
    """Everything a run needs, built from one config."""

    loaded: LoadedConfig
    prompt: Prompt | None
    version: str | None
    cases: CaseList
    agent: Agent
    judge: Judge
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def runner(self, *, store: Store | None = None, bus: EventBus | None = None) -> Runner:
        """The run as cycle.yaml's ``run:`` (with any command-line overrides) sets it."""
        run = self.loaded.config.run
        concurrency, timeout = in_flight(run, batch=run.batch)
        return Runner(
            agent=self.agent, judge=self.judge, cases=self.cases, iterations=run.iterations,
            concurrency=concurrency, timeout=timeout, store=store, bus=bus,
            stop_on_first_failure=run.stop_on_first_failure,
        )

    def meta(self, **extra: Any) -> dict[str, Any]:
        """The run metadata to store: prompt id and version, and the config as run."""
        cfg = stored_config(self.loaded.config)
        cfg["config_path"] = str(self.loaded.path)
        # the command line's settings: a --resume runs with them again
        cfg["overrides"] = overridden_values(self.loaded)
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
) -> CaseList:
    """The config's cases, validated, filtered by tags (config's and given) and ids."""
    c = loaded.config
    files: dict[Path, None] = {}  # each file once, in order: globbed once, here
    for i, pattern in enumerate(c.cases):
        line = loaded.doc.line_of(("cases", i)) or loaded.doc.line_of(("cases",))
        try:
            found = expand_patterns([pattern], loaded.base_dir)
        except ConfigError as e:
            raise relocate(e, file=str(loaded.path), line=line, field=f"cases[{i}]") from None
        # a glob that matches nothing is a typo far more often than an intention
        if not found:
            raise ConfigError(
                f"no case file matches '{pattern}' (looked in {loaded.base_dir.resolve()})",
                file=str(loaded.path), line=line, field=f"cases[{i}]",
                hint="The globs are relative to cycle.yaml, e.g. cases/*.yaml; remove the entry "
                "if it is not needed.",
            )
        files.update(dict.fromkeys(found))
    cases = load_case_files(files, criteria=c.criteria, threshold=c.pass_threshold,
                            readers=(lambda path: _eval_file_cases(path, loaded.base_dir),),
                            project=loaded.base_dir.resolve())
    selected = select(cases, tags=list(tags) or c.run.tags, ids=ids)
    if not selected:
        raise ConfigError(
            "no case matches the filters", file=str(loaded.path),
            hint="Check --tag/--case and run.tags; known tags: "
            + (", ".join(sorted({t for x in cases for t in x.tags})) or "none") + ".",
        )
    return selected


def _eval_file_cases(path: Path, base_dir: Path) -> list[TestCase] | None:
    """An eval file's cases (None if ``path`` is not one). Only a JSON file can be one, and
    the reader's module (about 20 ms of start-up) is imported only for those."""
    if path.suffix.lower() != ".json":
        return None
    from cycle.formats import toolforge

    return toolforge.read_cases(path, base_dir)


def _case_where(case: TestCase) -> tuple[str, int | None]:
    file, _, line = case.source.rpartition(":")
    return file, int(line) if line.isdigit() else None


def _importable(path: str, *, file: str | None, line: int | None, field: str,
                project: Path | None = None) -> None:
    """Import user code by path now (``project``: as a check of that project does, see
    ``cycle.imports``); a bad path is a ConfigError at ``file:line (field)``."""
    from cycle.imports import import_object

    try:
        import_object(path, what=field, project=project)
    except ConfigError as e:
        raise relocate(e, file=file, line=line, field=field) from None


def user_code_importable(loaded: LoadedConfig) -> None:
    """User code beside cycle.yaml is importable (checks, agents, stop predicates, snapshots)."""
    base = str(loaded.base_dir.resolve())
    if base not in sys.path:
        sys.path.insert(0, base)


def _check_imports_and_templates(
    loaded: LoadedConfig, cases: CaseList, prompt: Prompt | None,
    suite_criteria: Sequence[CriterionConfig] | None = None,
) -> CaseList:
    """Import every callable the run will need and render every template with every
    case's variables, so that a typo fails now, with its file and line, not as an
    error in each case after the models were paid for.

    Returns the cases with parts of their own (mocks, user agents, a conversation,
    criteria), the only ones the checks after this one need to look at: each pass over
    every case unpacks it again (6 ms for 500 cases)."""
    crits = judged_on(loaded, suite_criteria)
    user_code_importable(loaded)
    _check_suite_code(loaded, crits)
    spec = loaded.config.agent_config
    own: list[int] = []
    for i, case in enumerate(cases):
        if case.mocks or case.user_agents or case.conversation is not None or case.criteria:
            own.append(i)
        file, line = _case_where(case)
        _check_conversation(case, file, line)
        _check_case_criteria(loaded, case, crits, file, line)
        if prompt is not None and not spec.function and not (spec.http and isinstance(case.input, str)):
            for name, source in (("system", prompt.system), ("user_template", prompt.user_template)):
                try:
                    render(source, case.variables, field=name)
                except ConfigError as e:
                    raise ConfigError(
                        f"case '{case.id}': the prompt's {name} "
                        + e.message.split(": ", 1)[-1], file=file, line=line, field="input",
                        hint=(e.hint or "") + " Add the variable to the case's input, or change "
                        "the prompt's template.",
                    ) from None
    return cases.pick(own)


def _check_suite_code(loaded: LoadedConfig, crits: Sequence[CriterionConfig]) -> None:
    """The suite's checks and its agent import (an ADK agent: and runs no model-written
    code unless allowed)."""
    cfg = str(loaded.path)
    for i, crit in enumerate(crits):
        for key, path in crit.check.imports() if crit.check else ():
            _importable(path, file=cfg, line=loaded.doc.line_of(("criteria", i, "check", key)),
                        field=f"criteria[{i}].check.{key}", project=crit.check.project)
    spec = loaded.config.agent_config
    if spec.function:
        _importable(spec.function, file=cfg, line=loaded.doc.line_of(("agent", "function")),
                    field="agent.function", project=loaded.base_dir.resolve())
    if spec.http:
        _header_variables_set(loaded, spec.headers)
        _warn_literal_secrets(loaded, spec.headers)
    if spec.adk:
        from cycle.agents.adk import instruct_agent, load_adk_agent, refuse_code_execution

        try:
            found = load_adk_agent(spec.adk)
            if not spec.allow_code_execution:
                refuse_code_execution(found, spec.adk)
            instruct_agent(found, spec.adk, spec.prompt_agent)
        except ConfigError as e:
            key = "prompt_agent" if e.field == "agent.prompt_agent" else "adk"
            raise relocate(e, file=cfg, line=loaded.doc.line_of(("agent", key)),
                           field=f"agent.{key}") from None


def _header_variables_set(loaded: LoadedConfig, headers: Mapping[str, str]) -> None:
    """Every ${NAME} an HTTP agent's headers read is set: an unset one was sent as an
    empty string (``Authorization: Bearer ``), and every case failed on the endpoint's 401."""
    import os

    from cycle.agents.agent import env_names

    for header, value in headers.items():
        unset = [name for name in env_names(value) if name not in os.environ]
        if unset:
            raise ConfigError(
                f"header {header!r} reads ${{{unset[0]}}}, which is not set",
                file=str(loaded.path), line=loaded.doc.line_of(("agent", "headers", header)),
                field=f"agent.headers.{header}",
                hint=f"Set {unset[0]} in the environment or in .env beside cycle.yaml.")


#: the headers warned of (cycle.yaml, header): once a process, however often it is loaded
_WARNED: set[tuple[str, str]] = set()


def _warn_literal_secrets(loaded: LoadedConfig, headers: Mapping[str, str]) -> None:
    """Say (on stderr, naming the header, never its value) that a secret is written in
    cycle.yaml itself: cycle masks it in what it keeps, yet the file goes wherever the
    project goes (a commit, a shared folder), which the environment does not."""
    from cycle.agents.agent import literal_secret_headers

    for header in literal_secret_headers(headers):
        if (str(loaded.path), header) in _WARNED:
            continue
        _WARNED.add((str(loaded.path), header))
        line = loaded.doc.line_of(("agent", "headers", header))
        sys.stderr.write(
            f"warning: {loaded.path}{f':{line}' if line else ''} (agent.headers.{header}): the "
            f"header holds a secret written in cycle.yaml; cycle sends it and shows it as ***, "
            f"but it belongs in the environment: write '{header}: ${{NAME}}' and set NAME in "
            ".env beside cycle.yaml or in the environment\n")


def _check_conversation(case: TestCase, file: str, line: int | None) -> None:
    """A conversation case's user, end conditions and follow-ups import and render."""
    if case.conversation is None:
        return
    ending, user = case.conversation.end_when, case.conversation.user
    if isinstance(user, FunctionUser):
        _importable(user.function, file=file, line=line,
                    field=f"case {case.id}: conversation.user.function")
    if isinstance(user, SimulatedUser):
        if user.format_history:
            _importable(user.format_history, file=file, line=line,
                        field=f"case {case.id}: conversation.user.format_history")
        for key in ("persona", "goal", "system"):
            text = getattr(user, key)
            try:
                if text:
                    render(text, case.variables, field=f"conversation.user.{key}")
            except ConfigError as e:
                raise relocate(e, file=file, line=line,
                               field=f"case {case.id}: conversation.user.{key}") from None
    for cond in ending.walk() if ending else ():
        if cond.custom is not None:
            _importable(cond.custom, file=file, line=line,
                        field=f"case {case.id}: conversation.end_when.custom")
    for n, say in enumerate(case.conversation.user_turns()):
        try:
            render(say, case.variables, field="conversation.follow_ups")
        except ConfigError as e:
            raise ConfigError(
                f"case '{case.id}': follow-up turn {n + 2} " + e.message.split(": ", 1)[-1],
                file=file, line=line, field="conversation.follow_ups",
                hint=(e.hint or "") + " A follow-up may use the case's input variables.",
            ) from None


def _check_case_criteria(loaded: LoadedConfig, case: TestCase,
                         crits: Sequence[CriterionConfig], file: str,
                         line: int | None) -> None:
    """The checks ``case`` is judged on import (its own) and render with its variables
    (the suite's too: an error names the line of the check it is in)."""
    from cycle.judge.criteria import merge

    criteria = merge(crits, case.criteria) if case.criteria else crits
    own = {x.id for x in case.criteria}
    for crit in criteria:
        if crit.check is None:
            continue
        if crit.id in own:
            for key, path in crit.check.imports():
                _importable(path, file=file, line=line,
                            field=f"case {case.id}: criteria ({crit.id}).check.{key}",
                            project=crit.check.project)
        for name, source in crit.check.templates():
            try:
                render(source, case.variables, field=name)
            except ConfigError as e:
                if crit.id in own:
                    where_file, where_line = file, line
                    field_ = f"case {case.id}: criteria ({crit.id}).check.{name}"
                else:
                    i = next(n for n, x in enumerate(crits) if x.id == crit.id)
                    where_file = str(loaded.path)
                    where_line = loaded.doc.line_of(("criteria", i, "check", name))
                    field_ = f"criteria[{i}].check.{name}"
                raise ConfigError(
                    f"case '{case.id}' ({case.source}): " + e.message.split(": ", 1)[-1],
                    file=where_file, line=where_line, field=field_,
                    hint=(e.hint or "") + " Add the variable to every case's input, or "
                    "use only variables every case has.",
                ) from None


def declared_tools(loaded: LoadedConfig, prompt: Prompt) -> list[ToolDef]:
    """The tools the agent's model is shown: the prompt's, or an ADK agent's own with the
    prompt's descriptions (where the prompt declares the tool)."""
    adk = loaded.config.agent_config.adk
    if not adk:
        return list(prompt.tools)
    from cycle.agents.adk import adk_tools, load_adk_agent, merged_tools

    return merged_tools(prompt.tools, adk_tools(load_adk_agent(adk)))


def _check_agent_kind(loaded: LoadedConfig, cases: Sequence[TestCase]) -> None:
    """What the agent kind cannot do is refused now, never silently skipped: mocks or user
    agents for an HTTP endpoint that runs its own tools, a conversation for a Python
    function that is not given the conversation."""
    spec = loaded.config.agent_config
    cfg = str(loaded.path)
    if spec.http and spec.protocol == "plain":
        given = [(cfg, loaded.doc.line_of(("tools", key)), f"tools.{key}")
                 for key in ("mocks", "user_agents") if getattr(loaded.config.tools, key)]
        for case in cases:
            file, line = _case_where(case)
            given += [(file, line, f"case {case.id}: {key}")
                      for key in ("mocks", "user_agents") if getattr(case, key)]
        if given:
            file, line, field_ = given[0]
            raise ConfigError(
                "the HTTP agent runs its own tools, so cycle cannot answer them from "
                "mocks or user agents", file=file, line=line, field=field_,
                hint="Remove the mocks and user agents, or let the endpoint ask cycle to run "
                "its tools: with `agent: {http: URL, protocol: tools}` each POST also carries "
                "`tools` (the prompt's declared tools, OpenAI's shape), and an answer "
                '{"tool_calls": [{"id", "name", "arguments"}]} without "response" has cycle '
                "answer each call from the mocks and user agents and POST again with the "
                "calls and their results appended to `messages` (role: tool), until the "
                'endpoint answers {"response": ...}.')
    if spec.function:
        from cycle.agents.agent import takes_conversation
        from cycle.imports import import_object

        if takes_conversation(import_object(spec.function, what="agent.function",
                                            project=loaded.base_dir.resolve())):
            return
        for case in cases:
            if case.conversation is not None:
                file, line = _case_where(case)
                raise ConfigError(
                    f"case {case.id} is a conversation, and agent.function "
                    f"{spec.function} is not given the conversation so far",
                    file=file, line=line, field=f"case {case.id}: conversation",
                    hint="Give the function a messages parameter (def agent(inp, tools, "
                    "messages)): each user turn is one call with the conversation so far.")


def _check_mocks(loaded: LoadedConfig, cases: Sequence[TestCase], prompt: Prompt) -> None:
    """Every mock names a declared tool, every mock function imports, and passthrough is
    asked only of tools that have a real function: a typo fails now, before any call."""

    declared = {t.name: t for t in declared_tools(loaded, prompt)}
    known = ", ".join(declared) or "none (the prompt declares no tools)"
    cfg = str(loaded.path)
    sources: list[tuple[str, MockSpec, str, int | None, str]] = [
        (name, mock, cfg, loaded.doc.line_of(("tools", "mocks", name)), f"tools.mocks.{name}")
        for name, mock in loaded.config.tools.mocks.items()
    ]
    agents = [(name, spec, cfg, loaded.doc.line_of(("tools", "user_agents", name)),
               f"tools.user_agents.{name}") for name, spec in loaded.config.tools.user_agents.items()]
    # a case's place is looked up only when it has mocks to name it
    for case in cases:
        if not (case.mocks or case.user_agents):
            continue
        file, line = _case_where(case)
        sources += [(name, mock, file, line, f"case {case.id}: mocks.{name}")
                    for name, mock in case.mocks.items()]
        agents += [(name, spec, file, line, f"case {case.id}: user_agents.{name}")
                   for name, spec in case.user_agents.items()]
    for name, spec, file, line, field_ in agents:
        if name not in declared:
            raise ConfigError(f"a user agent for '{name}', which the prompt does not declare",
                              file=file, line=line, field=field_,
                              hint=f"Declared tools: {known}.")
        for key in ("function", "format_prompt", "format_response"):
            path = getattr(spec, key)
            if path:
                _importable(path, file=file, line=line, field=f"{field_}.{key}")
    for name, mock, file, line, field_ in sources:
        tool = declared.get(name)
        if tool is None:
            raise ConfigError(f"a mock for '{name}', which the prompt does not declare",
                              file=file, line=line, field=field_,
                              hint=f"Declared tools: {known}. Fix the name, or declare the "
                              "tool under tools: in the prompt file.")
        if mock.passthrough and not tool.function:
            raise ConfigError(f"passthrough for '{name}', which has no Python function to run",
                              file=file, line=line, field=field_,
                              hint=f"Declare it with function: package.module:name in the prompt "
                              f"file, or give {name} a mock value.")
        if mock.function:
            _importable(mock.function, file=file, line=line, field=f"{field_}.function",
                        project=mock.project)


def _check_models(
    loaded: LoadedConfig, prompt: Prompt | None, *, needs_judge: bool, improver: bool,
    cases: Sequence[TestCase] = (), keys: bool = True,
) -> None:
    """Every model name names a known provider whose key is set (nothing is called);
    without ``keys`` (a dry run, which sends nothing) the key is not asked for."""
    c = loaded.config
    cfg = str(loaded.path)
    spec = c.agent_config
    names: list[tuple[str, str, int | None, str]] = []  # (name, file, line, field)

    def where(key: str) -> tuple[str, int | None, str]:
        if key in loaded.overrides:
            return "", None, loaded.overrides[key]
        if key == "agent" and spec.model:
            return cfg, loaded.doc.line_of(("agent", "model")) or loaded.doc.line_of(("agent",)), "agent"
        if key != "agent" and getattr(c, key):
            return cfg, loaded.doc.line_of((key,)), key
        return "", None, "params.model of the prompt"

    agent = None
    if not (spec.function or spec.http):
        agent = spec.model or (prompt.params.get("model") if prompt else None)
        if agent:
            names.append((str(agent), *where("agent")))
        elif prompt is not None:
            agent_model_name(loaded, prompt)  # raises: no agent model at all
    judges = c.judges or ([str(agent)] if agent else [])
    if needs_judge:
        for i, name in enumerate(judges):
            if not c.judges:
                names.append((name, *where("agent")))
            elif "judge" in loaded.overrides or len(judges) == 1:
                names.append((name, *where("judge")))
            else:  # a panel's member, at its own line
                names.append((name, cfg, loaded.doc.line_of(("judge", i))
                              or loaded.doc.line_of(("judge",)), f"judge[{i}]"))
    if improver:
        name = c.improver or (judges[0] if judges else None)
        if name:
            names.append((str(name), *where("improver" if c.improver else
                                            "judge" if c.judge else "agent")))
    for name, spec in c.tools.user_agents.items():
        if spec.model:
            names.append((spec.model, cfg, loaded.doc.line_of(("tools", "user_agents", name)),
                          f"tools.user_agents.{name}.model"))
    for case in cases:
        file, line = _case_where(case)
        names += [(spec.model, file, line, f"case {case.id}: user_agents.{name}.model")
                  for name, spec in case.user_agents.items() if spec.model]
        conversation = case.conversation
        if conversation is None:
            continue
        if isinstance(conversation.user, SimulatedUser):
            names.append((conversation.user.model, file, line,
                          f"case {case.id}: conversation.user.model"))
        for cond in conversation.end_when.walk() if conversation.end_when else ():
            if cond.natural_language and cond.natural_language.model:
                names.append((cond.natural_language.model, file, line,
                              f"case {case.id}: conversation.end_when.natural_language.model"))
    for name, file, line, field_ in names:
        check_model(loaded, name, keys=keys, file=file, line=line, field=field_)


def check_model(loaded: LoadedConfig, name: str, *, keys: bool, file: str, line: int | None,
                field: str) -> None:
    """``name`` names a known provider whose key is set (without ``keys``: the provider
    only); else the ConfigError every model name gets, at file:line (field)."""
    try:
        if keys:
            get_api(name, provider_options(loaded, name))
        else:
            known_provider(name)
    except UnknownProviderError as e:
        raise ConfigError(e.message, file=file or None, line=line, field=field,
                          hint=e.hint) from None


def validate_suite(
    loaded: LoadedConfig,
    *,
    tags: Sequence[str] = (),
    ids: Sequence[str] = (),
    improver: bool = False,
    cases: Sequence[TestCase] | None = None,
    criteria: Sequence[CriterionConfig] | None = None,
    keys: bool = True,
) -> CaseList:
    """Validate every input of a run before the store is opened or a model called.

    The config is already valid; this reads the prompt file and every case file,
    imports every Python check, pydantic model and agent function, renders every
    template with every case's variables, and checks that every model names a known
    provider whose key is set. The first problem raises a ``CycleError`` naming
    file:line (field) and the fix. Returns the selected cases.
    ``cases`` and ``criteria``: a suite of other cases judged on other criteria (an eval
    file's, with ``cycle run --eval``) instead of cycle.yaml's.
    """
    if cases is None:
        cases = load_suite_cases(loaded, tags=tags, ids=ids)
    cases = CaseList.of(cases)
    _check_size(loaded, cases)
    prompt = None if loaded.config.prompt.startswith(STORE_PREFIX) else load_prompt(loaded)[0]
    own = _check_imports_and_templates(loaded, cases, prompt, criteria)
    _check_agent_kind(loaded, own)
    if prompt is not None:
        _check_mocks(loaded, own, prompt)
    _check_models(loaded, prompt, needs_judge=needs_judge(loaded, own, criteria),
                  improver=improver, cases=own, keys=keys)
    return cases


def _check_size(loaded: LoadedConfig, cases: Sequence[TestCase]) -> None:
    """Refuse a run too big to be meant (``iterations: 1000000000000``) before it starts
    allocating: run.max_evaluations (cases x iterations) says how big is meant."""
    run = loaded.config.run
    size = len(cases) * run.iterations
    if size <= run.max_evaluations:
        return
    flag = loaded.overrides.get("iterations")
    where = ({"field": flag} if flag else
             {"file": str(loaded.path), "line": loaded.doc.line_of(("run", "iterations")),
              "field": "run.iterations"})
    raise ConfigError(
        f"{len(cases):,} cases x {run.iterations:,} iterations = {size:,} evaluations, "
        f"more than run.max_evaluations ({run.max_evaluations:,})", **where,
        hint="Lower the iterations or select fewer cases; if you mean it, raise "
        "run.max_evaluations in cycle.yaml.",
    )


def judged_on(loaded: LoadedConfig, criteria: Sequence[CriterionConfig] | None
              ) -> Sequence[CriterionConfig]:
    """The suite's criteria: ``criteria`` when given (an eval file's: none), else cycle.yaml's."""
    return loaded.config.criteria if criteria is None else criteria


def needs_judge(loaded: LoadedConfig, cases: Sequence[TestCase],
                criteria: Sequence[CriterionConfig] | None = None) -> bool:
    """Whether any case is judged on an LLM criterion (the suite's, or its own)."""
    from cycle.judge.criteria import merge

    suite = judged_on(loaded, criteria)
    if any(x.check is None for x in suite):
        return True
    return any(x.check is None for case in cases if case.criteria
               for x in merge(suite, case.criteria))


def build_suite(
    loaded: LoadedConfig,
    *,
    store: Store | None = None,
    bus: EventBus | None = None,
    budget: Budget | None = None,
    cache: ResponseCache | None = None,
    prompt: Prompt | None = None,
    version: str | None = None,
    tags: Sequence[str] = (),
    ids: Sequence[str] = (),
    cases: Sequence[TestCase] | None = None,
    criteria: Sequence[CriterionConfig] | None = None,
) -> Suite:
    """Validate every input, then build the agent and judge (models are created, not called).
    ``criteria``: judge on these instead of cycle.yaml's."""
    if prompt is None:
        prompt, version = load_prompt(loaded, store)
    case_list = CaseList.of(cases) if cases is not None else load_suite_cases(
        loaded, tags=tags, ids=ids)
    closers: list[Callable[[], Awaitable[None]]] = []
    models = Models(loaded, bus=bus, budget=budget, cache=cache, store=store,
                    batch=loaded.config.run.batch)

    def model(name: str, role: str) -> Model:
        m = models(name, role)
        closers.append(m.aclose)
        return m

    spec = loaded.config.agent_config

    def user_model(name: str) -> Model:  # simulated users, user agents, conditions
        return models(name, "user_sim")

    users = {"user_model": user_model, "user_agents": loaded.config.tools.user_agents}
    agent: Agent
    if spec.function and prompt is not None and prompt.examples:
        from cycle.agents.agent import unsent_examples

        raise unsent_examples(f"the Python agent {spec.function}")
    if spec.function:
        agent = CallableAgent(spec.function, tools=prompt.tools if prompt else (),
                              mocks=loaded.config.tools.mocks,
                              project=loaded.base_dir.resolve(), **users)
    elif spec.adk:
        from cycle.agents.adk import AdkAgent

        name = agent_model_name(loaded, prompt)
        assert name is not None and prompt is not None
        agent = AdkAgent(spec.adk, prompt, model(name, "agent"), mocks=loaded.config.tools.mocks,
                         max_steps=loaded.config.tools.max_steps,
                         allow_code_execution=spec.allow_code_execution,
                         prompt_agent=spec.prompt_agent, **users)
    elif spec.http:
        agent = HttpAgent(spec.http, headers=spec.headers,
                          timeout=loaded.config.run.timeout or 120.0, prompt=prompt,
                          protocol=spec.protocol, mocks=loaded.config.tools.mocks,
                          max_steps=loaded.config.tools.max_steps,
                          max_response_mb=spec.max_response_mb, **users)
    else:
        name = agent_model_name(loaded, prompt)
        assert name is not None and prompt is not None
        agent = PromptAgent(prompt, model(name, "agent"), mocks=loaded.config.tools.mocks,
                            max_steps=loaded.config.tools.max_steps, **users)
    closers.append(agent.aclose)  # the endpoint's client, the simulated users' models
    c = loaded.config
    suite_criteria = judged_on(loaded, criteria)
    judges = [model(name, "judge") for name in judge_models(loaded, prompt)] if needs_judge(
        loaded, case_list, criteria) else []
    judge = Judge(suite_criteria, model=judges or None, threshold=c.pass_threshold,
                  description=spec.description)
    return Suite(loaded=loaded, prompt=prompt, version=version, cases=case_list, agent=agent,
                 judge=judge, _closers=closers)
