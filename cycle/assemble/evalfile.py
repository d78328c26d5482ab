"""``cycle run --eval``: a tool-forge eval file run as its runner contract says, stored as a
cycle run (so ``cycle compare`` and the reports read it like any other).

    prepared = prepare(EvalOptions(eval_file=..., endpoint=...), config)   # no call yet
    outcome = await run_eval(prepared, store=store, bus=bus)

Every input is checked in ``prepare``, before any call to the agent: the eval file, its
tokens, the seed manifest, the tool registry, the baseline, that the output folder can be
written, that the endpoint accepts connections, and (with a cycle.yaml) the prompt, mocks
and models. Only then is the snapshot captured, since it reads live data.

The agent is the endpoint (``--agent-endpoint``), else cycle.yaml's agent: its prompt on its
model, with the case's stubs as mocks. Cases are judged on the eval file's assertions only,
not on cycle.yaml's criteria: the contract decides pass and fail.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from msgspec import Struct, field
from msgspec.structs import replace

from cycle.agents import Agent, HttpAgent
from cycle.assemble.config import LoadedConfig
from cycle.assemble.outputs import writable_folder
from cycle.assemble.suite import build_suite, user_code_importable, validate_suite
from cycle.cases import TestCase, select
from cycle.errors import ConfigError
from cycle.evals.runner import Runner
from cycle.events import EventBus
from cycle.formats import toolforge
from cycle.judge import Judge
from cycle.llm.budget import Budget
from cycle.llm.cache import ResponseCache
from cycle.records import RunResult
from cycle.store import Store

#: the contract's runner configuration file's keys -> EvalOptions fields
RUNNER_CONFIG_KEYS = {
    "agentEndpoint": "endpoint", "seedManifestPath": "seed_manifest", "snapshot": "snapshot",
    "outputDir": "output_dir", "baselineRunId": "baseline", "concurrency": "concurrency",
    "timeoutMs": "timeout_ms", "toolRegistryPath": "tool_registry",
}


class EvalOptions(Struct, frozen=True):
    """How to run an eval file (the contract's runner configuration)."""

    eval_file: Path
    endpoint: str | None = None
    seed_manifest: Path | None = None
    #: the snapshot capture function, package.module:function (sync or async) -> dict
    snapshot: str | None = None
    tool_registry: Path | None = None
    output_dir: Path = Path(toolforge.DEFAULT_OUTPUT_DIR)
    baseline: str | None = None
    concurrency: int = 1
    timeout_ms: int = 60000
    iterations: int = 1
    tags: tuple[str, ...] = ()
    case_ids: tuple[str, ...] = ()


def runner_config(path: Path) -> dict[str, Any]:
    """The contract's runner configuration file as EvalOptions fields (flags override it)."""
    data = toolforge.load_json_data(path, "runner configuration", "--runner-config")
    if not isinstance(data, dict):
        raise ConfigError("expected an object of runner settings", file=str(path), line=1)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "snapshotEnabled":
            if value and not data.get("snapshot"):
                raise ConfigError("snapshotEnabled is true but no capture function is named",
                                  file=str(path), field="snapshot",
                                  hint='Add "snapshot": "package.module:function".')
            continue
        if key not in RUNNER_CONFIG_KEYS:
            raise ConfigError(f"unknown runner setting '{key}'", file=str(path), field=key,
                              hint="Known: " + ", ".join([*RUNNER_CONFIG_KEYS, "snapshotEnabled"])
                              + ".")
        if value is None:
            continue
        name = RUNNER_CONFIG_KEYS[key]
        if name in ("concurrency", "timeout_ms"):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"'{key}' must be a whole number >= 1", file=str(path),
                                  field=key)
        elif not isinstance(value, str):
            raise ConfigError(f"'{key}' must be a string", file=str(path), field=key)
        if name in ("seed_manifest", "output_dir", "tool_registry"):
            value = Path(value)
        out[name] = value
    return out


class Prepared(Struct):
    """An eval run with every input checked; nothing called yet."""

    options: EvalOptions
    loaded: toolforge.Loaded
    staleness: toolforge.Staleness
    baseline: dict[str, Any] | None
    config: LoadedConfig | None
    warnings: list[str] = field(default_factory=list)

    @property
    def cases(self) -> list[TestCase]:
        return self.loaded.cases


