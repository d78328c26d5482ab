"""The improvement cycle: rounds, acceptance, stop conditions, review, events.

    from cycle.loop import Loop
    from cycle.loop.review import AutoReviewer
    result = await Loop(load_config("cycle.yaml"), store=store, reviewer=AutoReviewer()).run()
"""

from cycle.loop.acceptance import AcceptanceDecision, Evaluation, decide
from cycle.loop.config import ImproveConfig, load_improve_config
from cycle.loop.core import CycleResult, Loop, RoundSummary
from cycle.loop.review import AutoReviewer, PromptReviewer
from cycle.loop.stop import CycleState, RoundRecord, parse_stop

__all__ = [
    "AcceptanceDecision",
    "AutoReviewer",
    "CycleResult",
    "CycleState",
    "Evaluation",
    "ImproveConfig",
    "Loop",
    "PromptReviewer",
    "RoundRecord",
    "RoundSummary",
    "decide",
    "load_improve_config",
    "parse_stop",
]
