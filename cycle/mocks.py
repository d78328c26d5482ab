"""How tools answer during evaluation: the mock specifications of cycle.yaml's
``tools:`` section and of a case's ``mocks:`` (the Toolbox in cycle.agents.tools
runs them; the docstring there shows every kind)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_MAX_STEPS = 10


class MatchRule(BaseModel):
    """One row of a ``match`` table: when the arguments match ``args``, answer with
    ``value`` (or fail with ``error``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    args: dict[str, Any] = Field(default_factory=dict, description="Arguments to match (empty: any).")
    match: Literal["exact", "subset", "regex", "schema"] = Field(
        "subset", description="How the arguments match (see the trajectory checks).")
    value: Any = Field(None, description="What the tool returns for such a call.")
    error: str | None = Field(None, description="Fail with this message instead.")
    state: dict[str, Any] = Field(default_factory=dict, description="State changes to apply.")


class MockSpec(BaseModel):
    """How one tool answers during evaluation: exactly one of value, sequence, match,
    function, error and passthrough; plus state changes applied on every call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: Any = Field(None, description="A fixed value, returned for every call.")
    sequence: list[Any] | None = Field(None, description="One value per call; the last repeats.")
    match: list[MatchRule] | None = Field(None, description="Argument patterns -> values, first match wins.")
    function: str | None = Field(None, description="package.module:function(arguments, context).")
    error: str | None = Field(None, description="The tool fails with this message.")
    passthrough: bool = Field(False, description="Run the tool's real function (the only way).")
    state: dict[str, Any] = Field(default_factory=dict, description="State changes on every call.")

    @model_validator(mode="after")
    def _one_kind(self) -> MockSpec:
        given = [k for k in ("value", "sequence", "match", "function", "error")
                 if k in self.model_fields_set] + (["passthrough"] if self.passthrough else [])
        if len(given) != 1:
            raise ValueError("give exactly one of value, sequence, match, function, error, "
                             f"passthrough (got {', '.join(given) or 'none'})")
        if self.sequence is not None and not self.sequence:
            raise ValueError("sequence needs at least one value")
        return self

    @property
    def kind(self) -> str:
        for k in ("sequence", "match", "function", "error"):
            if getattr(self, k) is not None:
                return k
        return "passthrough" if self.passthrough else "value"


class ToolsConfig(BaseModel):
    """The ``tools:`` section of cycle.yaml."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_steps: int = Field(DEFAULT_MAX_STEPS, ge=1, le=1000,
                           description="Model turns a case may take before it ends as terminated.")
    mocks: dict[str, MockSpec] = Field(default_factory=dict, description="Mocks by tool name.")

