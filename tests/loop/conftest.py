"""A small world for driving the loop with scripted models.

The agent answers with the keywords its system prompt asks for; the judge
(one LLM criterion, ``quality``) scores 40 plus 20 per keyword in the answer,
minus a per-case handicap; the improver answers from a list per test.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cycle.assemble.config import LoadedConfig, load_config
from cycle.events import EventBus
from cycle.store import Store
from cycle.testing import clear_scripts, script

KEYWORDS = ("sorry", "order", "thanks")
_JSON_BLOCK = re.compile(r"```json\s*(.*?)```", re.DOTALL)


def last_json(messages) -> dict[str, Any]:
    user = [m for m in messages if m.role == "user"][-1].content
    return json.loads(_JSON_BLOCK.findall(user)[-1])


def agent_answer(messages, tools, config) -> str:
    system = next((m.content for m in messages if m.role == "system"), "")
    return "Hello. " + " ".join(k for k in KEYWORDS if f"say {k}" in system)


def judge_answer(messages, tools, config) -> dict[str, Any]:
    case = last_json(messages)
    handicap = int(re.sub(r"\D", "", str(case["input"])) or 0)
    score = 40 + 20 * sum(k in case["output"] for k in KEYWORDS) - handicap
    return {"verdicts": {"quality": {"score": max(0, min(100, score)), "reasoning": f"{score} points"}}}


def suggestion(value: str, *, current: str = "", type: str = "system_prompt", priority: str = "high") -> dict:
    return {"type": type, "priority": priority, "current_value": current, "suggested_value": value,
            "reasoning": f"add {value}", "expected_improvement": "+20", "target_cases": ["c1"]}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Callable[..., LoadedConfig]]:
    """``world(improver_outputs, improve={...}, cases=4, iterations=2)`` -> a LoadedConfig
    (``required``: c1 is a required case; ``config``: more cycle.yaml keys)."""

    def make(improver: list[Any] | Callable[..., Any], *, improve: dict[str, Any] | None = None,
             cases: int = 4, iterations: int = 2, system: str = "You help customers.",
             judge: str = "scripted:judge", agent: str = "scripted:agent", required: bool = True,
             config: dict[str, Any] | None = None) -> LoadedConfig:
        script("agent", agent_answer)
        script("judge", judge_answer)
        script("improver", improver)
        (tmp_path / "prompt.yaml").write_text(json.dumps(
            {"id": "support", "system": system, "user_template": "{{ input }}"}))
        (tmp_path / "cases.yaml").write_text(json.dumps(
            [{"id": f"c{i}", "input": f"case {i}",
              **({"tags": ["required"] if i == 1 else []} if required else {})}
             for i in range(1, cases + 1)]))
        (tmp_path / "cycle.yaml").write_text(json.dumps({
            "prompt": "prompt.yaml", "agent": agent, "judge": judge,
            "improver": "scripted:improver",
            "criteria": [{"id": "quality", "rubric": "Uses the right keywords."}],
            "cases": ["cases.yaml"], "run": {"iterations": iterations, "concurrency": 4},
            "improve": improve or {}, **(config or {}),
        }))
        return load_config(tmp_path / "cycle.yaml")

    yield make
    clear_scripts()


@pytest.fixture
def population_world(world):
    """``population_world(**improve)``: eight cases, a population of three (test_population's
    judge and improver: two edits that help different cases, one that helps none)."""
    from .test_population import improver, judge

    def make(**improve):
        loaded = world(improver, cases=8, improve={"population": 3, "screen_cases": 8,
                                                   "stop": {"max_rounds": 2}, **improve})
        script("judge", judge)
        return loaded
    return make


@pytest.fixture
def merge_world(world):
    """``merge_world(calls, **improve)``: a population of two whose third round merges two
    siblings (test_merge's judge and improver; the improver's inputs go to ``calls``)."""
    from .test_merge import improver, judge

    def make(calls, **improve):
        loaded = world(improver(calls), cases=8, improve={
            "population": 2, "screen_cases": 8, "stop": {"max_rounds": 3}, **improve})
        script("judge", judge)
        return loaded
    return make


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / ".cycle" / "cycle.db")
    yield s
    s.close()


@pytest.fixture
def bus_log() -> tuple[EventBus, list]:
    bus = EventBus()
    log: list = []
    bus.subscribe(log.append)
    return bus, log


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip()


# -- a priced provider: the scripted model, but each call costs $0.01 (fallback price) ----

from cycle.llm.base import ModelOutput
from cycle.llm.registry import register_provider
from cycle.records import Usage
from cycle.testing import ScriptedAPI

#: 4000 input tokens at the fallback price of $2.50 per million
CALL_COST = 0.01


class PaidScriptedAPI(ScriptedAPI):
    """``paid:<script>``: a scripted model the price table does not know, so calls cost money."""

    provider = "paid"
    offline = False  # it stands for a real, priced model

    async def generate(self, messages, tools, config):
        out = await super().generate(messages, tools, config)
        return out.model_copy(update={"usage": Usage(input_tokens=4000)})


register_provider("paid", PaidScriptedAPI)


def priced(answer):
    def wrapped(messages, tools, config):
        result = answer(messages, tools, config)
        text = result if isinstance(result, str) else json.dumps(result)
        return ModelOutput(text=text, usage=Usage(input_tokens=4000))
    return wrapped
