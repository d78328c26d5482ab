"""cycle.yaml: what to evaluate, with which models, on which cases, judged how.

A minimal file::

    prompt: prompts/support-reply.yaml     # or store:support-reply@production
    criteria:
      - id: accuracy                       # a built-in LLM criterion
      - id: cites_order
        check: {type: contains, values: ["{{ order }}"]}
        required: true
    cases: [cases/*.yaml]

Every key has the default a user would expect (see the field descriptions);
an unknown key is an error naming the key and its file:line. The
``improve:`` section belongs to the improvement loop (``cycle.loop``), which
validates it itself; here it is kept as given.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from msgspec import Struct, field
from msgspec.structs import replace
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cycle.durations import parse_duration
from cycle.errors import ConfigError
from cycle.judge.criteria import CriterionConfig, resolve
from cycle.llm.bodies import DEFAULT_MB
from cycle.mocks import ToolsConfig
from cycle.records import Prompt
from cycle.store import Store
from cycle.yamlload import LoadedYaml, load_yaml, relocate, validate

STORE_PREFIX = "store:"


def http_url(value: str | None, example: str) -> str | None:
    """``value`` if it is an http(s) URL with a host; else a ValueError saying so (an
    address without one failed every case, or was retried five times a call, as a
    connection error instead of being refused before the run)."""
    from urllib.parse import urlparse

    from cycle.llm.http import safe_url

    if value is None:
        return value
    try:
        url = urlparse(value.strip())
        scheme, host = url.scheme, url.hostname
    except ValueError:  # "http://[::1": no URL at all
        scheme, host = "", None
    if scheme not in ("http", "https") or not host:
        # named without its credentials (safe_url): a password in the URL is no less one
        # for the URL being wrong
        raise ValueError(f"{safe_url(value)!r} is not an http(s) URL; write one such as {example}")
    return value


class AgentConfig(BaseModel):
    """The agent under test, when it is not simply the prompt on a model."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    model: str | None = Field(
        None, description="Run the prompt on this model (default: the prompt's params.model)."
    )
    function: str | None = Field(
        None,
        description="A Python callable by import path (package.module:name), sync or async, "
        "taking the case's input and returning a str or {response, tool_calls}.",
    )
    http: str | None = Field(
        None,
        description="An HTTP endpoint: POST {message, input, messages} returning "
        "{response, toolCalls}, one POST a user turn.",
    )
    protocol: Literal["plain", "tools"] = Field(
        "plain", description="How an HTTP agent's tools run: plain (the endpoint runs its own; "
        "cycle cannot mock them) or tools (the endpoint asks cycle to run them: it is sent "
        "the declared tools and answers {tool_calls: [...]} until it answers {response}).")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Extra HTTP headers; values like ${NAME} are read from the environment "
        "(a secret belongs there: text written here, but for plain headers such as "
        "Content-Type, is stored and shown as *** when it is long enough to be a key).",
    )
    max_response_mb: float = Field(
        DEFAULT_MB, gt=0, description="An HTTP agent's largest answer read, in MB once "
        "decompressed; a larger one fails the case with the reason.")
    adk: str | None = Field(
        None,
        description="A Google ADK agent by import path (package.module:root_agent), run by ADK's "
        "runner with the prompt's system as its instruction, its model calls through `model` "
        "(default: the prompt's params.model) and its tools answered by the mocks.",
    )
    description: str = Field(
        "", description="What the agent is for, in a sentence or two: shown to the LLM judge "
        "with every case (seed 003: the judge knows what it judges).")
    allow_code_execution: bool = Field(
        False, description="Run an ADK agent that has a code executor (it runs model-written "
        "code on this machine during evaluation); refused unless true.")
    prompt_agent: str | None = Field(
        None, description="Which LlmAgent of an ADK agent's tree takes the versioned prompt "
        "as its instruction, by name (default: the root when it is an LlmAgent, else the "
        "tree's only LlmAgent).")

    @field_validator("http")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return http_url(value, "http://localhost:8000/chat")

    @model_validator(mode="after")
    def _one_kind(self) -> AgentConfig:
        given = [k for k in ("model", "function", "http", "adk") if getattr(self, k)]
        if given == ["model", "adk"]:
            return self  # the model an ADK agent's calls go through
        if len(given) > 1:
            raise ValueError(f"give one of model, function, http and adk, not {' and '.join(given)}")
        if self.prompt_agent is not None and not self.adk:
            raise ValueError("prompt_agent is for an adk agent: it names the LlmAgent that "
                             "takes the prompt as its instruction")
        if self.protocol != "plain" and not self.http:
            raise ValueError("protocol is for an http agent: its tools run through cycle")
        if "max_response_mb" in self.model_fields_set and not self.http:
            raise ValueError("max_response_mb is for an http agent: the cap on its answers")
        return self


