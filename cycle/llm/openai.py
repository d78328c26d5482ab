"""The OpenAI provider: chat completions through the official ``openai`` SDK.

Any OpenAI-compatible server (Ollama, vLLM, LM Studio, OpenRouter, a
gateway) works through this provider with a base URL
(``OPENAI_BASE_URL`` or ``base_url`` in the provider options). Such a
server may need no key: a placeholder is sent then.

The SDK's own retries are off (``max_retries=0``): ``Model`` retries, once
for every provider. SDK errors become ``cycle.errors`` here.

Calls go through the SDK's client (its auth, base URL, headers, timeouts,
connection pool and error types) with ``client.post("/chat/completions")``,
the SDK's way to send a request it need not type: the body is built here
ready to send, and the JSON answer is read here. ``chat.completions.create``
would walk the body against its TypedDicts and build pydantic models of the
answer, about a third of the client's CPU per call (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from cycle import heap
from cycle.errors import (
    MalformedResponseError,
    MissingCredentialsError,
    ProviderConnectionError,
    ProviderError,
)
from cycle.llm import compat, tls
from cycle.llm.base import (
    CUT_SLACK,
    PLACEHOLDER_KEY,
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
from cycle.llm.structured import strict_schema
from cycle.records import Message, ToolCall, ToolDef, Usage

if TYPE_CHECKING:
    import openai

KEY_VARIABLE = "OPENAI_API_KEY"
BASE_URL_VARIABLE = "OPENAI_BASE_URL"
#: sent to OpenAI-compatible servers that need no key (the SDK insists on one)

# reasoning models take max_completion_tokens and reject temperature/top_p
_REASONING = re.compile(r"^(o\d|gpt-5(?!-chat))")
_SCHEMA_NAME = re.compile(r"[^a-zA-Z0-9_-]")


#: the AsyncOpenAI clients, one per event loop and endpoint settings
_clients: SharedClients[openai.AsyncOpenAI] = SharedClients(lambda client: client.close())


def _is_official(base_url: str | None) -> bool:
    if not base_url:
        return True
    host = urlparse(base_url).hostname or ""
    return host == "api.openai.com" or host.endswith(".openai.com")


class OpenAIAPI(ModelAPI):
    """``openai:<model>``: OpenAI or any OpenAI-compatible chat completions server."""

    provider = "openai"

    def __init__(self, model_name: str, options: ProviderOptions | None = None) -> None:
        super().__init__(model_name, options)
        opts = self.options
        self.base_url: str | None = opts.base_url or os.environ.get(BASE_URL_VARIABLE) or None
        self.official = _is_official(self.base_url)
        key = opts.api_key or os.environ.get(KEY_VARIABLE)
        if not key:
            if self.official:
                raise MissingCredentialsError(
                    f"no API key for openai:{model_name}: set {KEY_VARIABLE}",
                    hint=f"export {KEY_VARIABLE}=... (or put it in .env), or set "
                    f"{BASE_URL_VARIABLE} to an OpenAI-compatible server that needs no key.",
                )
            key = PLACEHOLDER_KEY
        # kept private and out of every message; see redact()
        self._api_key = key
        #: what the response cache keeps this server's forms under: the URL as shown (a
        #: key or password in it never reaches the cache file); asked after every call
        self._server_key = None if self.official else f"{safe_url(self.base_url)}|{model_name}"
        # models with equal keys share a client (see _client); the key stays in memory only
        headers = opts.extra.get("headers") or {}
        self._client_key: tuple[Any, ...] = (
            key, self.base_url, opts.extra.get("organization"), opts.timeout, opts.max_response_mb,
            tuple(sorted((str(k), str(v)) for k, v in dict(headers).items())),
        )

    def __repr__(self) -> str:
        return f"OpenAIAPI({self.model_name!r}, base_url={safe_url(self.base_url)!r})"

    # -- client ---------------------------------------------------------------

    def _client(self) -> openai.AsyncOpenAI:
        return _clients.get(self, self._client_key, self._new_client)

    def _new_client(self) -> openai.AsyncOpenAI:
        tls.prepare()  # the certificates are read in a thread while the SDK is imported
        openai = heap.import_module("openai")
        from cycle.llm.sse import events_or_body

        extra = self.options.extra
        client = openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            organization=extra.get("organization"),
            timeout=self.options.timeout,
            max_retries=0,
            default_headers=extra.get("headers"),
            # every body read under a cap, after decompression (cycle.llm.bodies)
            http_client=cap_client(openai.DefaultAsyncHttpxClient(
                timeout=self.options.timeout, verify=tls.context()),
                limit_mb=self.options.max_response_mb),
        )
        if events_or_body is not None and hasattr(client, "_make_sse_decoder"):
            # a stream's decoder that keeps a JSON body labelled as events (cycle.llm.sse);
            # an SDK whose insides moved keeps its own, and such a body is "no chunk" again
            client._make_sse_decoder = events_or_body  # type: ignore[method-assign]
        return client

    async def aclose(self) -> None:
        await _clients.release(self)

    # -- the call -------------------------------------------------------------

    def build_request(
        self, messages: list[Message], tools: list[ToolDef], config: GenerateConfig,
        *, form: compat.Accepted | None = None,
    ) -> dict[str, Any]:
        """The JSON body of this call to ``/chat/completions``; ``form``: what to send
        (cycle.llm.compat; default: what this server is known to accept)."""
        reasoning = self.official and bool(_REASONING.match(self.model_name))
        form = form or self._form()
        chat = ([m.as_chat() for m in messages] if form.tool_role is not False
                else compat.tool_text(messages))
        if not self.official:
            # llama.cpp's server answers 500 to an assistant message whose content is null
            chat = [{**m, "content": ""} if m.get("content") is None else m for m in chat]
        request: dict[str, Any] = {"model": self.model_name, "messages": chat}
        if tools:
            request["tools"] = [t.as_chat() for t in tools]
            if not self.official and form.tool_choice:
                # some servers ignore tools unless tool_choice is set (llama.cpp's); one that
                # refuses it (vLLM without auto tool choice) is asked again without it
                request["tool_choice"] = "auto"
        if config.temperature is not None and not reasoning:
            request["temperature"] = config.temperature
        if config.top_p is not None and not reasoning:
            request["top_p"] = config.top_p
        if config.seed is not None:
            request["seed"] = config.seed
        if config.stop:
            request["stop"] = list(config.stop)
        if config.max_tokens is not None:
            # OpenAI deprecated max_tokens (reasoning models reject it); compatible
            # servers often know only max_tokens
            request[str(form.max_tokens_field)] = config.max_tokens
        if config.response_schema is not None:
            schema, mode = config.response_schema, str(form.structured)
            shape = compat.response_format(
                mode, schema, strict_schema(schema) if mode == "json_schema" else None,
                _SCHEMA_NAME.sub("_", config.response_schema_name)[:64] or "output")
            if shape is not None:
                request["response_format"] = shape
            if mode in compat.PROMPT_MODES:
                request["messages"] = compat.with_schema_in_prompt(
                    request["messages"], schema, config.response_schema_name or "output")
        return request

    def _form(self) -> compat.Accepted:
        """What this call sends: the settings, else what the server was found to accept,
        else OpenAI's own forms (OpenAI deprecated max_tokens, and its reasoning models
        refuse it; compatible servers often know only max_tokens)."""
        learned = compat.accepted(self.base_url, self.model_name)
        setting = self._structured_setting()
        return compat.Accepted(
            structured=setting if setting != "auto" else (
                "json_schema" if self.official else learned.structured or "json_schema"),
            max_tokens_field=self.options.extra.get("max_tokens_field") or learned.max_tokens_field
            or ("max_completion_tokens" if self.official else "max_tokens"),
            tool_role=learned.tool_role, probed=learned.probed, tool_choice=learned.tool_choice)

    def paid_calls(self, config: GenerateConfig) -> int:
        # a text answer to a format is asked again with the schema in the prompt, once
        probing = (not self.official and config.response_schema is not None
                   and self._structured_setting() == "auto"
                   and not compat.accepted(self.base_url, self.model_name).probed)
        return 2 if probing else 1

    def server_key(self) -> str | None:
        return self._server_key

    def learned(self) -> str | None:
        return None if self.official else compat.kept(self.base_url, self.model_name)

    def relearn(self, accepted: str) -> None:
        if not self.official:
            compat.restore(self.base_url, self.model_name, accepted)

    def _structured_setting(self) -> str:
        return str(self.options.extra.get("structured") or "auto")

    def _unknown(self, messages: list[Message], config: GenerateConfig) -> bool:
        """Whether this call needs something not yet learned of the server."""
        learned = compat.accepted(self.base_url, self.model_name)
        return ((config.response_schema is not None and learned.structured is None
                 and self._structured_setting() == "auto")
                or (learned.tool_role is None and any(m.role == "tool" for m in messages)))

    @contextlib.asynccontextmanager
    async def learning(self, messages: list[Message], tools: list[ToolDef],
                       config: GenerateConfig) -> AsyncIterator[None]:
        # the first calls that need something learned go one at a time: the others wait,
        # then send the form that worked (one refused call per server, not one per call in
        # flight). They wait here, before the call's connection, budget and timeout, so
        # that a waiting call holds no connection another case could use, reserves for
        # the form learned, and is not timed out by the call it waits for.
        if self.official or not self._unknown(messages, config):
            yield
            return
        async with compat.learning(self.base_url, self.model_name):
            if self._unknown(messages, config):
                yield  # this call learns, holding the lock
                return
        yield  # learned while this call waited

    async def generate(
        self, messages: list[Message], tools: list[ToolDef], config: GenerateConfig
    ) -> ModelOutput:
        """One call; to a server that is not OpenAI's own, adapted to what it accepts
        (cycle.llm.compat), learning it from a refusal (or from a structured answer that
        is not JSON) once (the calls that need it too wait in ``learning``). The usage of a
        wasted answer is added to the call's."""
        if self.official:  # OpenAI's own API takes OpenAI's forms: nothing to learn
            return await self._send(self.build_request(messages, tools, config), config)
        steps = self._structured_setting() == "auto" and config.response_schema is not None
        return await self._adapted(messages, tools, config, steps)

    async def _adapted(self, messages: list[Message], tools: list[ToolDef],
                       config: GenerateConfig, steps: bool) -> ModelOutput:
        form = self._form()
        field_set = bool(self.options.extra.get("max_tokens_field"))
        wasted = Usage()
        estimated = False
        swapped = False  # the output cap's field, tried the other way once
        while True:
            request = self.build_request(messages, tools, config, form=form)
            try:
                output = await self._send(request, config)
            except ProviderError as e:
                said = f"{e.message} {e.body or ''}"
                if not compat.refusal(e.status, said):
                    raise
                field = str(form.max_tokens_field)
                if (field in request and not field_set and not swapped
                        and compat.refuses(said, field)):
                    swapped = True
                    form.max_tokens_field = ("max_tokens" if field == "max_completion_tokens"
                                             else "max_completion_tokens")
                    continue
                if "tool_choice" in request and compat.names_tool_choice(said):
                    form.tool_choice = False
                    continue
                if (form.tool_role is None and compat.refuses(said, "tool")
                        and any(m.role == "tool" for m in messages)):
                    form.tool_role = False
                    continue
                nxt = compat.next_mode(str(form.structured))
                if steps and "response_format" in request and nxt is not None:
                    form.structured = nxt
                    continue
                e.retryable = False  # the server refuses this form: asking again cannot help
                raise
            if (steps and not form.probed and form.structured != "prompt"
                    and not output.tool_calls and not output.withheld):
                # (a withheld answer says nothing of the format: it is the call's error)
                if compat.is_json_object(output.text):
                    form.probed = True  # the server keeps to this form: not checked again
                else:
                    # the format was ignored: asked again with the schema in the prompt
                    # (the answer is paid); kept only if that answer is JSON (else the
                    # model, not the server, is at fault: the Model's repair follows, in
                    # this form)
                    asked = form.structured
                    estimated = estimated or output.usage_estimated
                    wasted = wasted + (output.usage if not output.usage_estimated else Usage(
                        input_tokens=len(json.dumps(request["messages"]).encode()),
                        output_tokens=len(output.text.encode())))  # the byte bound, as Model's
                    form.structured, form.probed = "prompt", True
                    request = self.build_request(messages, tools, config, form=form)
                    output = await self._send(request, config)
                    if not compat.is_json_object(output.text):
                        form.structured = asked
            break
        if form.tool_role is None and any(m.role == "tool" for m in messages):
            form.tool_role = True  # it took them
        compat.learn(self.base_url, self.model_name, form, structured=steps)
        if wasted.total_tokens:
            output = output.model_copy(update={"usage": output.usage + wasted,
                                               "usage_estimated": output.usage_estimated
                                               or estimated})
        return output

    async def _send(self, request: dict[str, Any], config: GenerateConfig) -> ModelOutput:
        try:
            if self.guard_max_tokens and not self.official and config.max_tokens:
                return await self._streamed(request, config.max_tokens)
            completion = await self._calling(
                self._client().post("/chat/completions", cast_to=object, body=request),
                answer_tokens=config.max_tokens)
            return self._output(completion, request)
        except MalformedResponseError as e:
            # a 200 that could not be used (not JSON, not a chat completion, a count that
            # lies): it came back, and the server may bill it, so it is charged as the
            # most it may be (the byte bound, estimated) before it is raised
            if e.paid is None:
                e.paid = unusable_answer(config.max_tokens)
            raise

    async def _streamed(self, request: dict[str, Any], max_tokens: int) -> ModelOutput:
        """The call streamed, under a budget, from a server that is not OpenAI's own: the
        answer is read as it comes and the stream is closed once it runs past
        ``max_tokens`` (a chunk a token, as servers stream; at most ``_BYTES_A_TOKEN``
        bytes a token for a server that sends many at once), so that a server ignoring
        ``max_tokens`` stops generating, and billing, about where the call's reservation
        ends. A cut answer is priced at that reservation."""
        import openai

        body = {**request, "stream": True, "stream_options": {"include_usage": True}}
        stream = await self._calling(self._client().post(
            "/chat/completions", cast_to=object, body=body, stream=True,
            stream_cls=openai.AsyncStream[object]))
        kind = stream.response.headers.get("content-type") or "no content type"
        chunks_in: Any = None
        if "event-stream" not in kind:
            # a body where the events should be (a gateway's ``{"error": ...}``, a server
            # that ignores ``stream``), labelled JSON or text: read once, as the call's
            # answer; the SDK's stream would skip it, as it skips all that is not an event
            data = (await self._body_instead_of_events(stream, max_tokens)).lstrip()
            if not data.startswith((b"data:", b"event:", b":")):
                return self._whole_body(data, kind, body, max_tokens)
            chunks_in = _events_in(data, self)  # events labelled otherwise: read as events
        else:  # a JSON body labelled as events is read whole by the decoder (cycle.llm.sse)
            decoder = getattr(stream, "_decoder", None)  # ours (cycle.llm.sse), or the SDK's
            if decoder is not None:
                decoder.limit = _body_limit(max_tokens)
        parts: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage: Any = None
        model = self.model_name
        tokens = size = chunks = thinking = 0
        cut = False
        try:
            async for chunk in chunks_in or _chunks(stream, self):
                chunks += 1
                usage = chunk.get("usage") or usage
                model = chunk.get("model") or model
                for choice in (chunk.get("choices") or [])[:1]:
                    delta = choice.get("delta") if isinstance(choice, dict) else None
                    if not isinstance(delta, dict):
                        continue
                    piece = _text(delta.get("content"))
                    thought = delta.get("reasoning_content") or delta.get("reasoning")
                    if isinstance(thought, str) and thought:
                        # vLLM's, DeepSeek's, OpenRouter's reasoning: generated and billed
                        # as output, so it counts toward the cut (never the answer's text)
                        spent = len(thought.encode())
                        thinking += spent
                        tokens += 1
                        size += spent
                    for call in delta.get("tool_calls") or ():
                        entry = calls.setdefault(int(call.get("index") or 0),
                                                 {"id": "", "name": "", "arguments": ""})
                        function = call.get("function") or {}
                        entry["id"] = call.get("id") or entry["id"]
                        entry["name"] += function.get("name") or ""
                        said = function.get("arguments") or ""
                        if isinstance(said, dict) or isinstance(entry["arguments"], dict):
                            # an object already (Ollama's): kept whole, not concatenated
                            entry["arguments"] = said or entry["arguments"]
                            said = json.dumps(said)
                        else:
                            entry["arguments"] += str(said)
                        piece += str(said)
                    if piece:
                        parts.append(_text(delta.get("content")))
                        tokens += 1
                        size += len(piece.encode())
                    finish = choice.get("finish_reason") or finish
                if tokens > max_tokens or size > max_tokens * _BYTES_A_TOKEN:
                    cut = True
                    break
        except ProviderError as e:
            if not chunks:
                raise
            # an error event after the answer began (OpenRouter's upstream failing midway):
            # what was generated may be billed, so it is charged as the most it may be
            error = ProviderConnectionError(
                f"openai:{self.model_name}'s stream ended with the server's error after "
                f"{chunks} chunks: {e.message}")
            error.retryable = e.retryable
            error.paid = unusable_answer(max_tokens)
            raise error from e
        finally:
            await stream.close()  # a cut stream: the server sees the connection close
        if not chunks:
            # a 200 whose body held no event (a JSON body labelled as events, an HTML page,
            # nothing): the SDK skips what is not an event, which would make it an empty
            # answer, scored as one. Looked at only here: a stream pays nothing for it
            held = getattr(getattr(stream, "_decoder", None), "body", None)
            return self._whole_body((held or b"").lstrip(), kind, body, max_tokens)
        # ended without a finish_reason or the usage that closes a stream: dropped
        dropped = not cut and finish is None and usage is None
        completion: dict[str, Any] = {
            "model": model,
            "choices": [{"finish_reason": "length" if cut else finish, "message": {
                "content": "".join(parts), **({"reasoning_bytes": thinking} if thinking else {}),
                "tool_calls": [{"id": c["id"], "type": "function", "function": {
                    "name": c["name"], "arguments": c["arguments"] or "{}"}}
                    for _, c in sorted(calls.items())] if not cut else []}}],
        }
        if cut or dropped:  # what it may have billed: the reservation, or what came
            completion["usage"] = {"prompt_tokens": None, "completion_tokens": None}
        elif usage is not None:
            completion["usage"] = usage
        output = self._output(completion, body)
        if dropped:
            # every server ends a stream with a finish_reason: one without was cut (the
            # connection dropped), and its half answer would be scored as a whole one. What
            # came may be billed: Model charges it (priced by its bytes) before a retry
            error = ProviderConnectionError(
                f"openai:{self.model_name}'s stream ended before the answer did (no "
                f"finish_reason after {tokens} chunks of text): the connection was cut")
            error.paid = output
            raise error
        if cut:
            output = output.model_copy(update={"usage": output.usage.model_copy(update={
                "output_tokens": max_tokens + CUT_SLACK}), "usage_estimated": True})
        return output

    async def _body_instead_of_events(self, stream: Any, max_tokens: int) -> bytes:
        """The body of a streamed call not labelled as events, read up to what an answer
        of ``max_tokens`` could be (past it, what came: it is not read further)."""
        from cycle.llm.sse import read_up_to

        try:
            return await read_up_to(stream.response.aiter_bytes(), _body_limit(max_tokens))
        finally:
            await stream.close()

    def _whole_body(self, data: bytes, kind: str, body: dict[str, Any],
                    max_tokens: int) -> ModelOutput:
        """A streamed call's body that held no event, as the call's answer: a whole chat
        completion (charged per its usage), or the server's ``{"error": ...}`` (retried
        by its code, charged nothing); anything else is no answer, charged as the most it
        may be (it came back: the server may bill it)."""
        said: Any = None
        if data.startswith(b"{"):
            with contextlib.suppress(ValueError):
                said = json.loads(data)
        if isinstance(said, dict) and (said.get("error") or "choices" in said):
            return self._output(said, body)
        error = MalformedResponseError(
            f"openai:{self.model_name} answered 200 with no chat completion chunk in its "
            f"body ({redact(kind, *self.secrets)[:100]}): not an OpenAI-compatible stream")
        error.paid = unusable_answer(max_tokens)
        raise error

    async def _calling(self, call: Any, *, answer_tokens: int | None = None) -> Any:
        """Await an SDK call, its errors as ``cycle.errors``; ``answer_tokens``: the
        max_tokens a chat completion was asked with (what an answer cut on its way is
        charged as output)."""
        import openai

        try:
            return await call
        except openai.APIStatusError as e:
            # the SDK's message repeats the whole body; the API's own message is enough
            detail = e.body.get("message") if isinstance(e.body, dict) else None
            detail = detail if isinstance(detail, str) else e.message
            raise status_error(
                self.provider, self.model_name, e.status_code,
                body=e.response.text, headers=dict(e.response.headers), detail=detail,
                secrets=self.secrets, key_variable=KEY_VARIABLE,
            ) from e
        except openai.APITimeoutError as e:
            raise ProviderConnectionError(
                f"openai:{self.model_name} timed out (after {self.options.timeout} s)"
            ) from e
        except openai.APIConnectionError as e:
            where = safe_url(self.base_url) or "api.openai.com"
            cause = redact(str(e.__cause__ or e), *self.secrets)
            if answered_when_cut(e.__cause__ or e):
                # generated, and billed, but cut on its way: charged as the most it may
                # have cost (estimated) before it is asked again
                cut = ProviderConnectionError(
                    f"openai:{self.model_name} at {where}: the answer was cut on its way "
                    f"({cause})")
                cut.paid = unusable_answer(answer_tokens)
                raise cut from e
            raise ProviderConnectionError(
                f"cannot reach openai:{self.model_name} at {where}: {cause}"
            ) from e
        except (openai.APIResponseValidationError, ValueError) as e:
            doc = getattr(e, "doc", None)  # what the server said, when it is not JSON
            said = (f" in {' '.join(redact(doc, *self.secrets).split())[:120]!r}"
                    if isinstance(doc, str) else "")
            raise MalformedResponseError(
                f"openai:{self.model_name} sent a response that is not valid JSON "
                f"chat completion: {redact(str(e), *self.secrets)[:300]}{said}"
            ) from e
        except openai.APIError as e:
            # a stream's event holding an error (OpenRouter's, a gateway's): the SDK raises
            # its bare APIError, which no clause above is
            raise self._error_in_200(e.body if e.body is not None else e.message) from e

    # -- batch jobs (OpenAI Batch: a JSONL file of requests, a job, a file of answers) --------

    async def batch_submit(self, requests: list[BatchRequest]) -> str:
        lines = "".join(json.dumps({
            "custom_id": r.key, "method": "POST", "url": "/v1/chat/completions",
            "body": self.build_request(r.messages, r.tools, r.config)}) + "\n" for r in requests)
        client = self._client()
        with unsupported_when_missing(self.base_url):
            uploaded = await self._calling(client.files.create(
                file=("cycle-batch.jsonl", lines.encode()), purpose="batch"))
            job = await self._calling(client.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                completion_window="24h", metadata={"made_by": "cycle"}))
        return str(job.id)

    async def batch_status(self, job_id: str) -> JobStatus:
        job = await self._calling(self._client().batches.retrieve(job_id))
        counts = job.request_counts
        return JobStatus(
            state=job.status, done=job.status in ("completed", "failed", "expired", "cancelled"),
            succeeded=job.status in ("completed", "expired", "cancelled")
            and bool(job.output_file_id or job.error_file_id),
            total=counts.total if counts else 0, completed=counts.completed if counts else 0,
            failed=counts.failed if counts else 0, job=job)

    async def batch_results(self, status: JobStatus) -> dict[str, ModelOutput | str]:
        client, job = self._client(), status.job
        answers: dict[str, ModelOutput | str] = {}
        for file_id in (job.output_file_id, job.error_file_id):
            if not file_id:
                continue
            content = await self._calling(client.files.content(file_id))
            for line in content.text.splitlines():
                key, answer = self._batch_answer(line)
                if key:
                    answers[key] = answer
        return answers

    def _batch_answer(self, line: str) -> tuple[str, ModelOutput | str]:
        """A line of a job's output or error file: its key, and its answer or why it failed."""
        try:
            item = json.loads(line)
            key = str(item.get("custom_id") or "")
        except (ValueError, AttributeError):
            return "", ""
        response = item.get("response") if isinstance(item.get("response"), dict) else {}
        body = response.get("body")
        error = item.get("error") or (body.get("error") if isinstance(body, dict) else None)
        if error or response.get("status_code") != 200:
            detail = error.get("message") if isinstance(error, dict) else error
            return key, f"HTTP {response.get('status_code')}: {detail or 'no answer'}"
        try:
            return key, self._output(body, None)
        except MalformedResponseError as e:
            return key, e.message

    def _output(self, completion: Any, request: dict[str, Any] | None) -> ModelOutput:
        """A chat completion's JSON (a dict; a server that did not answer JSON gives text)."""
        where = f"openai:{self.model_name}"
        if not isinstance(completion, dict) or "choices" not in completion:
            if isinstance(completion, dict) and completion.get("error"):
                raise self._error_in_200(completion["error"])
            raise MalformedResponseError(
                f"{where} sent a response that is not a chat completion: "
                f"{redact(str(completion), *self.secrets)[:200]!r}"
            )
        choices = completion["choices"]
        if choices == []:
            # no answer, but the server may bill the prompt: charged, then an error of the
            # call (Model reads ``withheld``)
            return ModelOutput(usage=self._usage(completion)[0], usage_estimated=True,
                               raw_request=request, raw_response=completion,
                               model=f"openai:{completion.get('model') or self.model_name}",
                               withheld="the chat completion has no choices")
        if not choices or not isinstance(choices, list):
            raise MalformedResponseError(f"{where} sent a chat completion without choices")
        choice = choices[0] if isinstance(choices[0], dict) else {}
        message = choice.get("message")
        if not isinstance(message, dict):
            raise MalformedResponseError(f"{where} sent a choice without a message")
        calls = []
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):  # a custom (non-function) tool call: not ours
                continue
            name, text = str(function.get("name") or ""), function.get("arguments") or "{}"
            try:
                # an object already (Ollama's, some versions): taken as it is
                arguments = text if isinstance(text, dict) else json.loads(text)
            except (TypeError, json.JSONDecodeError) as e:
                raise MalformedResponseError(
                    f"{where} called tool {name!r} with arguments that are not valid "
                    f"JSON: {redact(str(text), *self.secrets)[:200]!r}"
                ) from e
            if not isinstance(arguments, dict):
                arguments = {"value": arguments}
            calls.append(ToolCall(id=str(call.get("id") or ""), name=name, arguments=arguments))
        if calls and not _distinct_ids(calls):
            calls = _with_distinct_ids(calls)
        text = _text(message.get("content"))
        finish = choice.get("finish_reason")
        if message.get("refusal"):
            text = text or str(message["refusal"])
            finish = "refusal"
        usage, estimated = self._usage(completion)
        if usage.output_tokens == 0 and (text or calls):
            estimated = True  # an answer is never 0 tokens: the count says nothing
        if estimated:
            usage = _with_reasoning(usage, message, request)
        failed = completion.get("error") or choice.get("error")
        if failed or finish == "error":
            # OpenRouter's upstream failing mid-answer: a 200 whose choice ends with
            # finish_reason "error" (its error beside it) and holds what came before; judged,
            # that part was scored as the whole answer. What was generated may be billed:
            # charged as counted, or as the most it may be, then retried as its code says
            said = self._error_in_200(failed or "the answer ended with finish_reason error")
            error = ProviderConnectionError(
                f"{where}'s answer ended with the server's error: {said.message}")
            error.retryable = said.retryable
            asked = request or {}
            error.paid = (unusable_answer(asked.get("max_tokens")
                                          or asked.get("max_completion_tokens"))
                          if estimated else ModelOutput(usage=usage))
            raise error
        withheld = None
        if finish == "content_filter" and not text and not calls:
            # the server's filter kept the answer back: nothing of the model's to judge
            withheld = "finish_reason content_filter, no text"
        return ModelOutput(
            withheld=withheld,
            text=text,
            tool_calls=tuple(calls),
            finish_reason=finish if isinstance(finish, str) else None,
            usage=usage,
            usage_estimated=estimated,
            raw_request=request,
            raw_response=completion,
            model=f"openai:{completion.get('model') or self.model_name}",
        )

    def _error_in_200(self, error: Any) -> ProviderError:
        """The error a server sent as the body of a 200, or as an event of its stream
        (OpenRouter, LiteLLM and other gateways: ``{"error": {"message", "code"}}``): an
        error of the call with the server's message (keys masked), its ``code`` taken as
        the HTTP status it stands for (a 429 or 5xx is retried, as that status would be;
        a code that is no status, a server error), never an empty answer judged as one."""
        said = error if isinstance(error, dict) else {"message": error}
        code = said.get("code")
        status = int(code) if isinstance(code, int | str) and not isinstance(code, bool) \
            and str(code).isdigit() and 400 <= int(code) <= 599 else 502
        message = said.get("message")
        if not isinstance(message, str) or not message.strip():
            message = json.dumps(error, default=str)
        shown = f" (code {code})" if code is not None else ""
        return status_error(
            self.provider, self.model_name, status, body=json.dumps(error, default=str),
            headers=None, detail=" ".join(message.split())[:500], secrets=self.secrets,
            key_variable=KEY_VARIABLE,
            what=f"openai:{self.model_name} answered HTTP 200 with an error{shown}")

    def _usage(self, completion: dict[str, Any]) -> tuple[Usage, bool]:
        """A chat completion's usage, and whether it is estimated (a count absent or not
        usable; a prompt counted 0 tokens, which no prompt is)."""
        where = f"openai:{self.model_name}"
        usage = completion.get("usage") if isinstance(completion.get("usage"), dict) else {}
        details = usage.get("prompt_tokens_details")
        sent = token_count(usage.get("prompt_tokens"), field="prompt_tokens", where=where)
        said = token_count(usage.get("completion_tokens"), field="completion_tokens", where=where)
        cached = token_count(details.get("cached_tokens"), field="cached_tokens", where=where
                             ) if isinstance(details, dict) else None
        return (Usage(input_tokens=sent or 0, cached_input_tokens=cached or 0,
                      output_tokens=said or 0), not sent or said is None)


