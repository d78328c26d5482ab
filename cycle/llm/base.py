"""The provider contract: our messages in, our output out.

A provider implements ``ModelAPI.generate`` (one SDK call, translated both
ways) and may override the retry hooks. Retries, concurrency, caching, usage
and cost live once in ``cycle.llm.model.Model``.
"""

from __future__ import annotations

import abc
import contextlib
from typing import Any

from msgspec import Struct, field
from pydantic import BaseModel, ConfigDict, Field

from cycle.records import Message, ToolCall, ToolDef, Usage


class GenerateConfig(BaseModel):
    """Generation options; ``None`` means the provider's default."""

    model_config = ConfigDict(frozen=True)

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    #: a JSON schema the output must follow (structured output)
    response_schema: dict[str, Any] | None = None
    #: the schema's name, sent to providers that want one (OpenAI json_schema)
    response_schema_name: str = "output"
    #: per-call timeout in seconds
    timeout: float | None = None

    def merged(self, other: GenerateConfig | None) -> GenerateConfig:
        """This config with every field ``other`` sets taken from ``other``."""
        if other is None:
            return self
        return self.model_copy(update=other.model_dump(exclude_unset=True))


class ModelOutput(BaseModel):
    """What one call produced."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    #: the request and response as sent and received, for the call log
    raw_request: dict[str, Any] | None = None
    raw_response: dict[str, Any] | None = None
    #: the validated object, for structured output
    parsed: Any = None
    #: filled in by Model: cost in USD, whether the price was estimated,
    #: whether the answer came from the response cache, wall time of the call
    cost: float = 0.0
    cost_estimated: bool = False
    cache_hit: bool = False
    latency: float = 0.0
    model: str = ""
    #: the provider sent no usable token counts (absent, text, a fraction): Model prices
    #: the call from what was sent and answered, by a bound that holds for any script
    usage_estimated: bool = False
    #: the provider gave no answer to use, and said why (Gemini's finish reason on a
    #: candidate with no text, a blocked prompt): Model charges the call, then raises
    #: MalformedResponseError with this reason, an error of the call, never an empty
    #: answer scored as one
    withheld: str | None = None


def unusable_answer(answer_tokens: int | None) -> ModelOutput:
    """What stands for an answer that came back but cannot be used (unreadable, cut on its
    way, a count that lies), as an error's ``paid``: Model charges it as the most it may
    have cost, the prompt by its bytes and ``answer_tokens`` of output (the max_tokens it
    was asked with, else the reservation), estimated."""
    return ModelOutput(usage=Usage(output_tokens=answer_tokens or RESERVED_OUTPUT),
                       usage_estimated=True)


class ProviderOptions(Struct, frozen=True):
    """Options a provider is built with (from config or the environment)."""

    base_url: str | None = None
    api_key: str | None = None
    api_version: str | None = None
    timeout: float = 60.0
    max_connections: int = 32
    #: the largest answer read, in MB after decompression (cycle.llm.bodies)
    max_response_mb: float = 64.0
    extra: dict[str, Any] = field(default_factory=dict)


class BatchRequest(Struct, frozen=True):
    """One call of a batch job; ``key`` finds its answer in the job's results."""

    key: str
    messages: list[Message]
    tools: list[ToolDef]
    config: GenerateConfig


class JobStatus(Struct, frozen=True):
    """Where a provider's batch job stands."""

    #: the provider's own word (in_progress, completed, JOB_STATE_RUNNING, ...)
    state: str
    #: it will not change any more
    done: bool = False
    #: it ended with results to read (some of its calls may still have failed)
    succeeded: bool = False
    total: int = 0
    completed: int = 0
    failed: int = 0
    #: the provider's job as read (its answer files, or its inlined answers): what
    #: ``batch_results`` reads the answers from, without asking for the job again
    job: Any = None


class BatchUnsupported(Exception):
    """The provider (or the server behind it) has no batch API: calls go live."""


#: the key sent to a server that needs none (the SDKs refuse to start without one)
PLACEHOLDER_KEY = "not-needed"