def _reachable(url: str) -> None:
    """The endpoint accepts connections (nothing is sent): a typo in the URL or an agent
    that is not started is an error now, not an error in every case."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"agent endpoint '{url}' is not an http(s) URL",
                          field="--agent-endpoint", hint="e.g. http://localhost:3000/chat")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=5).close()
    except OSError as e:
        raise ConfigError(f"agent endpoint {url} is not reachable: {e.strerror or e}",
                          field="--agent-endpoint",
                          hint="Start the agent, or fix --agent-endpoint.") from None


def capture_snapshot(path: str) -> Any:
    """Call the snapshot capture function (the contract's extension point)."""
    from cycle.imports import import_object

    fn = import_object(path, what="--snapshot")
    if not callable(fn):
        raise ConfigError(f"snapshot capture {path} is not callable", field="--snapshot")
    try:
        data = fn()
        if inspect.isawaitable(data):
            data = asyncio.run(_awaited(data))
    except Exception as e:  # noqa: BLE001 - user code: its failure is an input error, named
        raise ConfigError(f"snapshot capture {path} raised {e.__class__.__name__}: {e}",
                          field="--snapshot") from None
    if not isinstance(data, dict):
        raise ConfigError(f"snapshot capture {path} returned {type(data).__name__}, not an "
                          "object of values", field="--snapshot")
    return data


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def prepare(options: EvalOptions, config: LoadedConfig | None) -> Prepared:
    """Check every input of an eval run, then capture the snapshot; no agent is called."""
    if options.endpoint is None and config is None:
        raise ConfigError(
            "--eval needs an agent: --agent-endpoint URL, or a cycle.yaml whose prompt plays "
            "the agent", hint="e.g. cycle run --eval evals/get_weather.golden.json "
            "--agent-endpoint http://localhost:3000/chat")
    if config is not None:
        user_code_importable(config)
    loaded = toolforge.load(options.eval_file, seed_manifest=options.seed_manifest)
    loaded.cases = select(loaded.cases, tags=options.tags, ids=options.case_ids)
    if not loaded.cases:
        raise ConfigError("no case of the eval file matches --tag/--case",
                          file=str(options.eval_file))
    if config is not None and options.endpoint is None:
        validate_suite(config, cases=loaded.cases, criteria=())
    registry = (toolforge.load_registry(options.tool_registry)
                if options.tool_registry is not None else None)
    stale = toolforge.staleness(loaded.file, registry)
    warnings = []
    if registry is None and loaded.file.metadata:
        warnings.append("staleness not checked: no tool registry (--tool-registry)")
    baseline = (toolforge.load_baseline(options.output_dir, options.baseline)
                if options.baseline else None)
    writable_folder(options.output_dir, what="output folder", field="--output-dir")
    if options.endpoint is not None:
        _reachable(options.endpoint)
    if options.snapshot:
        snapshot = capture_snapshot(options.snapshot)
        ids = {c.id for c in loaded.cases}
        loaded = toolforge.to_cases(loaded.file, replace(loaded.tokens, snapshot=snapshot))
        loaded.cases = [c for c in loaded.cases if c.id in ids]
    return Prepared(options=options, loaded=loaded, staleness=stale, baseline=baseline,
                    config=config,
                    warnings=[*warnings, *loaded.warnings])


class EvalOutcome(Struct):
    result: dict[str, Any]
    run: RunResult
    path: Path


async def run_eval(prepared: Prepared, *, store: Store | None = None,
                   bus: EventBus | None = None, budget: Budget | None = None,
                   cache: ResponseCache | None = None, resume: str | None = None
                   ) -> EvalOutcome:
    """Run the cases, store the run, write the EvalSuiteResult (whole or not at all)."""
    o = prepared.options
    bus = bus or EventBus()
    closers: list[Callable[[], Awaitable[None]]] = []
    agent: Agent
    meta: dict[str, Any] = {"role": "eval"}
    timeout = o.timeout_ms / 1000.0
    if o.endpoint is not None:
        http = HttpAgent(o.endpoint, timeout=timeout)
        closers.append(http.aclose)
        agent, judge = http, Judge([], threshold=70.0)
    else:
        assert prepared.config is not None
        suite = build_suite(prepared.config, store=store, bus=bus, budget=budget, cache=cache,
                            cases=prepared.cases, criteria=())
        closers.append(suite.aclose)
        agent, judge = suite.agent, suite.judge
        meta = suite.meta(role="eval")
    ef = prepared.loaded.file
    meta["config"] = {**meta.get("config", {}), "eval_file": str(ef.path),
                      "eval_file_hash": ef.file_hash, "tool": ef.tool_name, "tier": ef.tier,
                      "agent_endpoint": o.endpoint}
    run_id = resume or toolforge.contract_run_id()
    started, clock = datetime.now(UTC), time.monotonic()
    try:
        runner = Runner(agent=agent, judge=judge, cases=prepared.cases, iterations=o.iterations,
                        concurrency=o.concurrency, timeout=timeout, store=store, bus=bus)
        run = await runner.run(run_id=run_id, meta=meta)
    finally:
        for close in closers:
            await close()
    result = toolforge.suite_result(
        prepared.loaded, run.results, run_id=run_id, started=started,
        duration_ms=(time.monotonic() - clock) * 1000.0, endpoint=o.endpoint or agent.name,
        cost=None if o.endpoint is not None else run.suite.cost, stale=prepared.staleness,
        baseline=prepared.baseline)
    path = toolforge.write_result(o.output_dir, result)
    return EvalOutcome(result=result, run=run, path=path)


def exit_code(outcome: EvalOutcome) -> int:
    """0 every case passed; 3 an error (a timeout, an endpoint down) kept a case from being
    judged; 1 otherwise some case failed."""
    if outcome.run.suite.errors:
        return 3
    return 0 if outcome.result["summary"]["failed"] == 0 else 1


def as_json(outcome: EvalOutcome) -> str:
    return json.dumps(outcome.result, indent=2, ensure_ascii=False)


__all__: Sequence[str] = ("EvalOptions", "Prepared", "prepare", "run_eval", "runner_config")
