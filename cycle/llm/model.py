"""Model: one wrapper around any provider, with the cross-cutting policy once.

A provider (``ModelAPI``) makes one SDK call. ``Model`` adds, for every
provider alike:

- retries on rate limits, 5xx, timeouts and connection errors,
  exponential backoff with jitter that waits at least what ``Retry-After`` /
  ``retry-after-ms`` asked; ``RetriesExhaustedError`` after the last attempt;
- concurrency limits: the provider's max connections, shared by every model of one
  provider endpoint and halved while it answers 429 (cycle.llm.limit), and one limit
  for the process (``set_max_concurrency``);
- the call journal: a paid call's answer is kept before it is used, and a resumed
  run replays it instead of paying again (cycle.llm.journal);
- the response cache (a hit costs nothing and is reported as a hit);
- the budget: each call's worst case reserved before it is sent, settled after;
- batch jobs, when asked: the call goes out in a provider batch job at the batch price,
  or live when the job cannot answer it (cycle.llm.batch);
- cost from the price table, and one ``events.ModelCalled`` per call on the
  bus, for successes, failures and cache hits alike;
- structured output with one repair attempt.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
import uuid
import weakref
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar

from msgspec import Struct
from pydantic import BaseModel

from cycle.errors import (
    BudgetExceededError,
    MalformedResponseError,
    ModelError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    RetriesExhaustedError,
    StructuredOutputError,
    describe,
)
from cycle.events import ConcurrencyChanged, EventBus, ModelCalled
from cycle.llm.base import (
    CUT_SLACK,
    RESERVED_OUTPUT,
    BatchRequest,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
)
from cycle.llm.batch import Batcher, BatchSettings, BatchUnavailable
from cycle.llm.budget import Budget
from cycle.llm.cache import ResponseCache, cache_key
from cycle.llm.compat import ServerForms
from cycle.llm.http import has_surrogate, maskable, scrub, whole
from cycle.llm.journal import CallJournal, journal_key
from cycle.llm.limit import AdaptiveLimit
from cycle.llm.pricing import DEFAULT_TABLE, Cost, PriceTable
from cycle.llm.structured import Validator, parse_json, schema_of
from cycle.records import Message, ToolDef, Usage
from cycle.records.scope import NO_SCOPE, CallScope

if TYPE_CHECKING:
    import tenacity

T = TypeVar("T")


class RetryPolicy(Struct, frozen=True):
    """How Model retries transient failures."""

    #: attempts in all, the first one included
    attempts: int = 5
    #: first backoff in seconds; doubles each attempt up to max_wait
    initial_wait: float = 1.0
    max_wait: float = 60.0
    #: up to this many seconds of random jitter are added to each wait
    jitter: float = 1.0
    #: the longest Retry-After obeyed: a provider asking for more (an hour's quota
    #: reset, say) fails the call at once with the reason, instead of a silent hang
    max_retry_after: float = 120.0


class ModelServices(Struct, frozen=True):
    """What the models of one run or cycle share around their providers: the response
    cache, the event bus, the budget, the price table, the call journal and where what
    compatible servers accept is kept (``forms``: the store's, cycle.llm.compat). Given
    once to each model (``Model(api, services)``), not one keyword at a time."""

    cache: ResponseCache | None = None
    bus: EventBus | None = None
    budget: Budget | None = None
    pricing: PriceTable | None = None
    journal: CallJournal | None = None
    forms: ServerForms | None = None


#: a model on its own: no cache, no events, no budget, the default prices, no journal
NO_SERVICES = ModelServices()


# -- process-wide concurrency -------------------------------------------------

_DEFAULT_MAX_CONCURRENCY = 256

#: what a call to a provider that is not a real model costs: nothing, exactly
FREE = Cost(0.0, estimated=False)
_max_concurrency = _DEFAULT_MAX_CONCURRENCY
# asyncio primitives belong to one event loop; keep one per loop so that the
# sync facades (a fresh loop per call) never share a semaphore across loops
_global_semaphores: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, tuple[int, asyncio.Semaphore]
] = weakref.WeakKeyDictionary()
#: per event loop: (provider, base URL, ceiling) -> its adaptive limit
_provider_limits: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str, int], AdaptiveLimit]
] = weakref.WeakKeyDictionary()


def provider_limit(api: ModelAPI) -> AdaptiveLimit:
    """The calls in flight to ``api``'s provider endpoint, in this event loop."""
    limits = _provider_limits.setdefault(asyncio.get_running_loop(), {})
    key = (api.provider, api.options.base_url or "", max(1, api.max_connections))
    limit = limits.get(key)
    if limit is None:
        limit = limits[key] = AdaptiveLimit(key[2])
    return limit


def set_max_concurrency(limit: int | None) -> None:
    """Limit concurrent model calls across the whole process (None: the default, 256)."""
    global _max_concurrency
    if limit is not None and limit < 1:
        raise ValueError(f"max concurrency must be >= 1, got {limit}")
    _max_concurrency = limit or _DEFAULT_MAX_CONCURRENCY


def max_concurrency() -> int:
    """The current process-wide limit of concurrent model calls."""
    return _max_concurrency


def _loop_semaphore(
    store: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[int, asyncio.Semaphore]],
    limit: int,
) -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    entry = store.get(loop)
    if entry is None or entry[0] != limit:
        entry = (limit, asyncio.Semaphore(limit))
        store[loop] = entry
    return entry[1]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code.

    Inside a running event loop (a notebook, a Textual app) it runs on a
    worker thread with its own loop, instead of failing.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


