"""IFBench's strict evaluation as a cycle check.

The generated cycle.yaml names ``ifbench_check:score`` (a shim the harness writes beside
it, importing this module): a ``python`` check, run in the cycle process for each
iteration of each case. The case's ``expected`` holds the item's ``instruction_id_list``
and ``kwargs``; its ``input`` is the IFBench prompt. The score is the share of the
item's instructions the answer follows (IFBench's strict mode: the answer as it is),
0-100; the criterion passes only when every one is followed, IFBench's prompt-level
strict accuracy.

Why in the cycle process and not a subprocess: once spaCy and the NLTK downloads are
gone (ifbench_vendor/CHANGES.md) the checkers are pure Python on nltk, emoji and syllapy,
so a check is a function call (~1 ms) that cycle times, records and reports like any
other, and an import that fails is one ConfigError before any model is paid for.
"""

from __future__ import annotations

from typing import Any

from ifbench_vendor.instructions_registry import INSTRUCTION_DICT
from msgspec import Struct

from cycle.judge.checks import CheckContext, CheckOutcome


class InstructionVerdict(Struct, frozen=True):
    """Whether an answer follows one instruction, and why not when a checker broke."""

    instruction_id: str
    followed: bool
    error: str = ""


def spec_errors(instruction_ids: Any, kwargs: Any) -> list[str]:
    """What is wrong with an item's instructions (empty when it can be scored)."""
    if not isinstance(instruction_ids, list) or not instruction_ids:
        return ["instruction_id_list must be a non-empty list"]
    if not isinstance(kwargs, list) or len(kwargs) != len(instruction_ids):
        return ["kwargs must be a list with one mapping per instruction"]
    errors = [f"unknown instruction '{i}'" for i in instruction_ids if i not in INSTRUCTION_DICT]
    errors += [f"kwargs[{n}] is not a mapping" for n, k in enumerate(kwargs)
               if not isinstance(k, dict)]
    return errors


def verdicts(response: str, prompt: str, instruction_ids: list[str],
             kwargs: list[dict[str, Any]]) -> list[InstructionVerdict]:
    """IFBench's strict evaluation of one answer (evaluation_lib's
    ``test_instruction_following_strict``): each instruction built from its non-null
    kwargs, and followed only by a non-blank answer its checker accepts."""
    out = []
    for instruction_id, given in zip(instruction_ids, kwargs, strict=True):
        instruction = INSTRUCTION_DICT[instruction_id](instruction_id)
        instruction.build_description(**{k: v for k, v in given.items() if v is not None})
        args = instruction.get_instruction_args()
        if args and "prompt" in args:
            instruction.build_description(prompt=prompt)
        if not response.strip():
            out.append(InstructionVerdict(instruction_id, False))
            continue
        try:
            followed = bool(instruction.check_following(response))
        except Exception as e:  # noqa: BLE001 - a checker that breaks on an answer fails it
            # upstream's run would stop on it (a stop-word ratio of an answer with no
            # words divides by zero); the answer did not do what was asked, so it fails
            out.append(InstructionVerdict(instruction_id, False, f"{type(e).__name__}: {e}"))
            continue
        out.append(InstructionVerdict(instruction_id, followed))
    return out


def score(ctx: CheckContext) -> CheckOutcome:
    """The cycle check: the share of the case's instructions followed, with each named."""
    spec = ctx.expected if isinstance(ctx.expected, dict) else {}
    ids, kwargs = spec.get("instruction_id_list"), spec.get("kwargs")
    problems = spec_errors(ids, kwargs)
    if problems:
        # a case file edited by hand: an error of the case, not a zero for the prompt
        raise ValueError(f"case {ctx.case_id}: its expected is not an IFBench item's "
                         f"instructions: {'; '.join(problems)}")
    prompt = ctx.input if isinstance(ctx.input, str) else str(ctx.variables.get("input", ""))
    found = verdicts(ctx.output, prompt, ids, kwargs)
    followed = sum(v.followed for v in found)
    parts = [f"{v.instruction_id}: {'followed' if v.followed else 'not followed'}"
             + (f" (the checker raised {v.error})" if v.error else "") for v in found]
    return CheckOutcome(100.0 * followed / len(found), "; ".join(parts))
