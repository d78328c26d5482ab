"""The Gemini provider: ``generateContent`` through the ``google-genai`` SDK.

The key comes from ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY`` (or the provider
options); a base URL (options, or ``GOOGLE_GEMINI_BASE_URL``) points the SDK
at another endpoint, such as the loopback server in tests. The SDK retries
only when given ``HttpRetryOptions``; we give none, so ``Model`` is the one
retry layer. Automatic function calling is off: tool calls come back to the
caller. SDK errors become ``cycle.errors`` here.
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from cycle import heap
from cycle.errors import MalformedResponseError, MissingCredentialsError, ProviderConnectionError
from cycle.llm.base import (
    PLACEHOLDER_KEY,
    RESERVED_OUTPUT,
    BatchRequest,
    GenerateConfig,
    JobStatus,
    ModelAPI,
    ModelOutput,
    ProviderOptions,
    unusable_answer,
)
from cycle.llm.bodies import answered_when_cut, cap_client
from cycle.llm.clients import SharedClients
from cycle.llm.http import redact, safe_url, status_error, token_count, unsupported_when_missing
from cycle.records import Message, ToolCall, ToolDef, Usage

if TYPE_CHECKING:
    from google import genai
    from google.genai import types

KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
BASE_URL_VARIABLE = "GOOGLE_GEMINI_BASE_URL"
#: prefix of the ids we make up for calls the API returned without one
_SYNTHETIC_ID = "gemini-call-"

#: the states a batch job ends in
_ENDED = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED")

_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "BLOCKLIST": "content_filter",
    "SPII": "content_filter",
    "RECITATION": "recitation",
    "MALFORMED_FUNCTION_CALL": "malformed_function_call",
}


def _is_google(base_url: str | None) -> bool:
    if not base_url:
        return True
    host = urlparse(base_url).hostname or ""
    return host.endswith("googleapis.com")


#: the genai clients, one per event loop and endpoint settings
_clients: SharedClients[genai.Client] = SharedClients(lambda client: client.aio.aclose())


class GeminiAPI(ModelAPI):
    """``gemini:<model>``: the Gemini Developer API."""

    provider = "gemini"

    def __init__(self, model_name: str, options: ProviderOptions | None = None) -> None:
        super().__init__(model_name, options)
        opts = self.options
        self.base_url: str | None = opts.base_url or os.environ.get(BASE_URL_VARIABLE) or None
        key = opts.api_key or next(
            (os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None
        )
        if not key:
            if _is_google(self.base_url):
                raise MissingCredentialsError(
                    f"no API key for gemini:{model_name}: set GEMINI_API_KEY (or GOOGLE_API_KEY)",
                    hint="export GEMINI_API_KEY=... (or put it in .env); keys are made at "
                    "https://aistudio.google.com/apikey",
                )
            key = PLACEHOLDER_KEY
        self._api_key = key
        #: the maxOutputTokens of each call sent in a batch job, by its key, for the answer
        #: whose usage is unknown (``_output``); a job resumed by another process has none
        self._batch_caps: dict[str, int | None] = {}
        headers = opts.extra.get("headers") or {}
        # models with equal keys share a client (cycle.llm.clients)
        self._client_key: tuple[Any, ...] = (
            key, self.base_url, opts.api_version, opts.timeout, opts.max_response_mb,
            tuple(sorted((str(k), str(v)) for k, v in dict(headers).items())),
        )

    def __repr__(self) -> str:
        return f"GeminiAPI({self.model_name!r}, base_url={safe_url(self.base_url)!r})"

    def _client(self) -> genai.Client:
        return _clients.get(self, self._client_key, self._new_client)

    def _new_client(self) -> genai.Client:
        genai = heap.import_module("google.genai")
        http_options = genai.types.HttpOptions(
            base_url=self.base_url,
            api_version=self.options.api_version,
            timeout=int(self.options.timeout * 1000),
            headers=self.options.extra.get("headers"),
            # retry_options stays None: the SDK then makes exactly one attempt
        )
        client = genai.Client(api_key=self._api_key, http_options=http_options)
        http = getattr(client._api_client, "_async_httpx_client", None)
        if http is not None:  # every body read under a cap (cycle.llm.bodies)
            cap_client(http, limit_mb=self.options.max_response_mb)
        return client

    async def aclose(self) -> None:
        await _clients.release(self)

    # -- the call -------------------------------------------------------------

    def build_request(
        self, messages: list[Message], tools: list[ToolDef], config: GenerateConfig
    ) -> tuple[list[types.Content], types.GenerateContentConfig]:
        """The contents and the config of ``models.generate_content`` for this call."""
        types = heap.import_module("google.genai.types")
        system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
        contents: list[types.Content] = []
        for message in messages:
            if message.role == "system":
                continue
            content = _content(message, types)
            # consecutive tool results answer one model turn: send them as one content
            if (
                message.role == "tool"
                and contents
                and contents[-1].role == "user"
                and contents[-1].parts
                and all(p.function_response is not None for p in contents[-1].parts)
            ):
                contents[-1].parts.extend(content.parts or [])
            else:
                contents.append(content)
        kwargs: dict[str, Any] = {
            "automatic_function_calling": types.AutomaticFunctionCallingConfig(disable=True),
        }
        if system:
            kwargs["system_instruction"] = system
        if tools:
            kwargs["tools"] = [types.Tool(function_declarations=[
                types.FunctionDeclaration(
                    name=t.name, description=t.description, parameters_json_schema=t.parameters,
                )
                for t in tools
            ])]
        if config.temperature is not None:
            kwargs["temperature"] = config.temperature
        if config.top_p is not None:
            kwargs["top_p"] = config.top_p
        if config.seed is not None:
            kwargs["seed"] = config.seed
        if config.stop:
            kwargs["stop_sequences"] = list(config.stop)
        max_tokens = config.max_tokens
        if max_tokens is None and self.guard_max_tokens:
            # under a budget a call is reserved RESERVED_OUTPUT tokens of output when it
            # sets no max_tokens; Gemini's own default is far more (65,536 for 2.5 models,
            # thinking included), which an honest answer could bill past the reservation
            max_tokens = RESERVED_OUTPUT
        if max_tokens is not None:
            kwargs["max_output_tokens"] = max_tokens
        if config.response_schema is not None:
            kwargs["response_mime_type"] = "application/json"
            kwargs["response_json_schema"] = config.response_schema
        return contents, types.GenerateContentConfig(**kwargs)

    async def generate(
        self, messages: list[Message], tools: list[ToolDef], config: GenerateConfig
    ) -> ModelOutput:
        contents, gen_config = self.build_request(messages, tools, config)
        raw_request = {
            "model": self.model_name,
            "contents": [c.model_dump(mode="json", exclude_none=True) for c in contents],
            "config": gen_config.model_dump(
                mode="json", exclude_none=True, exclude={"automatic_function_calling"}
            ),
        }
        response = await self._calling(self._client().aio.models.generate_content(
            model=self.model_name, contents=contents, config=gen_config),
            answer_tokens=gen_config.max_output_tokens)
        try:
            return self._output(response, raw_request,
                                answer_tokens=gen_config.max_output_tokens)
        except MalformedResponseError as e:  # a count that lies (negative): it came back
            e.paid = e.paid or unusable_answer(gen_config.max_output_tokens)
            raise

    async def _calling(self, call: Any, *, answer_tokens: int | None = None) -> Any:
        """Await an SDK call, its errors as ``cycle.errors``."""
        from google.genai import errors

        timeouts, transport = _http_errors()
        where = f"gemini:{self.model_name}"
        try:
            return await call
        except errors.APIError as e:
            headers = dict(getattr(e.response, "headers", None) or {})
            body = json.dumps(e.details) if not isinstance(e.details, str) else e.details
            error = status_error(
                self.provider, self.model_name, int(e.code or 0),
                body=body, headers=headers, detail=e.message,
                secrets=self.secrets, key_variable="GEMINI_API_KEY",
            )
            # Gemini says how long to wait in the body (google.rpc.RetryInfo), not in a
            # Retry-After header: without it, the backoff's few seconds only earned more
            # 429s, and a quota reset hours away was retried instead of named
            delay = _retry_delay(e.details)
            if delay is not None and (error.retry_after is None or delay > error.retry_after):
                error.retry_after = delay
            raise error from e
        except timeouts as e:
            raise ProviderConnectionError(
                f"{where} timed out (after {self.options.timeout} s)"
            ) from e
        except transport as e:
            where_url = safe_url(self.base_url) or "generativelanguage.googleapis.com"
            if answered_when_cut(e):
                # generated, and billed, but cut on its way: charged as the most it may
                # have cost (estimated) before it is asked again
                cut = ProviderConnectionError(
                    f"{where} at {where_url}: the answer was cut on its way "
                    f"({redact(str(e), *self.secrets)})")
                cut.paid = unusable_answer(answer_tokens)
                raise cut from e
            raise ProviderConnectionError(
                f"cannot reach {where} at {where_url}: {redact(str(e), *self.secrets)}"
            ) from e
        except ValueError as e:  # undecodable JSON, or JSON that is not a response
            error = MalformedResponseError(
                f"{where} sent a response that could not be understood: "
                f"{redact(_why(e, self.secrets), *self.secrets)[:300]}"
            )
            if _answered(e):
                # it came back (a 200 the SDK could not read: usage as text or a fraction,
                # tool arguments that are not an object, a cut body): Gemini may bill it,
                # so it is charged as the most it may be, by the byte bound (estimated)
                error.paid = unusable_answer(answer_tokens)
            raise error from e

    # -- batch jobs (Gemini batch mode, the requests inlined in the job) -----------------

    async def batch_submit(self, requests: list[BatchRequest]) -> str:
        types = heap.import_module("google.genai.types")
        inlined = []
        for r in requests:
            contents, config = self.build_request(r.messages, r.tools, r.config)
            inlined.append(types.InlinedRequest(contents=contents, config=config,
                                                metadata={"key": r.key}))
            self._batch_caps[r.key] = config.max_output_tokens
        with unsupported_when_missing(self.base_url):
            job = await self._calling(self._client().aio.batches.create(
                model=self.model_name, src=inlined, config={"display_name": "cycle"}))
        return str(job.name)

    async def batch_status(self, job_id: str) -> JobStatus:
        job = await self._calling(self._client().aio.batches.get(name=job_id))
        state = str(getattr(job.state, "value", job.state) or "JOB_STATE_PENDING")
        ended = state in _ENDED
        return JobStatus(state=state, done=ended,
                         succeeded=ended and job.dest is not None
                         and bool(job.dest.inlined_responses), job=job)

    async def batch_results(self, status: JobStatus) -> dict[str, ModelOutput | str]:
        # the answers came inlined with the job's last state: nothing to fetch again
        job = status.job
        answers: dict[str, ModelOutput | str] = {}
        for item in (job.dest.inlined_responses if job.dest else None) or ():
            key = (item.metadata or {}).get("key")
            if not key:
                continue
            cap = self._batch_caps.pop(key, None)
            if item.error is not None or item.response is None:
                error = item.error
                answers[key] = (f"{error.code}: {error.message}" if error is not None
                                else "no answer")
                continue
            try:
                answers[key] = self._output(item.response, None, answer_tokens=cap)
            except MalformedResponseError as e:
                answers[key] = e.message
        return answers

    def _output(self, response: Any, raw_request: dict[str, Any] | None, *,
                answer_tokens: int | None = None) -> ModelOutput:
        """Our output for a response; ``answer_tokens``: the maxOutputTokens it was asked
        with (what an answer whose usage is unknown is charged as output: a model that
        thinks is billed its thoughts, up to that cap, and they are not in the text)."""
        where = f"gemini:{self.model_name}"
        usage = Usage()
        estimated = True
        #: Gemini told nothing of the output it billed (no candidates or thoughts count)
        untold = True
        said: Any = None
        meta = getattr(response, "usage_metadata", None)
        if meta is not None:
            def count(name: str) -> int | None:
                return token_count(getattr(meta, name, None), field=name, where=where)

            sent, said = count("prompt_token_count"), count("candidates_token_count")
            thought = count("thoughts_token_count")
            if sent == 0:  # a prompt is never 0 tokens: a count that says nothing
                sent = None
            untold = said is None and thought is None
            usage = Usage(
                input_tokens=sent or 0,
                cached_input_tokens=count("cached_content_token_count") or 0,
                # thinking tokens are billed as output
                output_tokens=(said or 0) + (thought or 0),
            )
            # an answer with no text may say no candidates count: its input still counts
            estimated = sent is None or (said is None and bool(response.candidates))
        raw_response = response.model_dump(
            mode="json", exclude_none=True, exclude={"sdk_http_response", "automatic_function_calling_history"},
        )
        candidates = response.candidates or []
        if not candidates:
            feedback = getattr(response, "prompt_feedback", None)
            if feedback is not None and feedback.block_reason:
                blocked = _name(feedback.block_reason)
                detail = getattr(feedback, "block_reason_message", None)
                return ModelOutput(
                    finish_reason="content_filter", usage=usage, usage_estimated=estimated,
                    raw_request=raw_request,
                    raw_response=raw_response, model=where,
                    withheld=f"promptFeedback.blockReason {blocked} (Gemini blocked the prompt)"
                    + (f": {str(detail)[:300]}" if detail else ""),
                )
            # no answer, but Gemini may bill the prompt: charged, then an error of the call
            return ModelOutput(usage=usage, usage_estimated=estimated, raw_request=raw_request,
                               raw_response=raw_response, model=where,
                               withheld="the response has no candidates")
        candidate = candidates[0]
        texts: list[str] = []
        calls: list[ToolCall] = []
        thoughts = False
        for part in (candidate.content.parts if candidate.content else None) or []:
            if part.thought:
                thoughts = True
            if part.function_call is not None:
                fc = part.function_call
                calls.append(ToolCall(
                    id=fc.id or f"{_SYNTHETIC_ID}{len(calls)}",
                    name=fc.name or "",
                    arguments=dict(fc.args or {}),
                ))
            elif part.text and not part.thought:
                texts.append(part.text)
        reason = candidate.finish_reason
        reason_name = getattr(reason, "value", reason) or None
        finish = _FINISH.get(str(reason_name), str(reason_name).lower()) if reason_name else None
        if calls and finish in (None, "stop"):
            finish = "tool_calls"
        if said == 0 and (texts or calls) and usage.output_tokens == 0:
            # an answer is never 0 tokens: the count says nothing of what was billed
            untold = estimated = True
        if answer_tokens and (meta is None or (untold and (texts or calls))):
            # see the docstring (an empty candidate with no counts, as Gemini sends a
            # blocked one, keeps the byte bound)
            usage = usage.model_copy(update={
                "output_tokens": max(usage.output_tokens, answer_tokens)})
        return ModelOutput(
            withheld=_withheld(candidate, reason_name, bool(texts or calls), thoughts),
            text="".join(texts),
            tool_calls=tuple(calls),
            finish_reason=finish,
            usage=usage, usage_estimated=estimated,
            raw_request=raw_request,
            raw_response=raw_response,
            model=f"gemini:{response.model_version or self.model_name}",
        )


#: finish reasons with which Gemini stops an answer itself: what it wrote before (if
#: anything) is not the model's whole answer
_STOPPED = frozenset({"SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII",
                      "MALFORMED_FUNCTION_CALL", "IMAGE_SAFETY", "UNEXPECTED_TOOL_CALL",
                      "TOO_MANY_TOOL_CALLS", "LANGUAGE"})


def _name(value: Any) -> str:
    return str(getattr(value, "value", value))


def _withheld(candidate: Any, reason: Any, answered: bool, thoughts: bool) -> str | None:
    """Why a candidate is no answer to use, in Gemini's words; None when it is one: text or
    tool calls that ended as a model ends (STOP, or MAX_TOKENS: cut where the call's own
    max_tokens said, even before any text), or an empty text with STOP (an empty answer,
    judged as one)."""
    said = _name(reason) if reason else None
    if answered and said not in _STOPPED:
        return None
    if not answered and said == "STOP" and not thoughts:
        return None
    if said == "MAX_TOKENS":
        # the call's own max_tokens, spent before any text (a model that thinks may spend
        # it all thinking): what this version of the prompt, with its params, produced
        return None
    message = getattr(candidate, "finish_message", None)
    what = (f"finishReason {said} (Gemini stopped the answer)" if answered
            else f"finishReason {said or 'missing'}" + (", only thoughts" if thoughts else "")
            + ", no text")
    return what + (f": {str(message)[:300]}" if message else "")


def _answered(error: ValueError) -> bool:
    """Whether the SDK failed on an answer it received (its JSON, or the response model's
    validation), not on the request before sending it."""
    if isinstance(error, json.JSONDecodeError):
        return True
    title = getattr(error, "title", None)  # a pydantic ValidationError names its model
    return isinstance(title, str) and title.endswith("Response")


def _why(error: ValueError, secrets: tuple[str, ...]) -> str:
    """What was wrong, in one line: a pydantic error's fields and problems, not its
    multi-line text with links (each value shown masked, then shortened: a key cut in two
    would no longer be found whole)."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        try:
            found = errors(include_url=False)
        except TypeError:
            found = errors()
        return "; ".join(
            f"{'.'.join(str(p) for p in item.get('loc', ()))}: {item.get('msg')} "
            f"(got {redact(str(item.get('input')), *secrets)[:60]!r})" for item in found[:3])
    return str(error)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)s\s*$")