class _InvalidStructured(Exception):
    """An answer that does not follow the requested schema (internal)."""

    def __init__(self, output: ModelOutput, reason: str) -> None:
        super().__init__(reason)
        self.output = output
        self.reason = reason


def message_bytes(messages: Sequence[Message], tools: Sequence[ToolDef] = (),
                  config: GenerateConfig | None = None) -> int:
    """A bound on the tokens a call sends that holds for any script: every token of a
    byte-level tokenizer is at least one byte, so the UTF-8 bytes of what is sent (the
    messages with their tool calls, the tools, the answer's schema), with 16 for each
    message's framing, bound them. (One token per three characters did not: a case in
    Chinese or Japanese is near one token a character, and ran 1.13-1.27x over a cap.)"""
    total = 0
    for m in messages:
        total += len(m.content.encode()) + 16
        for c in m.tool_calls:
            total += len(c.name) + len(c.id) + len(json.dumps(c.arguments, ensure_ascii=False).encode())
    for t in tools:
        total += len(t.name) + len(t.description.encode()) + len(
            json.dumps(t.parameters, ensure_ascii=False).encode()) + 16
    if config is not None and config.response_schema is not None:
        total += len(json.dumps(config.response_schema, ensure_ascii=False).encode())
    return total + 16


def answer_bytes(output: ModelOutput) -> int:
    """A bound on the tokens of an answer, by the same rule: its UTF-8 bytes."""
    return len(output.text.encode()) + sum(
        len(c.name) + len(json.dumps(c.arguments, ensure_ascii=False).encode()) + 8
        for c in output.tool_calls) + 1


def structured_config(base: GenerateConfig, schema: type[BaseModel] | dict[str, Any],
                      name: str) -> tuple[GenerateConfig, Validator]:
    """The config of a call whose answer must follow ``schema`` (as its cache key sees it),
    and the validator of its answer."""
    json_schema, validator = schema_of(schema)
    # model_copy, not a new GenerateConfig: validation would copy the schema dict,
    # and the provider's derived forms (the strict schema) are cached by its identity
    return base.model_copy(update={"response_schema": json_schema,
                                   "response_schema_name": name}), validator


#: the fields of an answer a provider fills (each a text or JSON-like data), besides its
#: tool calls' ids, names and arguments
_FILLED = ("text", "model", "finish_reason", "parsed", "raw_request", "raw_response",
           "withheld")


def _each_filled(output: ModelOutput, change: Callable[[Any], Any],
                 fields: tuple[str, ...] = _FILLED) -> ModelOutput:
    """``output`` with ``change`` applied to each field a provider fills; the answer itself
    when ``change`` changed nothing (it returns what it is given, unchanged)."""
    update: dict[str, Any] = {f: change(getattr(output, f)) for f in fields}
    calls = []
    for c in output.tool_calls:
        parts = {"id": change(c.id), "name": change(c.name), "arguments": change(c.arguments)}
        changed = {k: v for k, v in parts.items() if v is not getattr(c, k)}
        calls.append(c.model_copy(update=changed) if changed else c)
    if any(a is not c for a, c in zip(calls, output.tool_calls, strict=True)):
        update["tool_calls"] = tuple(calls)
    changed = {k: v for k, v in update.items() if k == "tool_calls" or v is not getattr(output, k)}
    return output.model_copy(update=changed) if changed else output


