"""The LLM judge: one structured call scores every LLM criterion of a case.

The answer's JSON schema (name ``cycle_judge``) lists every criterion id as a
required property, each ``{reasoning, score}``, so a conforming answer cannot
leave one out. The answer is validated by a pydantic model built once per
criteria set (``verdict_model``), which sends exactly that schema. The user message ends with a fenced JSON block holding the
case (input, output, expected, criteria): a real model reads the instructions
above it, the offline model reads the block.

The judge prompt is itself a versioned prompt (id ``cycle-judge``), saved to
the store on first use, so every run records which judge version scored it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from msgspec import Struct
from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from cycle.errors import ConfigError, JudgeError, StructuredOutputError
from cycle.judge.criteria import Criterion
from cycle.llm.base import GenerateConfig
from cycle.prompts.template import render_user
from cycle.records import JUDGE_PROMPT_ID, Message, Prompt, TraceEvent, Usage
from cycle.records.scope import NO_SCOPE, CallScope
from cycle.records.transcript import has_behaviour, transcript_lines

if TYPE_CHECKING:
    from cycle.llm.model import Model
    from cycle.store import Store

#: characters of one text or value the judge sees in a transcript before it is cut
TRANSCRIPT_CUT = 600
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
{{ criteria }}
The case (input given to the assistant, its response as "output", the expected answer, the criteria, \
and, when the assistant used tools, its "transcript": every tool call with its result, in order):
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


class LlmVerdict(Struct, frozen=True):
    criterion_id: str
    score: float
    reasoning: str


class LlmJudgement(Struct, frozen=True):
    verdicts: dict[str, LlmVerdict]
    usage: Usage
    cost: float


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def verdict_schema(ids: Sequence[str], tens: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The JSON schema of a verdict naming every criterion id as required (the ids in
    ``tens`` are scored 0-10, the others 0-100)."""

    def entry(top: int) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "reasoning": {"type": "string"},
                "score": {"type": "integer", "minimum": 0, "maximum": top},
            },
            "required": ["reasoning", "score"],
            "additionalProperties": False,
        }

    return {
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "object",
                "properties": {i: entry(10 if i in tens else 100) for i in ids},
                "required": list(ids),
                "additionalProperties": False,
            }
        },
        "required": ["verdicts"],
        "additionalProperties": False,
    }


class Score(BaseModel):
    """One criterion's score in the judge's answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reasoning: str
    score: int = Field(ge=0, le=100)

    @field_validator("score", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):  # JSON true is not a score, although Python says it is 1
            raise ValueError("a score is a number from 0 to 100, not true/false")  # noqa: TRY004
        return value


class ScoreOfTen(Score):
    """A score on seed 004's 0-10 scale."""

    score: int = Field(ge=0, le=10)


@lru_cache(maxsize=256)
def verdict_model(ids: tuple[str, ...], tens: frozenset[str] = frozenset()) -> type[BaseModel]:
    """The model of a judge answer for these criterion ids: ``verdicts.<id>`` is a ``Score``
    for every id, nothing else. Its JSON schema is ``verdict_schema(ids)`` as it is (ids
    are aliases, so any id works, ``model_config`` included)."""
    schema = verdict_schema(ids, tens)

    def wire(target: dict[str, Any], _: Any = None) -> None:
        target.clear()
        target.update(schema)

    closed = ConfigDict(extra="forbid", frozen=True)
    verdicts = create_model(  # type: ignore[call-overload]
        "CriterionScores", __config__=closed,
        **{f"c{n}": (ScoreOfTen if cid in tens else Score, Field(alias=cid))
           for n, cid in enumerate(ids)},
    )
    return create_model(  # type: ignore[call-overload, no-any-return]
        "JudgeAnswer", __config__=ConfigDict(extra="forbid", frozen=True, json_schema_extra=wire),
        verdicts=(verdicts, ...),
    )


BUILT_IN = "built-in judge prompt"


def ensure_judge_version(store: Store, prompt: Prompt = JUDGE_PROMPT) -> str:
    """Save the judge prompt on first use (content-addressed: once) and return its version."""
    found = store.find_version(prompt)
    if found is None:
        from cycle.authors import LOOP, on_behalf

        # cycle's own text, saved by cycle for whoever's command needed it
        found = store.save_version(prompt, source="initial", message=BUILT_IN,
                                   author=on_behalf(LOOP))
    return str(found.version)


def judge_prompt_in(store: Store) -> tuple[Prompt, str]:
    """The judge prompt a run uses, and its version: the stored ``cycle-judge`` head when a
    person made it (``cycle prompt import`` of a file with ``id: cycle-judge``, a
    rollback, an edit), else this release's built-in one (saved on first use)."""
    prompt, version = current_judge_prompt(store)
    return prompt, version if version is not None else ensure_judge_version(store, prompt)