def _retry_delay(details: Any) -> float | None:
    """The seconds a Gemini error's ``google.rpc.RetryInfo`` detail asks to wait (its
    ``retryDelay``, a protobuf Duration such as ``"37s"`` or ``"0.5s"``), if it has one."""
    error = details.get("error") if isinstance(details, dict) else None
    found = error.get("details") if isinstance(error, dict) else None
    for item in found if isinstance(found, list) else ():
        if not isinstance(item, dict) or not str(item.get("@type", "")).endswith(
                "google.rpc.RetryInfo"):
            continue
        delay = item.get("retryDelay")
        if isinstance(delay, dict):  # a Duration as an object: {"seconds": 37, "nanos": 0}
            try:
                return max(0.0, float(delay.get("seconds") or 0)
                           + float(delay.get("nanos") or 0) / 1e9)
            except (TypeError, ValueError):
                return None
        match = _DURATION.match(delay) if isinstance(delay, str) else None
        if match:
            return float(match.group(1))
    return None


def _content(message: Message, types: Any) -> types.Content:
    if message.role == "user":
        return types.Content(role="user", parts=[types.Part(text=message.content)])
    if message.role == "assistant":
        parts = [types.Part(text=message.content)] if message.content else []
        for call in message.tool_calls:
            parts.append(types.Part(function_call=types.FunctionCall(
                id=None if call.id.startswith(_SYNTHETIC_ID) else call.id,
                name=call.name,
                args=call.arguments,
            )))
        return types.Content(role="model", parts=parts or [types.Part(text="")])
    # a tool result: a function response, in a user turn
    try:
        decoded = json.loads(message.content)
    except ValueError:
        decoded = None
    payload = decoded if isinstance(decoded, dict) else {"result": message.content}
    call_id = message.tool_call_id
    return types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
        id=None if not call_id or call_id.startswith(_SYNTHETIC_ID) else call_id,
        name=message.name or "",
        response=payload,
    ))])


@functools.cache
def _http_errors() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """(timeouts, transport errors) of the HTTP client google-genai runs on: httpx2 from
    google-genai 3, httpx before (google-adk pins google-genai below 3), both when both
    are installed."""
    import importlib

    timeouts: list[type[Exception]] = []
    transport: list[type[Exception]] = []
    for name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        timeouts.append(module.TimeoutException)
        transport.append(module.TransportError)
    return tuple(timeouts), tuple(transport)
