"""The improvement cycle: rounds, acceptance, stop conditions, review, events.

    loop = Loop(start=version, cases=cases, agent=agent_factory, judge=judge,
                improver=improver, reviewer=AutoReviewer(), store=store, stop=stop)
    result = await loop.run()

``cycle.assemble.build_loop`` builds one from a cycle.yaml.
"""

from cycle.loop.acceptance import AcceptanceDecision, Evaluation, decide
from cycle.loop.core import AgentFactory, CycleResult, Loop, LoopSettings
from cycle.loop.review import AutoReviewer, PromptReviewer
from cycle.loop.stop import CycleState, RoundRecord, parse_stop

__all__ = [
    "AcceptanceDecision",
    "AgentFactory",
    "AutoReviewer",
    "CycleResult",
    "CycleState",
    "Evaluation",
    "Loop",
    "LoopSettings",
    "PromptReviewer",
    "RoundRecord",
    "decide",
    "parse_stop",
]
