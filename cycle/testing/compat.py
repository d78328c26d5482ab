"""The loopback server as real OpenAI-compatible servers are (``LoopbackServer(compat=...)``,
``python -m cycle.testing.server --compat MODE``).

- ``llamacpp``: llama-cpp-python's server, as 0.3.36 answered here (SmolLM2-135M):
  ``response_format`` ``json_schema`` is a 500 whose body is its validation error (it knows
  ``text`` and ``json_object``, which may carry a ``schema``), ``max_completion_tokens`` is
  ignored (only ``max_tokens`` caps the answer), an assistant message whose content is
  null a 500 (its chat template), and ``tools`` are ignored unless ``tool_choice`` is set.
- ``text-only``: a server that ignores ``response_format`` altogether and answers text (a
  schema written in the prompt is followed, as an instruction-following model does).
- ``no-tool-role``: a server whose chat template refuses the ``tool`` role (400).

``refusal`` is the error a request gets, if any; ``understood`` is the body as the server
reads it (what it ignores removed).
"""

from __future__ import annotations

import json
from typing import Any

MODES = ("llamacpp", "text-only", "no-tool-role")


def _invalid(loc: list[str], kind: str, msg: str, value: Any) -> tuple[int, bytes]:
    """llama-cpp-python's answer to a request its schema refuses: a 500 carrying the
    validation error in OpenAI's error shape."""
    error = {"type": kind, "loc": ("body", *loc), "msg": msg, "input": value}
    return 500, json.dumps({"error": {
        "message": f"1 validation error:\n  {error}\n", "type": "internal_server_error",
        "param": None, "code": None}}).encode()


def refusal(mode: str | None, body: dict[str, Any]) -> tuple[int, bytes] | None:
    """The status and body a ``mode`` server answers ``body`` with, if it refuses it."""
    if mode == "llamacpp":
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") not in (None, "text", "json_object"):
            return _invalid(["response_format", "type"], "literal_error",
                            "Input should be 'text' or 'json_object'", fmt.get("type"))
        for m in body.get("messages") or ():
            if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None:
                return 500, b"Internal Server Error"
    if mode == "no-tool-role":
        for m in body.get("messages") or ():
            if isinstance(m, dict) and m.get("role") == "tool":
                return 400, json.dumps({"error": {
                    "message": "Conversation roles must alternate user/assistant/user/"
                    "assistant/...: the role 'tool' is not supported by this template",
                    "type": "invalid_request_error", "param": "messages", "code": None,
                }}).encode()
    return None


def understood(mode: str | None, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as a ``mode`` server reads it: what it ignores is gone."""
    if mode == "llamacpp":
        ignored = {"max_completion_tokens"} | ({"tools"} if "tool_choice" not in body else set())
        return {k: v for k, v in body.items() if k not in ignored}
    if mode == "text-only" and "response_format" in body:
        return {k: v for k, v in body.items() if k != "response_format"}
    return body