def current_judge_prompt(store: Store) -> tuple[Prompt, str | None]:
    """``judge_prompt_in`` without saving anything (a dry run's): the version is None
    while the built-in prompt is not stored yet."""
    if store.has_prompt(JUDGE_PROMPT_ID):
        head = store.resolve(JUDGE_PROMPT_ID)
        if head.message != BUILT_IN:
            if "payload" not in head.prompt.user_template:
                # the hint named `cycle prompt rollback`, which does not exist
                own = store.find_version(JUDGE_PROMPT)
                back = ("" if own is None else f", or go back to cycle's own: cycle rollback "
                        f"{JUDGE_PROMPT_ID} --to {own.version}")
                raise ConfigError(
                    f"the judge prompt {head.ref} does not show the judge the case: its "
                    "user_template has no {{ payload }}", field="cycle-judge",
                    hint="Put {{ payload }} (the case as JSON) and {{ criteria }} (one line "
                    f"each) in its user_template and import it again{back}.")
            return head.prompt, head.version
    found = store.find_version(JUDGE_PROMPT)
    return JUDGE_PROMPT, None if found is None else str(found.version)


class LlmJudge:
    """Scores the LLM criteria of one case in one call."""

    def __init__(self, model: Model, prompt: Prompt = JUDGE_PROMPT, *,
                 description: str = "") -> None:
        """``description``: what the assistant under test is for (cycle.yaml's
        ``agent.description``), shown to the judge with every case."""
        self.model = model
        self.prompt = prompt
        self.description = description
        #: its generation options (the schema is added per call)
        self.config = GenerateConfig(temperature=prompt.params.get("temperature"))
        self._system = Message.system(prompt.system) if prompt.system else None
        self._around_payload: dict[str, tuple[str, str] | tuple[()]] = {}

    def messages(
        self, criteria: Sequence[Criterion], *, input: Any, output: str, expected: Any,
        trace: Sequence[TraceEvent] = (),
    ) -> list[Message]:
        crit = [{"id": c.id, "description": c.description if c.scale == 100 else
                 f"{c.description.rstrip()} (Score this criterion from 0 to 10, not 0 to 100.)"}
                for c in criteria]
        # one top-level field a line, each written by json's C encoder (``indent``
        # would send every case through its pure-Python one: a quarter of
        # cycle's own CPU per case, benchmarks/RESULTS.md)
        fields: dict[str, Any] = {"input": input, "output": output, "expected": expected,
                                  "criteria": crit}
        if self.description:  # what the assistant is for (the payload's keys say it)
            fields = {"what_the_assistant_is_for": self.description, **fields}
        if has_behaviour(trace):
            # what the assistant did, not only what it said: tool calls and results kept,
            # long texts cut with a marker
            fields["transcript"] = transcript_lines(trace, limit=TRANSCRIPT_CUT)
        payload = "{\n" + ",\n".join(
            f"{_dumps(k)}: {_dumps(v)}" for k, v in fields.items()
        ) + "\n}"
        # the criteria a line each, "- id: description", written here rather than by a
        # loop in the template: a template of text and placeholders renders without
        # loading jinja2 (cycle.prompts.template)
        listed = "".join(f"- {c['id']}: {c['description']}\n" for c in crit)
        parts = self._around_payload.get(listed)
        if parts is None:
            parts = self._around_payload[listed] = self._split_template(listed)
        if parts:
            user = parts[0] + payload + parts[1]
        else:
            user = render_user(self.prompt, {"criteria": listed, "payload": payload})
        return ([self._system] if self._system else []) + [Message.user(user)]

    def _split_template(self, listed: str) -> tuple[str, str] | tuple[()]:
        """The user message before and after the payload, rendered once per criteria set
        (the rest of the template does not change from case to case); () when the
        template does not place the payload exactly once, as it is."""
        marker = "\x00cycle-payload\x00"
        rendered = render_user(self.prompt, {"criteria": listed, "payload": marker})
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
        scope: CallScope = NO_SCOPE,
        trace: Sequence[TraceEvent] = (),
    ) -> LlmJudgement:
        ids = tuple(c.id for c in criteria)
        tens = frozenset(c.id for c in criteria if c.scale == 10)
        messages = self.messages(criteria, input=input, output=output, expected=expected,
                                 trace=trace)
        try:
            out = await self.model.generate_structured(
                messages, verdict_model(ids, tens), name=SCHEMA_NAME, config=self.config, iteration=iteration,
                role="judge", scope=scope,
            )
        except StructuredOutputError as e:
            raise JudgeError(f"the judge's verdict was malformed after a repair: {e.message}") from e
        return LlmJudgement(verdicts=_read(out.parsed, ids, tens), usage=out.usage, cost=out.cost)


def _read(parsed: Any, ids: Sequence[str], tens: frozenset[str] = frozenset()
          ) -> dict[str, LlmVerdict]:
    """The validated answer's verdicts by criterion id (validation checked them all),
    every score on 0-100 (a 0-10 score times ten)."""
    scores = parsed.verdicts
    return {cid: LlmVerdict(cid, float(getattr(scores, f"c{n}").score) * (10 if cid in tens else 1),
                            getattr(scores, f"c{n}").reasoning)
            for n, cid in enumerate(ids)}