class ProviderSettings(BaseModel):
    """Connection settings for one provider (API keys come from the environment only)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    base_url: str | None = Field(
        None, description="Override the provider's API base URL (Ollama, vLLM, a gateway...)."
    )
    api_version: str | None = Field(None, description="The provider's API version, if it has one.")
    timeout: float = Field(60.0, gt=0, description="Seconds before one HTTP call times out.")
    max_connections: int = Field(32, ge=1, description="Most calls in flight to this provider.")
    max_response_mb: float = Field(
        DEFAULT_MB, gt=0, description="The largest answer read, in MB once decompressed; a "
        "larger one (a server gone wrong, a gzip bomb) fails the call with the reason.")
    max_retry_after: float = Field(
        120.0, ge=0, description="The longest Retry-After (seconds) obeyed; a provider asking "
        "for more fails the call at once, with the reason, instead of a silent wait.")
    batch_poll: float = Field(
        30.0, gt=0, description="Seconds between two looks at a batch job's state (run.batch).")
    batch_window: float = Field(
        1.0, gt=0, description="A pause this long in new calls sends the gathered ones as a "
        "batch job (run.batch).")
    structured: Literal["auto", "json_schema", "json_object", "prompt"] = Field(
        "auto", description="How an OpenAI-compatible server is asked for JSON: auto (learn "
        "it: json_schema, else json_object, else the schema in the prompt), or one of them.")

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return http_url(value, "http://localhost:11434/v1")


class PriceOverride(BaseModel):
    """A model's price in USD per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    input: float = Field(ge=0, description="USD per million input tokens.")
    output: float = Field(ge=0, description="USD per million output tokens.")
    cached_input: float | None = Field(
        None, ge=0, description="USD per million cached input tokens (default: the input price)."
    )


class CacheOptions(BaseModel):
    """The response cache: a repeated call (same model, messages, config, iteration) is free."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    enabled: bool = Field(True, description="Cache responses (--no-cache turns it off for a run).")
    ttl: float = Field(7 * 86400, description="How long an entry lives: seconds or '12h', '7d'.")
    path: str = Field(".cycle/cache.db", description="The cache file, relative to cycle.yaml.")

    @field_validator("ttl", mode="before")
    @classmethod
    def _ttl(cls, value: Any) -> float:
        return parse_duration(value, "ttl")


class ReportOptions(BaseModel):
    """Where reports go and which are written (``reports: reports`` is the folder alone)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dir: str = Field("reports", description="Folder for reports, relative to this file.")
    formats: list[str] | None = Field(
        None, min_length=1,
        description="The reports to write: markdown, json, junit, html (all by default; a "
        "cycle writes those of them it has: markdown, html, json).")


