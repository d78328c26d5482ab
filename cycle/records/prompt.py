"""Prompt: what is versioned. A system prompt, a user template, model parameters, tools,
few-shot examples and, for the judge prompt, the criteria's rubrics.

The content only; rendering its templates is ``cycle.prompts``' work.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cycle.records.messages import ToolDef


class Example(BaseModel):
    """One few-shot demonstration: an input, as a case gives it, and the ideal answer. It is
    sent as a user turn (the user template rendered with the input) and an assistant turn
    (the output) before the real user message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: dict[str, Any] | str = Field(
        description="The user's side: a message (rendered as {{ input }}), or the template's "
        "variables, as a case's input.")
    output: str = Field(description="The assistant's side: the answer to imitate.")
    source: str | None = Field(
        None, description="The id of the case it was drawn from, if any: that case is "
        "evaluated without it (its own answer would be quoted back to it).")

    def canonical(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class Prompt(BaseModel):
    """The content of one prompt version. Immutable; its hash is its identity."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="Stable name of the prompt, e.g. 'support-reply'.")
    system: str = Field("", description="The system prompt.")
    user_template: str = Field(
        "{{ input }}", description="Jinja2 template of the user message, rendered with a case's input."
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Model parameters: model, temperature, max_tokens, ...",
    )
    tools: tuple[ToolDef, ...] = Field(
        (), description="Tools the model may call: name, description, JSON-schema parameters."
    )
    examples: tuple[Example, ...] = Field(
        (), description="Few-shot demonstrations sent before the real user message.")
    rubrics: dict[str, str] = Field(
        default_factory=dict,
        description="The judge prompt's (cycle-judge) criteria rubrics under improvement, by "
        "criterion id, as ``cycle judge improve`` carries and edits them; a run's judge reads "
        "its rubrics from cycle.yaml, where a confirmed edit is written back.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free metadata, not hashed.")

    def canonical(self) -> dict[str, Any]:
        """The fields that make a version: everything but metadata (tools, examples and
        rubrics only when there are some, so a prompt without them keeps the hash it always
        had)."""
        out: dict[str, Any] = {
            "id": self.id,
            "system": self.system,
            "user_template": self.user_template,
            "params": self.params,
        }
        if self.tools:
            out["tools"] = [t.model_dump(exclude_none=True) for t in self.tools]
        if self.examples:
            out["examples"] = [e.canonical() for e in self.examples]
        if self.rubrics:
            out["rubrics"] = dict(self.rubrics)
        return out

    def tool(self, name: str) -> ToolDef | None:
        """The declared tool called ``name``, if any."""
        return next((t for t in self.tools if t.name == name), None)

    @property
    def words(self) -> int:
        """Its length in words (system prompt, template, tool descriptions and examples): an
        improver that only ever adds makes a prompt that grows round after round."""
        shown = [x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)
                 for e in self.examples for x in (e.input, e.output)]
        text = " ".join([self.system, self.user_template, *(t.description for t in self.tools),
                         *shown])
        return len(text.split())

    @property
    def content_hash(self) -> str:
        """sha256 of the canonical JSON: identical content, identical hash."""
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()
