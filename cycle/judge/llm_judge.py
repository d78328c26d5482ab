"""The LLM judge: one structured call scores every LLM criterion of a case.

The answer's JSON schema (name ``cycle_judge``) lists every criterion id as a
required property, each ``{reasoning, score}``, so a conforming answer cannot
leave one out. The user message ends with a fenced JSON block holding the
case (input, output, expected, criteria): a real model reads the instructions
above it, the offline model reads the block.

The judge prompt is itself a versioned prompt (id ``cycle-judge``), saved to
the store on first use, so every run records which judge version scored it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cycle.errors import JudgeError, StructuredOutputError
from cycle.judge.criteria import Criterion
from cycle.llm.base import GenerateConfig
from cycle.prompts.template import render_user
from cycle.records import Message, Prompt, Usage

JUDGE_PROMPT_ID = "cycle-judge"
SCHEMA_NAME = "cycle_judge"

JUDGE_SYSTEM = """\
You are a strict, fair evaluator of an AI assistant's responses. You score one \
response at a time against the criteria you are given, each on its own, and \
you explain each score briefly and concretely. You never reward length for its \
own sake, and you never let one criterion's result change another's score.\
"""

JUDGE_USER_TEMPLATE = """\
Evaluate the assistant's response in the case below against each criterion.

How to score each criterion (an integer from 0 to 100):
- 90-100: fully meets the criterion; nothing of substance to fix.
- 70-89: meets it with minor flaws.
- 40-69: partly meets it; a reader would notice real problems.
- 0-39: fails it, or the response is missing, off-topic or wrong.

When an expected (reference) answer is given, it shows what a good response
contains; the wording may differ. When it is null, judge on the input alone.
Quote or point to the part of the response your reasoning is about.

Answer with one JSON object and nothing else:
{"verdicts": {"<criterion id>": {"reasoning": "<one or two sentences>", "score": <0-100>}}}
with one entry for every criterion id listed below, exactly as written.

Criteria:
{% for c in criteria %}- {{ c.id }}: {{ c.description }}
{% endfor %}
The case (input given to the assistant, its response as "output", the expected answer, and the criteria):
```json
{{ payload }}
```
"""

JUDGE_PROMPT = Prompt(
    id=JUDGE_PROMPT_ID,
    system=JUDGE_SYSTEM,
    user_template=JUDGE_USER_TEMPLATE,
    params={"temperature": 0},
    metadata={"builtin": True},
)


@dataclass(frozen=True)
class LlmVerdict:
    criterion_id: str
    score: float
    reasoning: str


@dataclass(frozen=True)
class LlmJudgement:
    verdicts: dict[str, LlmVerdict]
    usage: Usage
    cost: float


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def verdict_schema(ids: Sequence[str]) -> dict[str, Any]:
    """The JSON schema of a verdict naming every criterion id as required."""
    entry = {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "score": {"type": "integer", "minimum": 0, "maximum": 100},
        },
        "required": ["reasoning", "score"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "object",
                "properties": {i: entry for i in ids},
                "required": list(ids),
                "additionalProperties": False,
            }
        },
        "required": ["verdicts"],
        "additionalProperties": False,
    }


def ensure_judge_version(store: Any, prompt: Prompt = JUDGE_PROMPT) -> str:
    """Save the judge prompt on first use (content-addressed: once) and return its version."""
    found = store.find_version(prompt)
    if found is None:
        found = store.save_version(prompt, source="initial", message="built-in judge prompt")
    return str(found.version)


class LlmJudge:
    """Scores the LLM criteria of one case in one call."""

    def __init__(self, model: Any, prompt: Prompt = JUDGE_PROMPT) -> None:
        self.model = model
        self.prompt = prompt
        self._config = GenerateConfig(temperature=prompt.params.get("temperature"))
        self._system = Message.system(prompt.system) if prompt.system else None
        self._schemas: dict[tuple[str, ...], dict[str, Any]] = {}
        self._around_payload: dict[tuple[tuple[str, str], ...], tuple[str, str] | tuple[()]] = {}

    def messages(
        self, criteria: Sequence[Criterion], *, input: Any, output: str, expected: Any
    ) -> list[Message]:
        crit = [{"id": c.id, "description": c.description} for c in criteria]
        # one top-level field a line, each written by json's C encoder (``indent``
        # would send every case through its pure-Python one: a quarter of
        # cycle's own CPU per case, benchmarks/RESULTS.md)
        fields = {"input": input, "output": output, "expected": expected, "criteria": crit}
        payload = "{\n" + ",\n".join(
            f"{_dumps(k)}: {_dumps(v)}" for k, v in fields.items()
        ) + "\n}"
        key = tuple((c["id"], c["description"]) for c in crit)
        parts = self._around_payload.get(key)
        if parts is None:
            parts = self._around_payload[key] = self._split_template(crit)
        if parts:
            user = parts[0] + payload + parts[1]
        else:
            user = render_user(self.prompt, {"criteria": crit, "payload": payload})
        return ([self._system] if self._system else []) + [Message.user(user)]

    def _split_template(self, crit: list[dict[str, str]]) -> tuple[str, str] | tuple[()]:
        """The user message before and after the payload, rendered once per criteria set
        (the rest of the template does not change from case to case); () when the
        template does not place the payload exactly once, as it is."""
        marker = "\x00cycle-payload\x00"
        rendered = render_user(self.prompt, {"criteria": crit, "payload": marker})
        if rendered.count(marker) != 1:
            return ()
        head, tail = rendered.split(marker)
        return head, tail

    async def score(
        self,
        criteria: Sequence[Criterion],
        *,
        input: Any,
        output: str,
        expected: Any,
        iteration: int = 0,
        context: dict[str, Any] | None = None,
    ) -> LlmJudgement:
        ids = tuple(c.id for c in criteria)
        schema = self._schemas.get(ids)
        if schema is None:
            schema = self._schemas[ids] = verdict_schema(ids)
        messages = self.messages(criteria, input=input, output=output, expected=expected)
        try:
            out = await self.model.generate_structured(
                messages, schema, name=SCHEMA_NAME, config=self._config, iteration=iteration,
                role="judge", context=context,
            )
        except StructuredOutputError as e:
            raise JudgeError(f"the judge's verdict was malformed after a repair: {e.message}") from e
        return LlmJudgement(verdicts=_read(out.parsed, ids), usage=out.usage, cost=out.cost)


def _read(parsed: Any, ids: Sequence[str]) -> dict[str, LlmVerdict]:
    verdicts = parsed.get("verdicts") if isinstance(parsed, dict) else None
    if not isinstance(verdicts, dict):
        raise JudgeError("the judge's answer has no 'verdicts' object")
    out: dict[str, LlmVerdict] = {}
    for cid in ids:
        v = verdicts.get(cid)
        if not isinstance(v, dict) or not isinstance(v.get("score"), int | float) \
                or isinstance(v.get("score"), bool):
            raise JudgeError(f"the judge's answer has no valid score for criterion '{cid}'")
        score = float(v["score"])
        if not 0 <= score <= 100:
            raise JudgeError(f"the judge scored criterion '{cid}' {score}, outside 0-100")
        out[cid] = LlmVerdict(cid, score, str(v.get("reasoning", "")))
    return out