class RunOptions(BaseModel):
    """How a suite is run."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    iterations: int = Field(3, ge=1, description="Times each case is run (models vary).")
    concurrency: int = Field(8, ge=1, description="Cases in flight at once.")
    timeout: float | None = Field(
        120.0, gt=0, description="Seconds one case (agent and judge) may take; then it errors."
    )
    tags: list[str] = Field(
        default_factory=list, description="Run only cases with one of these tags (empty: all)."
    )
    stop_on_first_failure: bool = Field(False, description="Stop at the first failed case.")
    batch: bool = Field(
        False, description="Send the run's model calls as provider batch jobs (OpenAI Batch, "
        "Gemini batch mode) at half the price; answers take minutes to hours, a killed run "
        "resumes its jobs, and what a job cannot answer goes live. Turns the case timeout off.")
    batch_size: int = Field(
        10_000, ge=1, le=50_000, description="With batch: the cases in flight at once, so the "
        "most calls in one job (OpenAI takes 50,000).")
    max_evaluations: int = Field(
        1_000_000, ge=1, description="The most cases x iterations a run may have: a guard "
        "against a typo (iterations: 1000000000000); raise it to run more.")


def judge_panel(value: str | list[str] | None) -> str | list[str] | None:
    """``judge:`` as a run uses it: a name, or a panel of two models or more (a panel of one
    is that model's name). ValueError for an empty panel, a blank name or a name twice."""
    if not isinstance(value, list):
        return value
    if not value:
        raise ValueError("a panel names one model or more (or leave judge: out for the "
                         "agent's model)")
    blank = [i for i, name in enumerate(value) if not name.strip()]
    if blank:
        raise ValueError(f"item {blank[0]} names no model")
    twice = sorted({name for name in value if value.count(name) > 1})
    if twice:
        # one model twice would be one judge counted twice: its answers are one cached and
        # journaled call, so its vote would weigh double for nothing
        raise ValueError(f"{twice[0]} is named twice: each member of a panel is another model")
    return value[0] if len(value) == 1 else value


def judge_flag(values: tuple[str, ...]) -> str | list[str] | None:
    """``--judge`` as given (repeated: a panel), checked as cycle.yaml's ``judge:`` is;
    None when not given."""
    if not values:
        return None
    try:
        return judge_panel(list(values))
    except ValueError as e:
        raise ConfigError(str(e), field="--judge",
                          hint="Repeat --judge once for each model of the panel.") from None


class CycleConfig(BaseModel):
    """The whole of cycle.yaml."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    prompt: str = Field(
        description="A prompt file (YAML, relative to this file) or store:ID[@label|@version]."
    )

    @field_validator("prompt")
    @classmethod
    def _stored_ref(cls, value: str) -> str:
        if value.startswith(STORE_PREFIX):
            prompt_id, at, spec = value[len(STORE_PREFIX):].partition("@")
            if not prompt_id.strip() or (at and not spec.strip()):
                raise ValueError(f"'{value}' names no stored prompt: write store:ID, "
                                 "store:ID@label or store:ID@1.2.0")
        return value

    agent: str | AgentConfig | None = Field(
        None,
        description="The agent model (e.g. openai:gpt-4o-mini) or an agent section; "
        "default: the prompt's params.model.",
    )
    judge: str | list[str] | None = Field(
        None, description="The judge model (default: the agent's model), or a panel of models "
        "([openai:gpt-4o-mini, gemini:gemini-2.0-flash]): each judges every LLM criterion, a "
        "criterion's score is their mean and its pass/fail their majority (a tie fails).")
    improver: str | None = Field(
        None, description="The improver model (default: the judge's model; a panel's first)."
    )
    criteria: list[CriterionConfig] = Field(
        min_length=1, description="What every case is judged on (cases may add or override)."
    )
    pass_threshold: float = Field(
        70.0, ge=0, le=100, description="A case passes when its weighted score reaches this."
    )
    cases: list[str] = Field(
        default_factory=lambda: ["cases/*.yaml"],
        description="Case files: globs relative to this file.",
    )
    run: RunOptions = Field(default_factory=RunOptions, description="Run options.")
    providers: dict[str, ProviderSettings] = Field(
        default_factory=dict, description="Per-provider connection settings, by provider name."
    )
    pricing: dict[str, PriceOverride] = Field(
        default_factory=dict,
        description="Prices that override or extend the built-in table, by model name; "
        "'*' sets the fallback for unknown models.",
    )
    cache: CacheOptions = Field(default_factory=CacheOptions, description="The response cache.")
    budget: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="A hard cap in USD on one run's model calls (none by default)."
    )
    reports: str | ReportOptions = Field(
        "reports", description="Folder for reports, relative to this file; or "
        "{dir: reports, formats: [markdown, json, junit, html]} to choose which are written.")
    tools: ToolsConfig = Field(
        default_factory=ToolsConfig,
        description="How the prompt's tools answer during evaluation (mocks) and the step limit.",
    )
    improve: dict[str, Any] = Field(
        default_factory=dict, description="The improvement loop's options (see cycle improve)."
    )
    store: str | None = Field(
        None, description="The store: a SQLite file (relative to this file) or a team's "
        "postgresql:// URL without its password (that comes from PGPASSWORD or ~/.pgpass; "
        "--store and CYCLE_STORE come first). Default: .cycle/cycle.db beside this file.")

    @field_validator("judge")
    @classmethod
    def _panel(cls, value: str | list[str] | None) -> str | list[str] | None:
        return judge_panel(value)

    @property
    def judges(self) -> list[str]:
        """The judge's models as given (a panel's members, in order; [] when not set)."""
        if self.judge is None:
            return []
        return [self.judge] if isinstance(self.judge, str) else list(self.judge)

    @field_validator("store")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        from cycle.store.postgres import SHARED_PASSWORD, has_password, is_url

        # cycle.yaml is committed with the project: a password in it is a password in git
        if value and is_url(value) and has_password(value):
            raise ValueError(SHARED_PASSWORD)
        return value

    @field_validator("providers")
    @classmethod
    def _structured_only_for_openai(cls, providers: dict[str, ProviderSettings]
                                    ) -> dict[str, ProviderSettings]:
        from cycle.llm.providers import is_provider
        from cycle.llm.providers import providers as known

        for name, settings in providers.items():
            if not is_provider(name):
                # a misspelt name (opnai) was ignored: its base_url with it, so the calls
                # meant for a local server went to the provider's own, paid
                import difflib

                close = difflib.get_close_matches(name, known(), n=1)
                raise ValueError(f"providers.{name}: there is no provider '{name}'"
                                 + (f"; did you mean '{close[0]}'?" if close else "")
                                 + f" (providers: {', '.join(known())})")
            if settings.structured != "auto" and name != "openai":
                raise ValueError(f"providers.{name}.structured: only OpenAI-compatible servers "
                                 f"(providers.openai) take it; {name} has one form")
        return providers

    @model_validator(mode="before")
    @classmethod
    def _cases_as_list(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("cases"), str):
            data = {**data, "cases": [data["cases"]]}
        return data

    @property
    def agent_config(self) -> AgentConfig:
        if isinstance(self.agent, AgentConfig):
            return self.agent
        return AgentConfig(model=self.agent)


class LoadedConfig(Struct, frozen=True):
    """A validated config and where it came from."""

    config: CycleConfig
    path: Path
    #: paths in the config are relative to this folder
    base_dir: Path
    #: the raw document with line numbers (the loop validates ``improve:`` against it)
    doc: LoadedYaml
    #: settings a command-line flag replaced: key -> the flag (errors name it, not the file)
    overrides: Mapping[str, str] = field(default_factory=dict)

    @property
    def store(self) -> str | Path | None:
        """cycle.yaml's ``store:``, a path resolved against this file (None: not set)."""
        from cycle.store.store import store_target

        value = self.config.store
        if value is None:
            return None
        target = store_target(value)
        return target if isinstance(target, str) else self.resolve_path(value)

    def resolve_path(self, relative: str) -> Path:
        p = Path(relative).expanduser()
        return p if p.is_absolute() else self.base_dir / p

    @property
    def report_dir(self) -> Path:
        reports = self.config.reports
        return self.resolve_path(reports if isinstance(reports, str) else reports.dir)

    @property
    def report_formats(self) -> list[str] | None:
        """The reports to write (None: every one)."""
        reports = self.config.reports
        return None if isinstance(reports, str) else reports.formats

    @property
    def prompt_is_stored(self) -> bool:
        return self.config.prompt.startswith(STORE_PREFIX)