def without_secrets(output: ModelOutput, secrets: tuple[str, ...]) -> ModelOutput:
    """The answer with ``secrets`` masked in every field a provider fills: the text, the
    model name and finish reason, each tool call's id, name and arguments, the parsed
    object and the raw exchange (a provider echoed the key as its ``model`` and as a tool
    call's name; both were stored and reported). The answer itself when none holds one."""
    return _each_filled(output, lambda value: scrub(value, secrets))


def well_formed(output: ModelOutput) -> ModelOutput:
    """The answer with each lone surrogate (``"\\ud800"`` in a server's JSON: Python's
    decoder keeps it) replaced by U+FFFD in every field the provider's answer fills. Kept,
    such a character is text no UTF-8 encoder takes: the cache, the call journal, the store
    and every report refused the answer, and the iteration (paid for) was an error.

    The request is not looked at: cycle built it from its own messages, each source of
    which (answers, tool results, users' turns) is made whole where it enters. Looked at
    first by one pass of the C JSON encoder (5 us a call, where walking the exchange took
    45: on a run bound by CPU, 2% of a call)."""
    fields = tuple(f for f in _FILLED if f != "raw_request")
    if not has_surrogate([[getattr(output, f) for f in fields],
                          [(c.id, c.name, c.arguments) for c in output.tool_calls]]):
        return output
    return _each_filled(output, whole, fields)


