"""Messages, tool calls and token usage: what crosses the model boundary, provider-neutral."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """A tool call the model asked for."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(BaseModel):
    """One chat message in provider-neutral form."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    #: for role="tool": which call this answers, and the tool's name
    tool_call_id: str | None = None
    name: str | None = None
    #: a turn of one of the prompt's few-shot examples (cycle.prompts.examples). Never
    #: sent (the provider sees an ordinary turn), so not part of a call's cache key
    #: either; the offline model reads it to tell demonstrations from the conversation
    example: bool = Field(False, exclude=True)

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str, tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return cls(role="assistant", content=content, tool_calls=tool_calls)

    @classmethod
    def tool(cls, content: str, *, tool_call_id: str, name: str) -> Message:
        return cls(role="tool", content=content, tool_call_id=tool_call_id, name=name)

    def as_chat(self) -> dict[str, Any]:
        """The message in OpenAI's chat shape (what OpenAI-compatible servers, and an HTTP
        agent speaking cycle's tool protocol, read)."""
        if self.role == "tool":
            return {"role": "tool", "tool_call_id": self.tool_call_id or "",
                    "content": self.content}
        if self.role == "assistant" and self.tool_calls:
            return {"role": "assistant", "content": self.content or None,
                    "tool_calls": [{"id": c.id, "type": "function",
                                    "function": {"name": c.name,
                                                 "arguments": json.dumps(c.arguments)}}
                                   for c in self.tool_calls]}
        return {"role": self.role, "content": self.content}


class ToolDef(BaseModel):
    """A tool the model may call: a name, a description and a JSON schema."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    #: the real function (package.module:name), run only when a mock says passthrough;
    #: never sent to a model
    function: str | None = None

    def as_chat(self) -> dict[str, Any]:
        """The tool in OpenAI's chat shape."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


class Usage(BaseModel):
    """Tokens of one call, as the provider reported them."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    #: the part of input_tokens served from the provider's prompt cache
    cached_input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )
