"""OfflineAPI: the ModelAPI of the offline world (no network, deterministic)."""

from __future__ import annotations

import json
from typing import Any

from cycle.errors import BadRequestError
from cycle.llm.base import GenerateConfig, ModelAPI, ModelOutput
from cycle.records import Message, ToolCall, ToolDef, Usage
from cycle.testing.offline import schema as js
from cycle.testing.offline.agent import respond
from cycle.testing.offline.condition import decide
from cycle.testing.offline.improver import improve
from cycle.testing.offline.judge import judge, prefer
from cycle.testing.offline.user import play

_FENCE = "```json"


def last_json_block(text: str) -> dict[str, Any] | None:
    """The last fenced ```json block of ``text`` that holds a JSON object.

    Decoding starts at each fence from the last one back and reads exactly one
    JSON value, so a reply quoted inside the block may itself contain fences.
    """
    decoder = json.JSONDecoder()
    start = text.rfind(_FENCE)
    while start != -1:
        body = text[start + len(_FENCE):].lstrip()
        try:
            value, _ = decoder.raw_decode(body)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.rfind(_FENCE, 0, start)
    return None


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def _truncate(text: str, config: GenerateConfig) -> tuple[str, str]:
    """Apply stop sequences and max_tokens (about 4 characters a token) like a model would."""
    reason = "stop"
    for stop in config.stop or ():
        if stop and stop in text:
            text = text[: text.index(stop)]
    if config.max_tokens is not None and _tokens(text) > config.max_tokens:
        limit = max(0, config.max_tokens * 4)
        cut = text[:limit]
        text = cut[: cut.rfind(" ")] if " " in cut else cut
        reason = "length"
    return text, reason


class OfflineAPI(ModelAPI):
    """``offline:<any name>``: the deterministic offline world; see ``cycle.testing.offline``."""

    provider = "offline"
    offline = True

    async def generate(
        self,
        messages: list[Message],
        tools: list[ToolDef],
        config: GenerateConfig,
    ) -> ModelOutput:
        """Answer as the judge, the improver, a generic structured model, or the agent."""
        role, text, tool_calls, extra = self._answer(messages, tools or [], config)
        finish = "tool_calls" if tool_calls else "stop"
        if role == "agent" and not tool_calls:
            text, finish = _truncate(text, config)
        prompt_chars = sum(len(m.content) for m in messages)
        if tools:
            prompt_chars += sum(len(t.name) + len(t.description) + 40 for t in tools)
        if config.response_schema:
            prompt_chars += len(json.dumps(config.response_schema))
        out_chars = len(text) + sum(len(json.dumps(c.arguments)) + len(c.name) for c in tool_calls)
        return ModelOutput(
            text=text,
            tool_calls=tool_calls,
            finish_reason=finish,
            usage=Usage(input_tokens=max(1, prompt_chars // 4), output_tokens=_tokens(" " * out_chars)),
            raw_request={
                "model": self.name,
                "messages": [{"role": m.role, "chars": len(m.content)} for m in messages],
                "tools": [t.name for t in tools or []],
                "response_schema_name": config.response_schema_name if config.response_schema else None,
            },
            raw_response={"offline": True, "role": role, **extra},
            model=self.name,
        )

    def _answer(
        self, messages: list[Message], tools: list[ToolDef], config: GenerateConfig
    ) -> tuple[str, str, tuple[ToolCall, ...], dict[str, Any]]:
        schema_name = config.response_schema_name
        if schema_name in ("cycle_judge", "cycle_improver", "cycle_user", "cycle_condition",
                           "cycle_pairwise"):
            # the last user message holds the block; after a repair request ("that answer
            # does not follow the schema") it is the one before
            block = next((b for m in reversed(messages) if m.role == "user"
                          if (b := last_json_block(m.content)) is not None), None)
            if block is None:
                hint = ("The offline judge and improver read their input from the last fenced "
                        "```json block of the last user message (see cycle.testing.offline).")
                if schema_name == "cycle_user":
                    # the one way a config (not a custom prompt) takes the block away
                    hint = ("A simulated user's format_history writes the conversation its own "
                            "way, and the offline model reads only the ```json block cycle "
                            "writes: leave format_history out to play the user offline, or "
                            "give the user a real model.")
                raise BadRequestError(
                    f"offline model: the {schema_name} request has no ```json block in its last "
                    "user message", hint=hint)
            if schema_name == "cycle_judge":
                system = next((m.content for m in messages if m.role == "system"), "")
                answer = judge(block, config.response_schema, system)
                role = "judge"
            elif schema_name == "cycle_pairwise":
                answer = prefer(block, config.response_schema)
                role = "judge"
            elif schema_name == "cycle_user":
                answer = play(block, config.response_schema)
                role = "user"
            elif schema_name == "cycle_condition":
                answer = decide(block, config.response_schema)
                role = "condition"
            else:
                answer = improve(block, config.response_schema)
                role = "improver"
            return role, json.dumps(answer, ensure_ascii=False), (), {}
        if config.response_schema:
            # a structured call we have no world for: the smallest valid answer
            value = js.example(config.response_schema, config.response_schema)
            return "structured", json.dumps(value, ensure_ascii=False), (), {}
        reply = respond(messages, tools)
        return "agent", reply.text, reply.tool_calls, {"features": list(reply.applied)}