def _with_reasoning(usage: Usage, message: dict[str, Any],
                    request: dict[str, Any] | None) -> Usage:
    """An estimated usage counting the reasoning that came with the answer (vLLM's and
    DeepSeek's ``reasoning_content``, OpenRouter's ``reasoning``; a streamed answer's
    ``reasoning_bytes``), which the answer's own bytes leave out although it is billed as
    output: its bytes bound its tokens, and the answer's at most the call's ``max_tokens``
    (a server that honours it bills no more)."""
    thought = message.get("reasoning_content") or message.get("reasoning")
    said = (len(thought.encode()) if isinstance(thought, str)
            else message.get("reasoning_bytes") or 0)
    if not said:
        return usage
    said += len(_text(message.get("content")).encode())
    cap = (request or {}).get("max_tokens") or (request or {}).get("max_completion_tokens")
    if isinstance(cap, int):
        said = min(said, cap)
    return usage.model_copy(update={"output_tokens": max(usage.output_tokens, said)})


def _distinct_ids(calls: list[ToolCall]) -> bool:
    ids = {c.id for c in calls}
    return "" not in ids and len(ids) == len(calls)


def _with_distinct_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """Tool calls whose ids are missing or repeated (Ollama sends none on some versions;
    a server numbering each turn from 0 repeats them) given distinct ones: each result is
    sent back under its own call's id, never matched to the wrong call."""
    seen: set[str] = set()
    out = []
    for i, c in enumerate(calls):
        new = c.id
        if not new or new in seen:
            new = f"call_{i}"
            while new in seen or any(o.id == new for o in calls):
                new += "_"
        seen.add(new)
        out.append(c if new == c.id else c.model_copy(update={"id": new}))
    return out