class Model:
    """A provider's model with retries, limits, cache, budget, cost and events."""

    def __init__(
        self,
        api: ModelAPI,
        services: ModelServices = NO_SERVICES,
        *,
        config: GenerateConfig | None = None,
        role: str = "agent",
        retry: RetryPolicy | None = None,
        batch: BatchSettings | None = None,
    ) -> None:
        """``services``: what this model shares with the others of its run; ``retry`` and
        ``batch``: its own provider's policies (cycle.yaml's ``providers:`` section)."""
        self.api = api
        #: send calls in provider batch jobs (None: live); a model that is not a real
        #: provider's answers at once and has no batch price
        self.batch = batch if not api.offline else None
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Batcher] = (
            weakref.WeakKeyDictionary())
        self.services = services
        cache, budget = services.cache, services.budget
        self.journal = services.journal
        self.name: str = api.name
        #: True for offline/scripted: reports must say so
        self.offline: bool = api.offline
        self.cache = cache
        #: where what the server accepts is kept (the store's), and what was last kept there
        self.forms = services.forms
        self._kept_form: tuple[str, str] | None = None
        if self.forms is not None and (endpoint := api.server_key()) is not None:
            stored = self.forms.server(endpoint)
            if stored is None and cache is not None:
                # an earlier release kept it in the response cache: moved to the store
                stored = cache.take_server(endpoint)
                if stored is not None:
                    self.forms.remember_server(endpoint, stored)
            if stored is not None:
                api.relearn(stored)
                self._kept_form = (endpoint, stored)
        self.bus = services.bus
        self.budget = budget
        if budget is not None and budget.limit is not None:
            api.guard_max_tokens = True
        self.pricing = services.pricing or DEFAULT_TABLE
        self.config = config or GenerateConfig()
        self.role = role
        self.retry = retry or RetryPolicy()
        #: the key this model sends: masked in every answer before anything keeps it
        self._secrets = maskable(api.secrets)

    def __repr__(self) -> str:
        return f"Model({self.name!r})"

    # -- public API ---------------------------------------------------------

    async def generate(
        self,
        messages: list[Message],
        *,
        tools: list[ToolDef] | None = None,
        config: GenerateConfig | None = None,
        iteration: int = 0,
        role: str | None = None,
        scope: CallScope = NO_SCOPE,
    ) -> ModelOutput:
        """One call: text and/or tool calls, with usage and cost filled in. ``scope``: where
        the call belongs (its run, round, case): its journal, cache salt and cost's home."""
        return await self._call(
            list(messages), list(tools or []), self.config.merged(config),
            iteration=iteration, role=role or self.role, scope=scope,
        )

    async def generate_structured(
        self,
        messages: list[Message],
        schema: type[BaseModel] | dict[str, Any],
        *,
        name: str = "output",
        config: GenerateConfig | None = None,
        iteration: int = 0,
        role: str | None = None,
        scope: CallScope = NO_SCOPE,
    ) -> ModelOutput:
        """A call whose answer must follow ``schema``; ``.parsed`` holds the validated
        object (a model instance for a pydantic schema, a dict for a JSON schema).

        An answer that is not valid JSON for the schema is sent back once with
        the validation error; if the second answer is also invalid,
        StructuredOutputError. Usage and cost of both calls are summed.
        """
        cfg, validator = structured_config(self.config.merged(config), schema, name)
        role = role or self.role
        messages = list(messages)
        try:
            return await self._call(messages, [], cfg, iteration=iteration, role=role,
                                    scope=scope, accept=validator)
        except _InvalidStructured as first:
            repair = messages + [
                Message.assistant(first.output.text),
                Message.user(
                    "That answer does not follow the required JSON schema "
                    f"'{name}': {first.reason}\n"
                    "Reply again with only the corrected JSON, nothing else."
                ),
            ]
            try:
                second = await self._call(repair, [], cfg, iteration=iteration, role=role,
                                          scope=scope, accept=validator)
            except _InvalidStructured as again:
                raise StructuredOutputError(
                    f"{self.name} answered with output that does not follow the schema "
                    f"'{name}', even after one repair: {again.reason}",
                    hint="Try a stronger model, a simpler schema, or a clearer instruction.",
                ) from None
            return second.model_copy(update={
                "usage": first.output.usage + second.usage,
                "cost": first.output.cost + second.cost,
                "cost_estimated": first.output.cost_estimated or second.cost_estimated,
            })

    def generate_sync(self, messages: list[Message], **kwargs: Any) -> ModelOutput:
        """``generate`` for synchronous code."""
        return run_sync(self._closing(self.generate(messages, **kwargs)))

    def generate_structured_sync(
        self, messages: list[Message], schema: type[BaseModel] | dict[str, Any], **kwargs: Any
    ) -> ModelOutput:
        """``generate_structured`` for synchronous code."""
        return run_sync(self._closing(self.generate_structured(messages, schema, **kwargs)))

    async def _closing(self, call: Coroutine[Any, Any, T]) -> T:
        # each sync call runs on a fresh loop: close that loop's clients with it
        try:
            return await call
        finally:
            await self.api.aclose()

    async def aclose(self) -> None:
        """Release the provider's clients (and stop following batch jobs: they go on at the
        provider, and a resumed run picks them up)."""
        try:
            batcher = self._batchers.pop(asyncio.get_running_loop(), None)
        except RuntimeError:
            batcher = None
        if batcher is not None:
            await batcher.aclose()
        await self.api.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the call -----------------------------------------------------------

    async def _call(
        self,
        messages: list[Message],
        tools: list[ToolDef],
        config: GenerateConfig,
        *,
        iteration: int,
        role: str,
        scope: CallScope,
        accept: Validator | None = None,
    ) -> ModelOutput:
        """One call: replayed from the journal, answered from the cache, or sent (with
        retries) and then kept in both."""
        kept = scope.journal() if self.journal is not None else None
        key = (
            cache_key(self.name, messages, tools, config, iteration, scope.sample)
            if self.cache is not None or kept is not None else None
        )
        jkey = journal_key(kept, key) if kept is not None and key is not None else None
        if jkey is not None and self.journal is not None:
            paid = self.journal.replay(jkey, scope)
            if paid is not None:  # paid before a kill: counted then, not charged again
                return self._replayed(paid, role=role, scope=scope, accept=accept)
        hit = self._cached(key, accept)
        if hit is not None:
            self._emit(hit, role=role, scope=scope, attempts=0)
            return hit
        batched = None
        if self.batch is not None:
            batched = BatchRequest(key=jkey or uuid.uuid4().hex, messages=messages,
                                   tools=tools, config=config)
        output, attempts, wasted = await self._sent(messages, tools, config, role, batched,
                                                    scope, jkey)
        if jkey is not None and self.journal is not None:
            # kept before anything uses it: a kill from here on re-pays nothing. Its own
            # cost only: what the failed attempts before it were charged is kept already,
            # each before its retry's wait (_sent)
            await self.journal.record(jkey, output, role=role, scope=scope, attempts=attempts)
        journaled = jkey is not None
        if wasted:  # the answer's cost carries what the attempts before it were charged
            output = output.model_copy(update={"cost": output.cost + wasted,
                                               "cost_estimated": True})
        if accept is not None:
            try:
                parsed = accept(parse_json(output.text))
            except ValueError as e:  # json.JSONDecodeError is a ValueError too
                reason = str(e) or e.__class__.__name__
                self._emit(output, role=role, scope=scope, attempts=attempts,
                           error=f"StructuredOutputError: {reason}", journaled=journaled)
                raise _InvalidStructured(output, reason) from e
            output = output.model_copy(update={"parsed": parsed})
        self._emit(output, role=role, scope=scope, attempts=attempts, journaled=journaled)
        if key is not None and self.cache is not None:
            self.cache.put(key, output.model_copy(update={"parsed": None}))
        if self.forms is not None:
            self._keep_form()
        return output

    def _cached(self, key: str | None, accept: Validator | None) -> ModelOutput | None:
        """The cache's answer under ``key``, free and instant; None when there is none or
        it no longer follows the schema asked for (the schema changed since: ask again)."""
        if key is None or self.cache is None:
            return None
        hit = self.cache.get(key)
        if hit is None:
            return None
        hit = hit.model_copy(update={
            "cache_hit": True, "cost": 0.0, "cost_estimated": False, "latency": 0.0,
        })
        if accept is None:
            return hit
        try:
            return hit.model_copy(update={"parsed": accept(parse_json(hit.text))})
        except ValueError:
            return None

    async def _sent(self, messages: list[Message], tools: list[ToolDef], config: GenerateConfig,
                    role: str, batched: BatchRequest | None, scope: CallScope,
                    jkey: str | None = None) -> tuple[ModelOutput, int, float]:
        """The provider's answer, the attempts it took and what the failed attempts before
        it were charged (a dropped answer's cost: not in the answer's), retried as the
        policy says; a failure is reported once (with its attempts) and raised as what the
        user reads. With ``jkey``, a charge is in the journal before anything can lose it:
        a failed attempt's before its retry's wait (a kill during the wait kept it), a
        failed call's before it is raised (``_keep_failure``)."""
        started = time.monotonic()
        attempts = 1
        wasted = 0.0  # what failed attempts were charged (a dropped answer's)
        unkept = 0.0  # of it, what the journal does not hold yet
        kept = False  # a charge of this call is in the journal: its failure's row is too
        try:
            try:
                # the fast path: a call that succeeds first time needs no retry machinery
                return await self._attempt(messages, tools, config, role, batched, scope), 1, 0.0
            except BaseException as first:
                wasted = unkept = _charged(first)
                if self.retry.attempts <= 1 or not self._should_retry(first):
                    raise
                # tenacity's first attempt replays this failure, so that it counts
                # it and waits before the second call
                replay = [first]

                async def again() -> ModelOutput:
                    nonlocal wasted, unkept
                    if replay:
                        raise replay.pop()
                    try:
                        return await self._attempt(messages, tools, config, role)
                    except BaseException as e:
                        charged = _charged(e)
                        wasted += charged
                        unkept += charged
                        raise

                async def keep_charge(state: tenacity.RetryCallState) -> None:
                    # before the wait: the attempt that just failed was charged, and a
                    # process killed while it waits must not lose that from the run's cost
                    nonlocal unkept, kept
                    error = state.outcome.exception() if state.outcome else None
                    if unkept and jkey is not None and isinstance(error, Exception):
                        await self._keep_failure(jkey, error, role=role, scope=scope,
                                                 attempts=state.attempt_number, cost=unkept,
                                                 latency=time.monotonic() - started,
                                                 retried=True)
                        unkept, kept = 0.0, True

                retrying = self._retrying(keep_charge)
                try:
                    output = await retrying(again)
                finally:
                    attempts = retrying.statistics.get("attempt_number", attempts)
                return output, attempts, wasted
        except BudgetExceededError:
            raise  # no call was made: nothing to report
        except BaseException as e:
            latency = time.monotonic() - started
            # paid for (a price table without the model charges nothing, yet a refusal
            # is still the provider's answer): kept; so is the failure of a call whose
            # earlier attempt's charge is kept (``retried``, not a call of its own: this
            # row, cost 0 if this attempt was not charged, is the call's); any other
            # failure keeps nothing
            if (jkey is not None and isinstance(e, Exception)
                    and (unkept or kept or getattr(e, "withheld", None) is not None)):
                await self._keep_failure(jkey, e, role=role, scope=scope, attempts=attempts,
                                         cost=unkept, latency=latency)
                kept = True
            self._emit_failure(e, role=role, scope=scope, attempts=attempts,
                               latency=latency, cost=wasted, journaled=kept)
            too_long = self._waits_too_long(e)
            if too_long is not None:
                raise RetriesExhaustedError(
                    f"{self.name}: the provider asked to wait {too_long:g} s before trying "
                    f"again, more than the {self.retry.max_retry_after:g} s cycle waits at "
                    f"most (providers.{self.name.partition(':')[0]}.max_retry_after in "
                    f"cycle.yaml); last: {_what(e)}", attempts=attempts, last=e,
                ) from e
            if attempts > 1 and self._should_retry(e):
                raise RetriesExhaustedError(
                    f"{self.name}: all {attempts} attempts failed; last: {_what(e)}",
                    attempts=attempts, last=e,
                ) from e
            raise

    async def _keep_failure(self, jkey: str, error: Exception, *, role: str, scope: CallScope,
                            attempts: int, cost: float, latency: float,
                            retried: bool = False) -> None:
        """Keep a call that failed after it was charged (``cost``) in the journal, at once:
        its charge is then in the stored totals once, even if the process is killed before
        its iteration's result is written, and a resume does not count it again. An answer
        the provider withheld is kept whole, and a resume replays it as the same error
        rather than paying for the same refusal again; any other (cut on its way,
        unreadable) keeps only its charge, and a resume asks again. ``retried``: an attempt
        asked again keeps its charge alone, whatever it was (the call is not over), before
        the wait, its row marked so (a paid attempt, not a call: the call's row comes
        after). Only charged failures come here: a call that succeeds at once does no
        work for it."""
        assert self.journal is not None
        withheld: ModelOutput | None = None if retried else getattr(error, "withheld", None)
        kept = (withheld or ModelOutput(model=self.name)).model_copy(update={
            "cost": cost, "cost_estimated": cost > 0, "latency": latency})
        await self.journal.record(jkey, kept, role=role, scope=scope, attempts=attempts,
                                  error=describe(error), retried=retried)

    def _keep_form(self) -> None:
        """Keep in the store what the server was found to accept, when it changed (first
        learned, or learned again: the server refused the form kept): the next process
        asks it right away, without a refused call, the response cache on or off."""
        endpoint, learned = self.api.server_key(), self.api.learned()
        if (endpoint is not None and learned is not None and self.forms is not None
                and (endpoint, learned) != self._kept_form):
            self.forms.remember_server(endpoint, learned)
            self._kept_form = (endpoint, learned)

    def _replayed(self, paid: ModelOutput, *, role: str, scope: CallScope,
                  accept: Validator | None) -> ModelOutput:
        """A journaled answer, used as it was: its cost is the cost paid for it (already in
        the stored totals and, on resume, in the budget), so it is not charged again. One
        the provider withheld is the same error again, not asked again."""
        paid = paid.model_copy(update={"latency": 0.0, "model": paid.model or self.name})
        if paid.withheld:
            error = self._withheld_error(paid.withheld)
            self._emit(paid, role=role, scope=scope, attempts=0, error=describe(error),
                       journaled=True)
            raise error
        if accept is not None:
            try:
                paid = paid.model_copy(update={"parsed": accept(parse_json(paid.text))})
            except ValueError as e:
                reason = str(e) or e.__class__.__name__
                self._emit(paid, role=role, scope=scope, attempts=0,
                           error=f"StructuredOutputError: {reason}", journaled=True)
                raise _InvalidStructured(paid, reason) from e
        self._emit(paid, role=role, scope=scope, attempts=0, journaled=True)
        return paid

    async def _attempt(
        self, messages: list[Message], tools: list[ToolDef], config: GenerateConfig, role: str,
        batched: BatchRequest | None = None, scope: CallScope = NO_SCOPE,
    ) -> ModelOutput:
        """One call, within the process's limit and its provider's: a rate-limited answer
        cuts the provider's limit, an answer grows it back (cycle.llm.limit). A call in a
        batch job holds no connection: it waits outside the limits; one the job cannot
        answer goes live (retries are live calls too)."""
        if batched is not None:
            try:
                return await self._send(messages, tools, config, role, batched, scope)
            except BatchUnavailable:
                pass
        global_sem = _loop_semaphore(_global_semaphores, _max_concurrency)
        limit = provider_limit(self.api)
        async with self.api.learning(messages, tools, config), global_sem:
            sent = await limit.acquire()
            try:
                output = await self._send(messages, tools, config, role)
            except RateLimitError:
                # every 429 is told, cut or not: the progress line counts them all
                limit.throttle(sent)
                self._limit_changed(limit)
                raise
            finally:
                limit.release()
            if limit.answered():
                self._limit_changed(limit)
            return output

    def _limit_changed(self, limit: AdaptiveLimit) -> None:
        if self.bus is not None:
            self.bus.emit(ConcurrencyChanged(
                provider=self.api.provider, limit=limit.current,
                ceiling=limit.ceiling, rate_limited=limit.throttled))

    async def _send(
        self, messages: list[Message], tools: list[ToolDef], config: GenerateConfig, role: str,
        batched: BatchRequest | None = None, scope: CallScope = NO_SCOPE,
    ) -> ModelOutput:
        """The call itself, its worst case reserved against the budget and settled."""
        share = self.api.batch_price if batched is not None else 1.0
        held = 0.0
        if self.budget is not None and self.budget.limit is not None:
            held = await self.budget.reserve(self._worst_case(messages, tools, config) * share
                                             * self.api.paid_calls(config))
        started = time.monotonic()
        try:
            if batched is not None:  # a job takes hours, not the call's timeout
                output = await self._batcher().call(batched, scope)
            elif config.timeout:
                async with asyncio.timeout(config.timeout):
                    output = await self.api.generate(messages, tools, config)
            else:
                output = await self.api.generate(messages, tools, config)
        except BaseException as e:
            charged = 0.0
            paid = (e.paid if isinstance(e, ProviderConnectionError | MalformedResponseError)
                    else None)
            if paid is not None:  # a dropped answer may be billed: charged, then raised
                charged = self._priced(self._bounded(paid, messages, tools, config), share).usd
            elif held and isinstance(e, TimeoutError | asyncio.CancelledError):
                # cut off by cycle once sent (its timeout, a case's, Ctrl-C): the provider
                # may bill what it generated, up to the reservation, so under a cap the
                # reservation is spent (estimated), never handed back to other calls
                charged = held
            if self.budget is not None:
                if paid is not None or charged:
                    self.budget.settle(held, charged, role, estimated=True)
                else:
                    self.budget.release(held)
            if isinstance(e, TimeoutError):
                error = ProviderConnectionError(
                    f"{self.name} did not answer within {config.timeout} s")
                error.charged = charged
                raise error from e
            e.charged = charged  # type: ignore[attr-defined]  # the ledger reads it
            raise
        if self._secrets:  # a proxy or a model may echo the key: never keep it
            output = without_secrets(output, self._secrets)
        output = well_formed(output)
        output = self._bounded(output, messages, tools, config)
        cost = self._priced(output, share)
        if self.budget is not None:  # spent the moment it arrived
            self.budget.settle(held, cost.usd, role, estimated=cost.estimated)
        if output.withheld:  # paid, and charged above, but no answer: an error of the call
            withheld = self._withheld_error(output.withheld)
            withheld.charged = cost.usd  # type: ignore[attr-defined]  # the ledger reads it
            # what the journal keeps, so that a resume replays the refusal (_keep_failure)
            withheld.withheld = output.model_copy(  # type: ignore[attr-defined]
                update={"model": output.model or self.name, "raw_request": None,
                        "raw_response": None})
            raise withheld
        return output.model_copy(update={
            "latency": time.monotonic() - started, "cost": cost.usd,
            "cost_estimated": cost.estimated, "cache_hit": False,
            "model": output.model or self.name,
        })

    def _withheld_error(self, why: str) -> MalformedResponseError:
        """The error of an answer the provider withheld, saying why (the same when replayed)."""
        return MalformedResponseError(f"{self.name}: no answer, {why}")

    def _bounded(self, output: ModelOutput, messages: list[Message], tools: list[ToolDef],
                 config: GenerateConfig) -> ModelOutput:
        """The answer with its usage bounded by its bytes when the provider gave none
        usable (``_bounded_usage``)."""
        if not output.usage_estimated or self.offline:
            return output
        return output.model_copy(update={"usage": self._bounded_usage(
            output, messages, tools, config)})

    def _priced(self, output: ModelOutput, share: float = 1.0) -> Cost:
        """What an answer costs (at ``share`` of the list price: a batch's), estimated when
        its usage was."""
        if self.offline:
            return FREE
        cost = self.pricing.cost(self.name, output.usage)
        if cost.estimated and output.model and output.model != self.name:
            # a router's name (openrouter/auto) has no price, the model it routed to may:
            # that price, not the fallback's guess (a known price asked for is kept: the
            # budget reserved at it, and a user's `pricing` for it says what is billed)
            routed = self.pricing.cost(output.model, output.usage)
            cost = cost if routed.estimated else routed
        return Cost(cost.usd * share, estimated=cost.estimated or output.usage_estimated)

    def _batcher(self) -> Batcher:
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            assert self.batch is not None
            batcher = self._batchers[loop] = Batcher(self.api, self.batch, name=self.name,
                                                     bus=self.bus)
        return batcher

    def _worst_case(self, messages: list[Message], tools: list[ToolDef],
                    config: GenerateConfig) -> float:
        """The most a call may cost: its prompt's bytes as tokens (a bound for any script,
        see ``message_bytes``) plus its ``max_tokens`` of output, or ``RESERVED_OUTPUT``
        tokens when it sets none."""
        if self.offline:
            return 0.0
        slack = CUT_SLACK if self.api.guard_max_tokens else 0
        usage = Usage(input_tokens=message_bytes(messages, tools, config),
                      output_tokens=(config.max_tokens or RESERVED_OUTPUT) + slack)
        return self.pricing.cost(self.name, usage).usd

    @staticmethod
    def _bounded_usage(output: ModelOutput, messages: list[Message], tools: list[ToolDef],
                       config: GenerateConfig) -> Usage:
        """The usage of an answer that came without a usable one: what was sent and what
        came back, by the byte bound (never less than what the provider did report), the
        answer at most the ``max_tokens`` it was reserved for (a server that honours it
        bills no more; one that ignores it is cut off where it streams: docs/limits.md)."""
        usage = output.usage
        said = min(answer_bytes(output), config.max_tokens or RESERVED_OUTPUT)
        return Usage(input_tokens=max(usage.input_tokens, message_bytes(messages, tools, config)),
                     cached_input_tokens=0, output_tokens=max(usage.output_tokens, said))

    def _should_retry(self, error: BaseException) -> bool:
        if isinstance(error, BudgetExceededError) or self._waits_too_long(error) is not None:
            return False
        return self.api.is_retryable(error)

    def _waits_too_long(self, error: BaseException) -> float | None:
        """The wait a provider asked for, when it is more than cycle waits at most."""
        asked = self.api.retry_after(error)
        return asked if asked is not None and asked > self.retry.max_retry_after else None

    def _retrying(self, before_wait: Callable[[tenacity.RetryCallState], Coroutine[Any, Any, None]]
                  ) -> tenacity.AsyncRetrying:
        """tenacity owns the retry policy: which errors, how many attempts, how long to wait;
        ``before_wait`` runs after a failed attempt that is to be retried, before the wait.
        (Imported on the first retry: a run whose calls all succeed never loads it.)"""
        import tenacity

        policy = self.retry
        backoff = tenacity.wait_exponential_jitter(
            initial=policy.initial_wait, max=policy.max_wait, jitter=policy.jitter
        )

        def wait(state: tenacity.RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            asked = self.api.retry_after(error) if error is not None else None
            # the provider's Retry-After is a floor: waiting less only earns another 429
            return max(backoff(state), asked) if asked else backoff(state)

        return tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(policy.attempts),
            wait=wait,
            retry=tenacity.retry_if_exception(self._should_retry),
            before_sleep=before_wait,
            reraise=True,
        )

    # -- reporting ----------------------------------------------------------

    def _emit(
        self,
        output: ModelOutput,
        *,
        role: str,
        scope: CallScope,
        attempts: int,
        error: str | None = None,
        journaled: bool = False,
    ) -> None:
        if self.bus is None:
            return
        self.bus.emit(ModelCalled(
            model=self.name,
            role=role,
            input_tokens=output.usage.input_tokens,
            cached_input_tokens=output.usage.cached_input_tokens,
            output_tokens=output.usage.output_tokens,
            cost=output.cost,
            cost_estimated=output.cost_estimated,
            latency=output.latency,
            cache_hit=output.cache_hit,
            attempts=attempts,
            error=error,
            scope=scope,
            journaled=journaled,
        ))

    def _emit_failure(
        self, error: BaseException, *, role: str, scope: CallScope, attempts: int,
        latency: float, cost: float = 0.0, journaled: bool = False,
    ) -> None:
        """A call that failed, with what its attempts were charged (``cost``, estimated:
        answers dropped on the way, which the provider may bill); ``journaled``: its row
        is in the journal already (``_keep_failure``)."""
        if self.bus is None:
            return
        self.bus.emit(ModelCalled(
            model=self.name, role=role, latency=latency, attempts=attempts,
            error=describe(error), scope=scope, cost=cost, cost_estimated=cost > 0,
            journaled=journaled,
        ))


def _charged(error: BaseException) -> float:
    """What a failed attempt was charged (``Model._send``): a dropped answer's cost, an
    abandoned call's reservation under a cap; else nothing."""
    return float(getattr(error, "charged", 0.0))


def _what(error: BaseException) -> str:
    if isinstance(error, ProviderError) and error.status is not None:
        return f"HTTP {error.status} ({error.__class__.__name__}): {error.message}"
    if isinstance(error, ModelError):
        return f"{error.__class__.__name__}: {error.message}"
    return describe(error)