#: tokens a call is reserved beyond its ``max_tokens`` when the provider streams it under
#: a budget: what a server may still generate after cycle stops reading (it notices the
#: closed connection a moment later)
CUT_SLACK = 16

#: output tokens reserved for a call that sets no max_tokens (set max_tokens for an exact cap)
RESERVED_OUTPUT = 4096


class ModelAPI(abc.ABC):
    """One provider's model. Implement ``generate``; override the hooks if needed."""

    #: registry name of the provider, e.g. "openai"
    provider: str = ""
    #: the results are not a real model's (the offline and scripted providers)
    offline: bool = False
    #: a budget caps this model's calls: a provider that can stream its answers stops
    #: reading one that runs past ``max_tokens`` (a server that ignores it would bill
    #: past the call's reservation); set by ``Model``
    guard_max_tokens: bool = False

    def __init__(self, model_name: str, options: ProviderOptions | None = None) -> None:
        self.model_name = model_name
        self.options = options or ProviderOptions()

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model_name}"

    @abc.abstractmethod
    async def generate(
        self,
        messages: list[Message],
        tools: list[ToolDef],
        config: GenerateConfig,
    ) -> ModelOutput:
        """Make one call. Raise ``cycle.errors.ModelError`` subclasses on failure."""

    def is_retryable(self, error: BaseException) -> bool:
        """Whether Model should retry after this error."""
        return bool(getattr(error, "retryable", False))

    def retry_after(self, error: BaseException) -> float | None:
        """Seconds the provider asked us to wait before retrying, if it said."""
        return getattr(error, "retry_after", None)

    #: the share of the list price a batch job's tokens cost (OpenAI and Gemini: half)
    batch_price: float = 0.5

    def paid_calls(self, config: GenerateConfig) -> int:
        """The most answers one ``generate`` may pay for (a budget reserves for each): one,
        but for a provider that may ask again in another form (cycle.llm.compat)."""
        return 1

    def learning(self, messages: list[Message], tools: list[ToolDef],
                 config: GenerateConfig) -> contextlib.AbstractAsyncContextManager[None]:
        """Entered around a call before it takes a connection or reserves its budget: a
        provider that learns its server's forms (cycle.llm.compat) holds the first call
        that needs one learned there, and the calls needing it too wait outside, holding
        nothing. The others: nothing to wait for."""
        return contextlib.nullcontext()

    def server_key(self) -> str | None:
        """The key what a provider that adapts to its server (cycle.llm.compat) learned is
        kept under in the store (no credential in it); None for the others."""
        return None

    def learned(self) -> str | None:
        """What the server was found to accept, as JSON (None: nothing yet)."""
        return None

    def relearn(self, accepted: str) -> None:
        """Take back what ``learned`` gave (kept in the store by an earlier process)."""

    async def batch_submit(self, requests: list[BatchRequest]) -> str:
        """Submit ``requests`` as one batch job; its id. Raise ``BatchUnsupported`` when the
        provider has none (the default)."""
        raise BatchUnsupported(f"{self.name} has no batch API")

    async def batch_status(self, job_id: str) -> JobStatus:
        """The state of a job ``batch_submit`` made (in this process or a killed one)."""
        raise BatchUnsupported(f"{self.name} has no batch API")

    async def batch_results(self, status: JobStatus) -> dict[str, ModelOutput | str]:
        """A finished job's answers by request key (from its last ``batch_status``): an
        output, or why that call failed."""
        raise BatchUnsupported(f"{self.name} has no batch API")

    @property
    def max_connections(self) -> int:
        return self.options.max_connections

    #: the API key it sends (a provider that needs none: None or PLACEHOLDER_KEY)
    _api_key: str | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        """The credentials this API sends (its key): Model masks them in every answer,
        whatever the provider echoes, before the answer is stored, cached or used."""
        from cycle.llm.http import url_secrets

        key = self._api_key
        keys = () if not key or key == PLACEHOLDER_KEY else (key,)
        # credentials inside the base URL (user:pass@, ?api-key=) are secrets too
        return keys + url_secrets(getattr(self, "base_url", None) or self.options.base_url)

    async def aclose(self) -> None:
        """Release clients; called when the Model is closed."""
