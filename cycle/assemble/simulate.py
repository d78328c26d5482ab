"""The agent of a cycle.yaml for ``cycle simulate`` (the session is ``cycle.simulate``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cycle.formats.adk import snake
from cycle.simulate import SimulatedAgent, with_passthrough


def config_agent(config: Path, *, eval_set_path: Path | None, cases_path: Path | None,
                 passthrough: Sequence[str] = (), store_path: Path | None = None) -> SimulatedAgent:
    """The agent of a cycle.yaml: its prompt's tools (an ADK agent's, when it names one),
    answered by its mocks (``passthrough``: these tools run their real function too)."""
    from cycle.assemble.config import load_config, load_prompt

    loaded = load_config(config)
    if loaded.prompt_is_stored and store_path is not None:
        from cycle.store import Store

        with Store.open(store_path, create=False) as store:
            prompt, _ = load_prompt(loaded, store)
    else:
        prompt, _ = load_prompt(loaded)
    adk = loaded.config.agent_config.adk
    if adk:
        from cycle.agents.adk import adk_tools, load_adk_agent, merged_tools

        found = adk_tools(load_adk_agent(adk))
        tools = merged_tools(prompt.tools, found)
        functions: dict[str, Any] = {t.definition.name: t.function for t in found if t.function}
    else:
        tools = list(prompt.tools)
        functions = {t.name: t.function for t in tools if t.function}
    return SimulatedAgent(
        name=prompt.id, tools=tools,
        mocks=with_passthrough(loaded.config.tools.mocks, passthrough, tools),
        eval_set_path=eval_set_path or Path(f"{snake(prompt.id)}.evalset.json"),
        cases_path=cases_path, functions=functions, source=str(loaded.path))
