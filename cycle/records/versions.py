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
    second_parent: str | None = Field(
        None, description="A merge's other version (improve.merge); None: one parent.")
    source: Source = Field(description="How it was made: initial, improver, manual or rollback.")
    message: str = Field("", description="Why it was made.")
    created_at: datetime = Field(description="When it was stored (UTC).")
    author: str | None = Field(
        None, description="Who stored it (cycle.authors: a person, or 'cycle (alice)' for a "
        "cycle's candidate); None: stored before authors were recorded.")
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
    who: str = Field("user", description="Who moved it (cycle.authors).")
    at: datetime
    forced: bool = Field(False, description="It moved a protected label with --force, by "
                         "someone the protection does not name.")


#: the prompt id of a protection that covers every prompt (cycle's own excepted)
ALL_PROMPTS = "*"


class Protection(BaseModel):
    """A protected label: it moves only by the authors ``allowed`` names, or with --force.

    Kept in the store, which a team shares, rather than in cycle.yaml, where a pull
    request could lift it."""

    model_config = ConfigDict(frozen=True)

    prompt_id: str = Field(description="The prompt, or '*' for every prompt.")
    label: str
    allowed: tuple[str, ...] = Field((), description="Who may move it; empty: nobody "
                                     "without --force.")
    by: str | None = Field(None, description="Who protected it.")
    at: datetime | None = Field(None, description="When (UTC).")

    def allows(self, author: str) -> bool:
        """Whether ``author`` may move the label (names match exactly: 'cycle (alice)' is
        not 'alice', so protecting a label from a cycle's moves stays possible)."""
        return author in self.allowed

    def who_may(self) -> str:
        """The allowed authors as a sentence ends: ``alice or bob``, or ``nobody``."""
        names = list(self.allowed)
        if not names:
            return "nobody"
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
