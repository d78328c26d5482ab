"""IFBench's items as a cycle project: a prompt, the cases of both splits, cycle.yaml.

    project/
      cycle.yaml          the agent, improver and the ifbench criterion; run.tags: [improve]
      prompts/ifbench.yaml  the system prompt the cycle improves; the item is the user message
      cases/improve.yaml  the cases the cycle sees (tag improve)
      cases/test.yaml     the held-out cases (tag test): never in a cycle, scored before/after
      ifbench_check.py    the check's import path, pointing at scoring.py here

The split is stratified by an item's first instruction, so each kind of instruction lands
on both sides in proportion; within a kind the order is a shuffle seeded with ``seed``.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml
from scoring import spec_errors

HERE = Path(__file__).resolve().parent
DATA = HERE / "ifbench_vendor" / "data" / "IFBench_test.jsonl"

#: the starting system prompt: the plainest a user would write
START_SYSTEM = "You are a helpful assistant. Answer the user's request."


def load_items(path: Path = DATA) -> list[dict[str, Any]]:
    """IFBench's items (key, prompt, instruction_id_list, kwargs), checked as they are read."""
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        item = json.loads(line)
        problems = spec_errors(item.get("instruction_id_list"), item.get("kwargs"))
        if problems or not isinstance(item.get("prompt"), str) or "key" not in item:
            raise ValueError(f"{path}:{n}: not an IFBench item ({'; '.join(problems) or 'no key or prompt'})")
        items.append(item)
    return items


def choose(items: list[dict[str, Any]], count: int | None, seed: int) -> list[dict[str, Any]]:
    """``count`` items drawn with the seed (all of them when None), in file order."""
    if count is None or count >= len(items):
        return items
    picked = set(random.Random(f"ifbench-items-{seed}").sample(range(len(items)), count))
    return [item for n, item in enumerate(items) if n in picked]


def split(items: list[dict[str, Any]], test_share: float, seed: int
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(improvement items, held-out test items), stratified by the first instruction."""
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        by_kind[item["instruction_id_list"][0]].append(item)
    rng = random.Random(f"ifbench-split-{seed}")
    improve, test = [], []
    owed = 0.0  # the fractions of an item carried from kind to kind, so small kinds add up
    for kind in sorted(by_kind):
        group = by_kind[kind]
        rng.shuffle(group)
        exact = len(group) * test_share
        take = int(exact)
        owed += exact - take
        if owed >= 0.5 and take < len(group):
            take += 1
            owed -= 1
        if len(group) >= 2:  # a kind of two items or more is on both sides
            take = min(max(take, 1), len(group) - 1)
        test.extend(group[:take])
        improve.extend(group[take:])
    order = {id(item): n for n, item in enumerate(items)}
    return (sorted(improve, key=lambda i: order[id(i)]), sorted(test, key=lambda i: order[id(i)]))


def case(item: dict[str, Any], tag: str) -> dict[str, Any]:
    """One IFBench item as a cycle case: the prompt is the user message; what the
    checkers need is ``expected``, which an improver edit may never make the prompt read."""
    return {
        "id": f"ifbench-{item['key']}",
        "tags": [tag],
        "input": item["prompt"],
        "expected": {
            "instruction_id_list": item["instruction_id_list"],
            "kwargs": [{k: v for k, v in kw.items() if v is not None} for kw in item["kwargs"]],
        },
    }


def write_project(out: Path, *, improve: list[dict[str, Any]], test: list[dict[str, Any]],
                  model: str, improver: str, iterations: int, concurrency: int,
                  max_rounds: int, max_cost: float, acceptance: str) -> Path:
    """Write the project into ``out`` (which must be empty or new); returns cycle.yaml."""
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; give a new --workdir")
    (out / "prompts").mkdir(parents=True, exist_ok=True)
    (out / "cases").mkdir(exist_ok=True)
    _dump(out / "prompts" / "ifbench.yaml", {
        "id": "ifbench",
        "system": START_SYSTEM,
        "user_template": "{{ input }}",
        # the answer length the runner in nvidia-ifbench allows (max_new_tokens): some
        # items ask for long answers, and the budget reserves this much a call
        "params": {"model": model, "max_tokens": 4096},
    })
    _dump(out / "cases" / "improve.yaml", [case(i, "improve") for i in improve])
    _dump(out / "cases" / "test.yaml", [case(i, "test") for i in test])
    (out / "ifbench_check.py").write_text(
        '"""Written by benchmarks/ifbench/run.py: the ifbench check lives in the harness."""\n\n'
        "import sys\n\n"
        f"sys.path.insert(0, {str(HERE)!r})\n\n"
        "from scoring import score  # noqa: E402\n\n"
        '__all__ = ["score"]\n', encoding="utf-8")
    config = {
        "prompt": "prompts/ifbench.yaml",
        "agent": model,
        "judge": improver,  # no LLM criterion: the judge is never called
        "improver": improver,
        "criteria": [{
            "id": "ifbench",
            "description": "Follows every instruction of the IFBench item (strict).",
            "check": {"type": "python", "function": "ifbench_check:score"},
            "required": True,
        }],
        "pass_threshold": 100,
        "cases": ["cases/*.yaml"],
        "run": {"iterations": iterations, "concurrency": concurrency, "timeout": 300,
                "tags": ["improve"]},
        "improve": {
            "acceptance": acceptance,
            "stop": {"any": [{"max_rounds": max_rounds}, {"no_improvement": 2},
                             {"max_cost": max_cost}]},
        },
    }
    path = out / "cycle.yaml"
    _dump(path, config)
    return path


def _dump(path: Path, data: Any) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100),
                    encoding="utf-8")
