"""What an OpenAI-compatible server accepts, learned from its answers.

Servers that speak OpenAI's chat completions differ from OpenAI where cycle leans on it:

- **structured output**: llama.cpp's server answers ``response_format: json_schema`` with
  422 (it knows ``json_object``, which may carry a ``schema``); older Ollama, LM Studio and
  some gateways know only ``json_object``, or ignore the format and answer text. cycle
  tries, in order: ``json_schema`` (strict when the schema allows), ``json_object`` with
  the schema, ``json_object`` with the schema in the prompt, and plain text with the
  schema in the prompt (``PROMPT_MODES``). A 400 or 422 to a request carrying a format
  steps down; an answer that is not JSON at all (the format ignored) goes to the prompt.
  Each answer is still validated against the schema and repaired once, as for OpenAI.
- **the output cap**: OpenAI's reasoning models refuse ``max_tokens`` and want
  ``max_completion_tokens``; many servers know only ``max_tokens``. A 4xx naming the
  field cycle sent is tried once with the other.
- **tool results**: a server whose chat template refuses the ``tool`` role gets the
  conversation's tool calls and results as text (``tool_text``, below).

What one server and model accept is learned once (the first call that needs it pays at
most one refused or wasted call a step; the calls in flight with it wait before they take
a connection or reserve their budget: ``OpenAIAPI.learning``), kept for the process and
in the store (``ServerForms``: cycle.store.servers, by endpoint, no credential), so that
a later run asks right away, the response cache on or off; a server that refuses the kept
form is learned again and the stored form replaced. (Earlier releases kept it in the
response cache: a row found there moves to the store when first read.) The setting
``providers.openai.structured`` (``auto``, the default, or a fixed mode) skips the
learning. OpenAI's own API is never stepped down.
"""

from __future__ import annotations

import asyncio
import json
import re
import weakref
from typing import Any, Protocol

import msgspec
from msgspec import Struct

from cycle.records import Message

#: the user's choices for ``providers.NAME.structured``
STRUCTURED_SETTINGS = ("auto", "json_schema", "json_object", "prompt")
#: the forms tried, best first: json_schema; json_object carrying the schema (llama.cpp);
#: json_object with the schema in the prompt; the schema in the prompt alone
LADDER = ("json_schema", "json_object_schema", "json_object", "prompt")
#: the forms whose schema is written into the prompt
PROMPT_MODES = ("json_object", "prompt")

#: the instruction a prompt-mode call carries (the loopback server reads it back)
SCHEMA_INSTRUCTION = ("Answer with one JSON object, and nothing else, that follows the JSON "
                      "schema {name}:\n```json\n{schema}\n```")
_SCHEMA_HEAD = re.compile(r"follows the JSON schema (\S+):\n```json\n")


class Accepted(Struct):
    """What one server and model were found to accept."""

    #: the structured-output form that worked (None: not learned yet)
    structured: str | None = None
    #: the output cap's field that worked (None: the default for the server)
    max_tokens_field: str | None = None
    #: whether the server takes the ``tool`` role (None: not known yet)
    tool_role: bool | None = None
    #: False once the server refused ``tool_choice`` (vLLM without auto tool choice)
    tool_choice: bool = True
    #: whether the server keeps to the format is known: a JSON answer came back in it, or
    #: a text answer was asked again with the schema in the prompt (once: after that, a
    #: text answer is the model's fault, repaired as usual, and no answer is parsed twice)
    probed: bool = False


class ServerForms(Protocol):
    """Where what servers accept is kept between processes (the store's ``servers``)."""

    def server(self, endpoint: str) -> str | None:
        """What the server at ``endpoint`` (``ModelAPI.server_key``) was found to accept,
        as ``kept`` gave it, or None."""

    def remember_server(self, endpoint: str, accepted: str) -> None:
        """Keep (or replace) what the server at ``endpoint`` accepts."""


#: (base URL, model) -> what it accepts, for this process
_LEARNED: dict[tuple[str, str], Accepted] = {}


def accepted(base_url: str | None, model: str) -> Accepted:
    key = (base_url or "", model)
    learned = _LEARNED.get(key)
    if learned is None:
        learned = _LEARNED[key] = Accepted()
    return learned


#: per event loop and server: the lock the first structured call learns under, so that
#: the calls in flight with it wait and pay no refused call of their own
_LEARNING: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], asyncio.Lock]] = (
    weakref.WeakKeyDictionary())


def learning(base_url: str | None, model: str) -> asyncio.Lock:
    locks = _LEARNING.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault((base_url or "", model), asyncio.Lock())


