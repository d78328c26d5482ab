"""The offline world behind the loopback server: ``LoopbackServer(responder=offline_world)``
answers each chat completion as ``offline:default`` would, so that a cycle run through the
real openai SDK (``openai:...`` with the server's base URL) gets the offline model's answers,
whatever form the request took (a ``json_schema``, a ``json_object``, a schema in the
prompt; tool results as ``tool`` messages or in cycle's text form, cycle.llm.compat).
"""

from __future__ import annotations

import json
import re
from typing import Any

from cycle.aio import at_once
from cycle.llm.base import GenerateConfig
from cycle.records import Message, ToolCall, ToolDef
from cycle.testing.offline.provider import OfflineAPI
from cycle.testing.server import ChatRequest, Reply

_CALL = re.compile(r"^\[tool call ([^\]]*)\] ([\w.-]+)\((.*)\)$")
_RESULT = re.compile(r"^\[tool result ([^\]]*)\] ([\w.-]+): (.*)$", re.DOTALL)
_API = OfflineAPI("default")


def _messages(body: dict[str, Any]) -> list[Message]:
    """The request's conversation as cycle's messages; cycle's text form of tool calls and
    results read back, as a model reading it would."""
    out: list[Message] = []
    names: dict[str, str] = {}  # a tool call's id -> its tool
    for m in body.get("messages") or ():
        role, content = m.get("role"), m.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if role == "tool":
            call_id = m.get("tool_call_id") or ""
            out.append(Message.tool(content, tool_call_id=call_id, name=names.get(call_id, "")))
        elif role == "assistant":
            calls = [ToolCall(id=c.get("id") or "", name=c["function"]["name"],
                              arguments=json.loads(c["function"].get("arguments") or "{}"))
                     for c in m.get("tool_calls") or ()]
            said = []
            for line in content.splitlines():
                found = _CALL.match(line)
                if found:
                    calls.append(ToolCall(id=found[1], name=found[2],
                                          arguments=json.loads(found[3] or "{}")))
                else:
                    said.append(line)
            names.update({c.id: c.name for c in calls})
            out.append(Message.assistant("\n".join(said), tool_calls=tuple(calls)))
        elif role == "user" and (found := _RESULT.match(content)):
            out.append(Message.tool(found[3], tool_call_id=found[1], name=found[2]))
        elif role in ("system", "user"):
            out.append(Message(role=role, content=content))
    return out


def offline_world(request: ChatRequest) -> Reply | None:
    """The offline model's answer to an OpenAI chat completion (None: not one)."""
    body = request.body
    if request.api != "openai" or not isinstance(body, dict):
        return None
    tools = [ToolDef(name=t["function"]["name"], description=t["function"].get("description", ""),
                     parameters=t["function"].get("parameters") or {})
             for t in body.get("tools") or () if "function" in t]
    schema = request.schema
    config = GenerateConfig(
        response_schema=schema, response_schema_name=request.schema_name or "output",
        max_tokens=body.get("max_tokens") or body.get("max_completion_tokens"))
    # the offline model awaits nothing: run it here, in the server's thread
    out = at_once(_API.generate(_messages(body), tools, config), "the offline model")
    return Reply(text=out.text, tool_calls=tuple((c.name, c.arguments) for c in out.tool_calls),
                 input_tokens=out.usage.input_tokens, output_tokens=out.usage.output_tokens)
