"""Prompt versions, prompt summaries and label moves."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cycle.records.prompt import Prompt

Source = Literal["initial", "improver", "manual", "rollback"]
SOURCES: tuple[str, ...] = ("initial", "improver", "manual", "rollback")

#: the version work continues from (every prompt has it from its first version on)
HEAD = "head"
#: the version a person promoted (``cycle promote``); nothing moves it by itself
PRODUCTION = "production"

#: the prompts cycle itself runs on, kept in the store like any other (so their versions
#: are recorded) but left out of lists a person browses unless asked for
IMPROVER_PROMPT_ID = "cycle-improver"
JUDGE_PROMPT_ID = "cycle-judge"
BUILTIN_PROMPTS = frozenset({IMPROVER_PROMPT_ID, JUDGE_PROMPT_ID})


class Version(BaseModel):
    """One immutable, content-addressed version of a prompt."""

    model_config = ConfigDict(frozen=True)

    prompt_id: str = Field(description="The prompt's id.")
    version: str = Field(description="Semantic version number, e.g. '1.2.0'.")
    seq: int = Field(description="Creation order within the prompt, from 1.")
    hash: str = Field(description="Prompt.content_hash of this version's content.")
    parent: str | None = Field(None, description="Version this one was derived from.")
    source: Source = Field(description="How it was made: initial, improver, manual or rollback.")
    message: str = Field("", description="Why it was made.")
    created_at: datetime = Field(description="When it was stored (UTC).")
    prompt: Prompt = Field(description="The content.")

    @property
    def ref(self) -> str:
        """``id@version``, what ``Store.resolve`` accepts."""
        return f"{self.prompt_id}@{self.version}"


class PromptSummary(BaseModel):
    """One line of ``cycle prompt list``."""

    model_config = ConfigDict(frozen=True)

    id: str
    versions: int = Field(description="How many versions are stored.")
    latest: str = Field(description="The highest version number.")
    labels: dict[str, str] = Field(description="Label name -> version.")
    updated_at: datetime = Field(description="When the latest version was stored.")


class LabelMove(BaseModel):
    """A label moved (or was created): recorded for every move, never rewritten."""

    model_config = ConfigDict(frozen=True)

    id: int
    prompt_id: str
    label: str
    from_version: str | None = Field(description="None when the label was created.")
    to_version: str
    action: str = Field(description="'save' (a new version moved it), 'label' or 'rollback'.")
    reason: str = ""
    who: str = "user"
    at: datetime