def learn(base_url: str | None, model: str, worked: Accepted, *, structured: bool) -> None:
    """Keep what a call that worked sent (its structured form only when it was tried)."""
    learned = accepted(base_url, model)
    if structured:
        learned.structured = worked.structured
        learned.probed = learned.probed or worked.probed
    learned.max_tokens_field = worked.max_tokens_field
    learned.tool_role = worked.tool_role
    learned.tool_choice = worked.tool_choice


def kept(base_url: str | None, model: str) -> str | None:
    """What was learned of a server, as JSON to keep (None: nothing yet)."""
    learned = _LEARNED.get((base_url or "", model))
    if learned is None or learned == Accepted():
        return None
    return msgspec.json.encode(learned).decode()


def restore(base_url: str | None, model: str, kept_json: str) -> None:
    """Take back what an earlier process learned (what this one learned wins)."""
    if (base_url or "", model) in _LEARNED:
        return
    try:
        _LEARNED[(base_url or "", model)] = msgspec.json.decode(kept_json, type=Accepted)
    except msgspec.ValidationError:
        return  # kept by another release: learned again


def forget() -> None:
    """Forget what was learned (a test starting over)."""
    _LEARNED.clear()


def next_mode(mode: str) -> str | None:
    """The form to try after ``mode`` was refused (None: none left)."""
    i = LADDER.index(mode)
    return LADDER[i + 1] if i + 1 < len(LADDER) else None


def with_schema_in_prompt(chat: list[dict[str, Any]], schema: dict[str, Any],
                          name: str) -> list[dict[str, Any]]:
    """The messages (chat form) with the schema instruction added to the first system
    message, or a system message first (a chat template may refuse a system message
    anywhere but first)."""
    text = SCHEMA_INSTRUCTION.format(name=name, schema=json.dumps(schema, ensure_ascii=False))
    if chat and chat[0].get("role") == "system":
        first = {**chat[0], "content": f"{chat[0].get('content') or ''}\n\n{text}".lstrip()}
        return [first, *chat[1:]]
    return [{"role": "system", "content": text}, *chat]


def schema_in_prompt(text: str) -> tuple[str, dict[str, Any]] | None:
    """The schema's name and the schema a prompt-mode instruction in ``text`` carries."""
    head = _SCHEMA_HEAD.search(text)
    if head is None:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text, head.end())
    except ValueError:
        return None
    return (head.group(1), value) if isinstance(value, dict) else None


def response_format(mode: str, schema: dict[str, Any], strict: dict[str, Any] | None,
                    name: str) -> dict[str, Any] | None:
    """The ``response_format`` of ``mode`` (None: the prompt alone asks for JSON)."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {
            "name": name, "schema": strict if strict is not None else schema,
            "strict": strict is not None}}
    if mode == "json_object_schema":  # the name rides as the schema's title (an annotation)
        return {"type": "json_object", "schema": {**schema, "title": name}}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def tool_text(messages: list[Message]) -> list[dict[str, Any]]:
    """The conversation in chat form for a server that refuses the ``tool`` role: an
    assistant's tool calls become its text (``[tool call ID] name({...})``), each tool
    result a user message (``[tool result ID] name: ...``)."""
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            name = names.get(m.tool_call_id or "", "tool")
            out.append({"role": "user",
                        "content": f"[tool result {m.tool_call_id}] {name}: {m.content}"})
        elif m.role == "assistant" and m.tool_calls:
            calls = "\n".join(f"[tool call {c.id}] {c.name}({json.dumps(c.arguments)})"
                              for c in m.tool_calls)
            out.append({"role": "assistant",
                        "content": f"{m.content}\n{calls}".strip()})
        else:
            out.append(m.as_chat())
    return out


def refusal(status: int | None, error_text: str) -> bool:
    """Whether an error status is the server refusing the request's form (what cycle may
    change and send again), not a failure to retry: a 400 or 422, or a 500 that names
    ``response_format`` (llama-cpp-python 0.3 answers its own validation error so)."""
    if status in (400, 422):
        return True
    return status == 500 and "response_format" in error_text


def names_tool_choice(error_text: str) -> bool:
    """Whether a 4xx is about ``tool_choice`` (vLLM: '"auto" tool choice requires
    --enable-auto-tool-choice ...')."""
    low = error_text.lower()
    return any(w in low for w in ("tool_choice", "tool choice", "tool-choice"))


def refuses(error_text: str, *words: str) -> bool:
    """Whether a 4xx's text names every one of ``words`` (case-insensitive)."""
    low = error_text.lower()
    return all(w.lower() in low for w in words)


def is_json_object(text: str) -> bool:
    """Whether ``text`` holds a JSON object (in a code fence too): an answer that does
    not was written by a server that ignored the format."""
    from cycle.llm.structured import parse_json

    try:
        return isinstance(parse_json(text.strip()), dict)
    except ValueError:
        return False