def _text(content: Any) -> str:
    """A message's content: a string, or (some compatible servers) a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return ""


#: the most bytes a token is taken to hold when a server sends many tokens in one chunk
_BYTES_A_TOKEN = 16


def _body_limit(max_tokens: int) -> int:
    """The most of a streamed call's body read whole: what an answer of ``max_tokens``
    could be, with room for its envelope."""
    return 65536 + max_tokens * _BYTES_A_TOKEN


async def _events_in(data: bytes, api: OpenAIAPI) -> Any:
    """The chunks of server-sent events read whole (a stream labelled as JSON), as the
    SDK reads a stream's: ``[DONE]`` ends them, an ``error`` is the call's error."""
    for block in data.decode(errors="replace").replace("\r\n", "\n").split("\n\n"):
        said = "\n".join(line[5:].lstrip() for line in block.split("\n")
                         if line.startswith("data:"))
        if not said:
            continue
        if said.startswith("[DONE]"):
            return
        try:
            chunk = json.loads(said)
        except ValueError as e:
            raise MalformedResponseError(
                f"openai:{api.model_name} sent an event that is not JSON: "
                f"{redact(said, *api.secrets)[:120]!r}") from e
        if isinstance(chunk, dict) and chunk.get("error"):
            raise api._error_in_200(chunk["error"])
        if isinstance(chunk, dict):
            yield chunk


async def _chunks(stream: Any, api: OpenAIAPI) -> Any:
    """The stream's chunks as dicts, its errors as ``cycle.errors``."""
    iterator = stream.__aiter__()
    while True:
        try:
            chunk = await api._calling(iterator.__anext__())
        except StopAsyncIteration:
            return
        if isinstance(chunk, dict):
            yield chunk