#: what a flag overrides: key -> (flag, the setting's path in CycleConfig)
OVERRIDABLE = {
    "agent": ("--agent", ("agent",)),
    "judge": ("--judge", ("judge",)),
    "improver": ("--improver", ("improver",)),
    "iterations": ("--iterations", ("run", "iterations")),
    "concurrency": ("--concurrency", ("run", "concurrency")),
    "timeout": ("--timeout", ("run", "timeout")),
    "stop_on_first_failure": ("--stop-on-first-failure", ("run", "stop_on_first_failure")),
    "budget": ("--budget", ("budget",)),
    "batch": ("--batch", ("run", "batch")),
}


def _shown(value: Any) -> str:
    if isinstance(value, AgentConfig):
        kind = next(k for k in ("model", "function", "http") if getattr(value, k))
        return str(getattr(value, kind)) if kind == "model" else f"{kind} {getattr(value, kind)}"
    if isinstance(value, list):  # a judge panel
        return "[" + ", ".join(map(str, value)) + "]"
    return "(not set)" if value is None else str(value)


def apply_overrides(loaded: LoadedConfig, **flags: Any) -> tuple[LoadedConfig, list[str]]:
    """The config with the command line's settings in place of the file's, and one line per
    setting that changed ("agent: offline:default -> openai:gpt-4o (--agent)").

    ``flags`` are OVERRIDABLE's keys; None leaves a setting as the file has it. An agent
    given by flag is a model, whatever kind of agent the file names."""
    config, changes, overridden = loaded.config, [], dict(loaded.overrides)
    for key, value in flags.items():
        if value is None:
            continue
        flag, path = OVERRIDABLE[key]
        if len(path) == 2:  # a setting of run:
            before = getattr(config.run, path[1])
            config = config.model_copy(update={"run": config.run.model_copy(update={path[1]: value})})
        else:
            before = getattr(config, path[0])
            config = config.model_copy(update={path[0]: value})
        overridden[key] = flag
        if _shown(before) != _shown(value):
            if key == "agent" and before is None:
                before = "the prompt's params.model"
            changes.append(f"{'.'.join(path)}: {_shown(before)} -> {_shown(value)} ({flag})")
    return replace(loaded, config=config, overrides=overridden), changes


