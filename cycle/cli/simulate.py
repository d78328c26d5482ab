"""``cycle simulate``: play the agent's model; each finished session becomes a golden trace
(``cycle.simulate`` says how)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cycle.cli import CliContext
from cycle.errors import ConfigError


@click.command()
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--adk", "adk_paths", multiple=True, metavar="PKG.MODULE:AGENT",
              help="An ADK agent to play (repeatable); its tools answer through CONFIG's mocks.")
@click.option("--evalset", type=click.Path(dir_okay=False, path_type=Path),
              help="The ADK EvalSet file sessions are appended to (created when missing; "
              "default: <agent name>.evalset.json here).")
@click.option("--cases", type=click.Path(dir_okay=False, path_type=Path),
              help="Also append each session to this cycle case file, as a case expecting its "
              "tool calls and final response.")
@click.option("--passthrough", multiple=True, metavar="TOOL",
              help="Let TOOL run its real function (repeatable); every other tool answers "
              "only through a mock.")
@click.pass_context
def simulate(ctx: click.Context, config: Path | None, adk_paths: tuple[str, ...],
             evalset: Path | None, cases: Path | None, passthrough: tuple[str, ...]) -> None:
    """Play the agent's model in a Textual screen; each finished session becomes a golden
    trace appended to an ADK EvalSet.

    The agents: the prompt of CONFIG (default ./cycle.yaml, when there is one) with its
    tools, and every --adk agent. Tools answer through CONFIG's mocks; nothing runs real
    code unless a mock (or --passthrough) says so.
    """
    from cycle.assemble.simulate import config_agent
    from cycle.simulate import Simulation, adk_agent, check_passthrough, check_targets
    from cycle.tui.app import SimulateApp

    obj = ctx.find_object(CliContext) or CliContext()
    if config is None and Path("cycle.yaml").exists():
        config = Path("cycle.yaml")
    if config is not None and not config.exists():
        raise ConfigError(f"{config} not found", field="CONFIG",
                          hint="Name a cycle.yaml, or play an ADK agent with --adk.")
    agents = []
    mocks = {}
    if config is not None:
        agent = config_agent(config, eval_set_path=evalset, cases_path=cases,
                             passthrough=passthrough,
                             store_path=obj.store_path())
        agents.append(agent)
        mocks = agent.mocks
    for path in adk_paths:
        agents.append(adk_agent(path, eval_set_path=evalset, cases_path=cases, mocks=mocks,
                                passthrough=passthrough))
    check_passthrough(passthrough, agents)
    simulation = Simulation(agents)  # no agent at all: a clear error
    for agent in agents:
        check_targets(agent)  # before any session: a finished one must not be lost
    if not (sys.stdin.isatty() and sys.__stdout__.isatty()):
        # the screen would be written into a pipe, waiting for keys that never come
        raise click.UsageError("no terminal for the simulation: a person plays the agent's "
                               "model on its screen; run cycle simulate in a terminal")
    SimulateApp(simulation).run()
