"""How tools answer during evaluation: the mock specifications of cycle.yaml's
``tools:`` section and of a case's ``mocks:`` (the Toolbox in cycle.agents.tools
runs them; the docstring there shows every kind)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cycle.imports import OfProject

DEFAULT_MAX_STEPS = 10


class MatchRule(BaseModel):
    """One row of a ``match`` table: when the arguments match ``args``, answer with
    ``value`` (or fail with ``error``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    args: dict[str, Any] = Field(default_factory=dict, description="Arguments to match (empty: any).")
    match: Literal["exact", "subset", "regex", "schema"] = Field(
        "subset", description="How the arguments match (see the trajectory checks).")
    value: Any = Field(None, description="What the tool returns for such a call.")
    error: str | None = Field(None, description="Fail with this message instead.")
    state: dict[str, Any] = Field(default_factory=dict, description="State changes to apply.")


class MockSpec(OfProject):
    """How one tool answers during evaluation: exactly one of value, sequence, match,
    function, error and passthrough; plus state changes applied on every call."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    value: Any = Field(None, description="A fixed value, returned for every call.")
    sequence: list[Any] | None = Field(None, description="One value per call; the last repeats.")
    match: list[MatchRule] | None = Field(None, description="Argument patterns -> values, first match wins.")
    function: str | None = Field(None, description="package.module:function(arguments, context).")
    error: str | None = Field(None, description="The tool fails with this message.")
    passthrough: bool = Field(False, description="Run the tool's real function (the only way).")
    ask_user: bool = Field(False, description="The tool asks the user: the user agent named "
                           "for it answers (user_agents).")
    state: dict[str, Any] = Field(default_factory=dict, description="State changes on every call.")
    @model_validator(mode="after")
    def _one_kind(self) -> MockSpec:
        given = [k for k in ("value", "sequence", "match", "function", "error")
                 if k in self.model_fields_set] + (["passthrough"] if self.passthrough else []) \
            + (["ask_user"] if self.ask_user else [])
        if len(given) != 1:
            raise ValueError("give exactly one of value, sequence, match, function, error, "
                             f"passthrough, ask_user (got {', '.join(given) or 'none'})")
        if self.sequence is not None and not self.sequence:
            raise ValueError("sequence needs at least one value")
        return self

    @property
    def kind(self) -> str:
        for k in ("sequence", "match", "function", "error"):
            if getattr(self, k) is not None:
                return k
        if self.ask_user:
            return "ask_user"
        return "passthrough" if self.passthrough else "value"


class UserAgentSpec(BaseModel):
    """Who answers a tool that asks the user (seed 000's user agents): a script (one
    answer per ask, the last repeating), a function (``fn(prompt, context)``, which may
    return ``with_state(value, {...})``), or a model (``model``, with ``instructions``
    and an optional output ``schema``). The bridge turns the tool's arguments into what
    the user is asked (default: their JSON) and the answer into the tool's result
    (default: as it is); ``format_prompt`` / ``format_response`` replace either."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    script: list[Any] | None = Field(None, description="Answers, one per ask.")
    function: str | None = Field(None, description="package.module:function(prompt, context).")
    model: str | None = Field(None, description="A model that plays the user for this tool.")
    instructions: str = Field("", description="Who the user is, for a model user agent.")
    schema_: dict[str, Any] | None = Field(None, alias="schema",
                                           description="The JSON schema of a model's answer.")
    format_prompt: str | None = Field(None, description="package.module:fn(arguments) -> str.")
    format_response: str | None = Field(None, description="package.module:fn(answer) -> value.")

    @model_validator(mode="after")
    def _one_source(self) -> UserAgentSpec:
        given = [k for k in ("script", "function", "model") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of script, function, model "
                             f"(got {', '.join(given) or 'none'})")
        if self.script is not None and not self.script:
            raise ValueError("script needs at least one answer")
        return self


class ToolsConfig(BaseModel):
    """The ``tools:`` section of cycle.yaml."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    max_steps: int = Field(DEFAULT_MAX_STEPS, ge=1, le=1000,
                           description="Model turns a case may take before it ends as terminated.")
    mocks: dict[str, MockSpec] = Field(default_factory=dict, description="Mocks by tool name.")
    user_agents: dict[str, UserAgentSpec] = Field(
        default_factory=dict, description="Who answers each tool that asks the user.")