def overridden_values(loaded: LoadedConfig) -> dict[str, Any]:
    """The command line's settings in force (key -> value), as stored with a cycle or run
    so that ``--resume`` runs it as it was asked to run."""
    out: dict[str, Any] = {}
    for key in loaded.overrides:
        if key not in OVERRIDABLE:
            continue
        node: Any = loaded.config
        for part in OVERRIDABLE[key][1]:
            node = getattr(node, part)
        out[key] = _shown(node) if isinstance(node, AgentConfig) else node
    return out


def resumed_overrides(stored: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The overrides a resume runs with: those stored with the cycle or run; a resume that
    passes different ones is refused, naming them (a cycle asked for 500 iterations does
    not go on with 3)."""
    differ = [f"{OVERRIDABLE[k][0]} {given[k]} (it ran with {stored.get(k, 'the config')})"
              for k in given if k in OVERRIDABLE and stored.get(k) != given[k]]
    if differ:
        raise ConfigError(
            "a resume continues with the settings it started with; this one differs: "
            + "; ".join(differ),
            hint="Resume without these flags, or start a new cycle or run with them.")
    return {**stored}


def _naming_config() -> str:
    """The command being run with its config named (``cycle improve path/to/cycle.yaml``,
    ``cycle judge improve ... --config path/to/cycle.yaml``), for a hint to repeat it;
    ``cycle run``'s outside the CLI."""
    import sys

    click = sys.modules.get("click")  # only a command line has a context to read
    ctx = click.get_current_context(silent=True) if click is not None else None
    if ctx is None:
        return "cycle run path/to/cycle.yaml"
    # "cycle", however it was started (python -m cycle, a test's runner)
    root = (ctx.find_root().info_name or "cycle").split()
    command = " ".join(["cycle", *ctx.command_path.split()[len(root):]])
    named = next((p for p in ctx.command.params if p.name == "config"), None)
    if isinstance(named, click.Option):
        given = [p.human_readable_name for p in ctx.command.params
                 if isinstance(p, click.Argument)]
        return " ".join([command, *given, "--config path/to/cycle.yaml"])
    return f"{command} path/to/cycle.yaml"


def load_config(path: str | Path) -> LoadedConfig:
    """Read and validate cycle.yaml; every error names file:line (field)."""
    p = Path(path)
    if p.is_dir():
        p = p / "cycle.yaml"
    if not p.exists() and not p.is_symlink():
        where = "this folder" if p.parent == Path(".") else str(p.parent)
        raise ConfigError(
            "file not found", file=str(p),
            hint=f"No cycle.yaml in {where}: cd into your project, name its config "
            f"({_naming_config()}), or start one with cycle init.")
    doc = load_yaml(p)
    if not isinstance(doc.data, dict):
        raise ConfigError("expected a mapping of settings (prompt:, criteria:, cases:, ...)",
                          file=str(p), line=1)
    config = validate(CycleConfig, doc, what="cycle.yaml", project=p.parent.resolve())
    seen: dict[str, int] = {}
    for i, criterion in enumerate(config.criteria):
        where = doc.line_of(("criteria", i))
        if criterion.id in seen:
            raise ConfigError(
                f"criterion id '{criterion.id}' is used twice (first at item {seen[criterion.id]})",
                file=str(p), line=where, field=f"criteria[{i}].id",
            )
        seen[criterion.id] = i
        try:
            resolve(criterion, threshold=config.pass_threshold)
        except ConfigError as e:
            raise relocate(e, file=str(p), line=where, field=f"criteria[{i}]") from None
    pairwise = [c.id for c in config.criteria if c.pairwise]
    if pairwise and len(config.judges) > 1:
        # as `cycle judge pairwise` refuses a panel: a preference has no mean over members
        raise ConfigError(
            f"the judge is a panel ({', '.join(config.judges)}) and a pairwise comparison is "
            f"one judge's (pairwise criteria: {', '.join(pairwise)})",
            file=str(p), line=doc.line_of(("judge",)), field="judge",
            hint=f"Judge with one model (judge: {config.judges[0]}), or remove 'pairwise'.")
    return LoadedConfig(config=config, path=p, base_dir=p.parent, doc=doc)


def file_behind_head(loaded: LoadedConfig, store: Store) -> tuple[str, str, str, str] | None:
    """``(file, prompt id, its version, head's version)`` when the prompt file cycle.yaml names holds
    an older stored version than the store's ``head`` (a cycle moved head; the file in git
    still has the version it started from); None otherwise, a file edited since included."""
    ref = loaded.config.prompt
    if ref.startswith(STORE_PREFIX):
        return None
    from cycle.prompts import semver
    from cycle.prompts.files import load_prompt_file

    path = loaded.resolve_path(ref)
    if not path.is_file():
        return None
    prompt = load_prompt_file(path).prompt
    if not store.has_prompt(prompt.id):
        return None
    head = store.resolve(f"{prompt.id}@head")
    mine = store.find_version(prompt)
    if mine is None or mine.version == head.version or semver.parse(
            mine.version) > semver.parse(head.version):
        return None
    return ref, prompt.id, mine.version, head.version


def head_ahead_note(loaded: LoadedConfig, store: Store, *, evaluate_head: str) -> str | None:
    """What to tell a person whose run evaluates the prompt file while the store's head
    is ahead of it (``evaluate_head``: how to evaluate head from where they are; ``{id}``
    in it is the prompt's id)."""
    behind = file_behind_head(loaded, store)
    if behind is None:
        return None
    ref, prompt_id, mine, head = behind
    return (f"this run evaluates {ref} ({mine}); the store's head is {head}, ahead of it. "
            f"Evaluate head with {evaluate_head.format(id=prompt_id)}; put it in the file with "
            f"cycle prompt export {prompt_id} --write {ref}")


def load_prompt(loaded: LoadedConfig, store: Store | None = None) -> tuple[Prompt, str | None]:
    """The prompt the config names, and its stored version.

    ``store:ID[@label|@version]`` is resolved in the store. A prompt file is
    read (errors name file:line) and, with a store, saved as a version
    (content-addressed: an unchanged file is the version it already was), which head
    points at unless head is protected (cycle protect) from the current author.
    """
    ref = loaded.config.prompt
    if ref.startswith(STORE_PREFIX):
        if store is None:
            raise ConfigError(f"prompt '{ref}' is in the store, but no store is open",
                              file=str(loaded.path), line=loaded.doc.line_of(("prompt",)),
                              field="prompt")
        from cycle.errors import NotFoundError

        try:
            version = store.resolve(ref[len(STORE_PREFIX):])
        except NotFoundError as e:  # said at the line that names it, with the store looked in
            raise ConfigError(
                f"{e.message} in the store {store.where}", file=str(loaded.path),
                line=loaded.doc.line_of(("prompt",)), field="prompt",
                hint=e.hint or "Import it first (cycle prompt import FILE), or point --store "
                "at the store that holds it.") from None
        return version.prompt, version.version
    from cycle.prompts.files import load_prompt_file

    path = loaded.resolve_path(ref)
    if not path.exists():
        raise ConfigError(
            f"prompt file '{ref}' not found (looked at {path})", file=str(loaded.path),
            line=loaded.doc.line_of(("prompt",)), field="prompt",
            hint="The path is relative to cycle.yaml; or use store:ID[@label] for a stored prompt.",
        )
    pf = load_prompt_file(path)
    if store is None:
        return pf.prompt, pf.version
    from cycle.authors import current_author

    # a protected head stays where it is: the file's version is stored and evaluated all
    # the same (what head points at moves by the people the protection names, or --force)
    guard = store.protection(pf.prompt.id, "head")
    saved = store.save_version(pf.prompt, version=pf.version, message=f"from {ref}",
                               move_head=guard is None or guard.allows(current_author()))
    return saved.prompt, saved.version

