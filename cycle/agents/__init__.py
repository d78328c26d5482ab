"""Agents: how a case is played into an answer (a prompt on a model, a Python callable,
an HTTP endpoint)."""

from cycle.agents.agent import (
    Agent,
    CallableAgent,
    HttpAgent,
    PromptAgent,
    generate_config,
)

__all__ = ["Agent", "CallableAgent", "HttpAgent", "PromptAgent", "generate_config"]
