"""The improver: one structured LLM call per round that proposes prompt edits.

It sees the whole prompt (system, user template, parameters), the suite's
aggregates, the low-scoring cases (input, output, expected output and every
criterion's score and reasoning, cut to a token budget) and the suggestions
already tried and rejected, with the reasons. Its own prompt is a versioned
prompt in the store (id ``cycle-improver``), so it can be improved and rolled
back like any other.

The user message always ENDS with a fenced ```json block holding
``{"prompt", "aggregates", "low_cases", "rejected"}``: a real model reads the
instructions before it, the offline model reads the block.

With few-shot examples on (``improve.examples``) the improver may also propose an
``example`` edit, drawn from a case it is shown: a low case with a good expected answer,
or one of the cases that scored well (``examples.candidates`` in the block, never a
held-out case). The rules for them are added to its system message, and its answer's
schema gains the kind and ``source_case``; with examples off, its request is what it
always was. So with rubrics: a judge prompt that carries its criteria's rubrics
(``cycle judge improve``) shows them in the block, and the improver may propose a
``rubric`` edit of one, naming its ``criterion``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from cycle.errors import NotFoundError, StructuredOutputError
from cycle.prompts.template import render_system, render_user
from cycle.records import (
    IMPROVER_PROMPT_ID,
    PRIORITY_ORDER,
    EditType,
    Message,
    Priority,
    Prompt,
    RejectedSuggestion,
    Suggestion,
    SuggestionType,
)
from cycle.records.scope import NO_SCOPE, CallScope
from cycle.records.transcript import cut, has_behaviour, tool_error_turns, transcript_lines

if TYPE_CHECKING:
    from cycle.llm.model import Model
    from cycle.records import RunResult
    from cycle.store import Store

#: schema name the offline model recognises (contracts section 2)
SCHEMA_NAME = "cycle_improver"
#: characters per token, for the context budget (a rough, model-independent rule)
CHARS_PER_TOKEN = 4

DEFAULT_SYSTEM = """\
You are a prompt engineer. You improve the prompt of an LLM application using \
evidence from an evaluation: the cases it scored low on, the judge's reasoning \
per criterion, what the assistant did (a transcript of its tool calls and, in a \
conversation, its turns; failed_turns names the turns where a tool or a criterion \
failed), and edits that were already tried and rejected.

Rules:
- Propose a few focused edits (at most {{ max_suggestions }}), most important first.
- Each edit names its type: system_prompt, user_prompt, parameters, or \
tool_description (then "tool" names the tool, and current_value quotes its description).
- current_value must be an exact quote of the text to replace (empty to append \
a new paragraph); suggested_value is the replacement text.
- For parameters, suggested_value is a JSON object merged into the parameters, \
e.g. {"temperature": 0.2}.
- Keep template variables such as {{ '{{ input }}' }} intact in the user template.
- Do not repeat a rejected edit; learn from why it was rejected.
- target_cases lists the ids of the cases the edit should fix."""

DEFAULT_USER_TEMPLATE = """\
The prompt under test is "{{ prompt.id }}". Overall score: {{ aggregates.score }} \
(0-100; pass threshold {{ aggregates.pass_threshold }}).
{{ low_cases | length }} case(s) scored below {{ low_score }}; \
{{ rejected | length }} earlier suggestion(s) were rejected.

Study the data below (the prompt, the aggregates, the low-scoring cases with the \
judge's verdicts, the rejected suggestions) and answer with suggestions that will \
raise the score on these cases without breaking the others."""


#: the rules for few-shot examples, added to the improver's system message when they are on
EXAMPLE_RULES = """\
Few-shot examples: the prompt may hold at most {most} examples (an input and its ideal \
output, sent as a user and an assistant turn before the real user message); \
prompt.examples lists those it has. An edit of type example adds, replaces or removes one:
- To add one, leave current_value empty, set source_case to the id of the case it is \
drawn from and suggested_value to the ideal output: that case's expected answer when it \
is good, or its output when it scored well (examples.candidates lists cases that did). \
Its input is taken from that case.
- To replace one, quote its output in current_value; to remove one, also leave \
suggested_value empty.
- Draw only from the cases shown here; prefer answers that show what the low cases miss."""

#: the rules for rubric edits, added to the improver's system message when the prompt under
#: improvement carries its criteria's rubrics (the judge prompt, in cycle judge improve)
RUBRIC_RULES = """\
Rubrics: this prompt is a judge's, and prompt.rubrics holds the rubric of each criterion it \
judges (what it is told to look for on that criterion), by criterion id. An edit of type \
rubric changes one: "criterion" names it, current_value quotes the text of its rubric to \
replace (empty: append a sentence), suggested_value is the new text. Put a rule that \
concerns one criterion in that criterion's rubric, and one that concerns several in the \
system prompt."""

#: appended to the improver's system prompt when the cycle's objective is cost
COST_RULES = """\
Objective: cost, not score. This cycle looks for the cheapest prompt whose score is not \
worse than now by more than {margin:g} points (0-100). What the agent spends now is in \
cost: dollars, input and output tokens and model calls per case. Propose edits that make \
each case cheaper to run: a shorter system prompt or template (cut repetition, \
boilerplate and instructions the cases shown do not need), fewer or shorter few-shot \
examples, answers asked to be shorter, fewer tool calls, a lower max_tokens in \
parameters. Do not add text unless it removes more (for example one rule that replaces \
three). The cases are shown lowest score first: keep what they need to score as they do."""


def default_improver_prompt() -> Prompt:
    """The built-in improver prompt, saved to the store as ``cycle-improver`` on first use."""
    return Prompt(
        id=IMPROVER_PROMPT_ID,
        system=DEFAULT_SYSTEM,
        user_template=DEFAULT_USER_TEMPLATE,
        params={"temperature": 0.2},
        metadata={"builtin": True},
    )


def ensure_improver_prompt(store: Store, ref: str = IMPROVER_PROMPT_ID) -> tuple[Prompt, str]:
    """The improver prompt at ``ref`` (default: head of ``cycle-improver``), and its version.

    The built-in prompt is saved as the first version when the store has none.
    """
    try:
        version = store.resolve(ref)
    except NotFoundError:
        if ref.split("@", 1)[0] != IMPROVER_PROMPT_ID:
            raise
        from cycle.authors import LOOP, on_behalf

        # cycle's own text, saved by cycle for whoever's command needed it
        version = store.save_version(
            default_improver_prompt(), source="initial", message="built-in improver prompt",
            author=on_behalf(LOOP),
        )
    return version.prompt, version.version


# -- what the improver sees ----------------------------------------------------


class CriterionVerdict(BaseModel):
    """One criterion's verdict on a low-scoring case."""

    criterion: str
    score: float | None = None
    reasoning: str = ""


class LowCase(BaseModel):
    """A case that scored below the low-score line, with its representative iteration."""

    id: str
    input: Any = None
    output: str = ""
    expected: Any = None
    score: float | None = None
    verdicts: list[CriterionVerdict] = Field(default_factory=list)
    #: what the assistant did (tool calls, results, state), when it did more than answer
    transcript: list[str] = Field(default_factory=list)
    #: the turns (from 1) where a tool failed or a criterion judged on every turn failed
    failed_turns: list[int] = Field(default_factory=list)


class ExemplarCase(BaseModel):
    """A case that scored well: its output may become a few-shot example."""

    id: str
    input: Any = None
    output: str = ""
    score: float | None = None


class ExamplesBrief(BaseModel):
    """What the improver is told of few-shot examples when it may propose them."""

    #: the most examples the prompt may hold (improve.examples.max)
    max: int
    #: improvement cases that scored well, best first (never a held-out case)
    candidates: list[ExemplarCase] = Field(default_factory=list)


class CostBrief(BaseModel):
    """What the improver is told when the cycle's objective is cost (improve.objective)."""

    #: points of score a cheaper prompt may lose at most
    margin: float
    #: the incumbent's mean agent dollars, input and output tokens, and calls per case
    cost_per_case: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    calls: float = 0.0
    #: the prompt's length in words
    words: int = 0


class ImproverInput(BaseModel):
    """Everything one improver call sees."""

    prompt: Prompt
    aggregates: dict[str, Any] = Field(default_factory=dict)
    low_cases: list[LowCase] = Field(default_factory=list)
    rejected: list[RejectedSuggestion] = Field(default_factory=list)
    #: the score below which cases were selected
    low_score: float = 70.0
    #: a merge's conflicts to resolve (cycle.loop.merging.conflict_note); None: no merge
    merge: dict[str, Any] | None = None
    #: few-shot examples may be proposed (improve.examples); None: they are off
    examples: ExamplesBrief | None = None
    #: the cycle's objective is cost (improve.objective); None: score
    cost: CostBrief | None = None

    def data(self) -> dict[str, Any]:
        """The JSON block the message ends with (contracts section 2)."""
        return {
            "prompt": {
                "id": self.prompt.id,
                "system": self.prompt.system,
                "user_template": self.prompt.user_template,
                "params": self.prompt.params,
                **({"tools": [{"name": t.name, "description": t.description,
                               "parameters": t.parameters} for t in self.prompt.tools]}
                   if self.prompt.tools else {}),
                **({"examples": [e.canonical() for e in self.prompt.examples]}
                   if self.prompt.examples else {}),
                **({"rubrics": dict(self.prompt.rubrics)} if self.prompt.rubrics else {}),
            },
            "aggregates": self.aggregates,
            "low_cases": [c.model_dump(mode="json") for c in self.low_cases],
            # a criterion only where one was named: the block of any other cycle stays
            # byte for byte what it was (cached answers and recorded journals still match)
            "rejected": [r.model_dump(mode="json", exclude=None if r.criterion else {"criterion"})
                         for r in self.rejected],
            **({"merge": self.merge} if self.merge is not None else {}),
            **({"examples": self.examples.model_dump(mode="json")}
               if self.examples is not None else {}),
            **({"cost": self.cost.model_dump(mode="json")} if self.cost is not None else {}),
        }


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 15)] + " ...[truncated]"


def _cut_value(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return _cut(value, limit)
    if value is None or isinstance(value, (int, float, bool)):
        return value
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= limit else _cut(text, limit)


def _head_tail(lines: list[str], budget: int) -> list[str]:
    """The first and last lines within ``budget`` characters, the middle left out."""
    head: list[str] = []
    tail: list[str] = []
    used = 0
    for i in range(len(lines) // 2):
        a, b = lines[i], lines[-1 - i]
        if used + len(a) + len(b) > budget:
            break
        head.append(a)
        tail.insert(0, b)
        used += len(a) + len(b)
    return [*head, f"[... {len(lines) - len(head) - len(tail)} events left out ...]", *tail]


def _by_turn(lines: list[str]) -> list[list[str]]:
    """A transcript's lines grouped by turn: each user message starts one."""
    turns: list[list[str]] = []
    for line in lines:
        if line.startswith("user: ") or not turns:
            turns.append([])
        turns[-1].append(line)
    return turns


def _fit_turns(turns: list[list[str]], failed: list[int], limit: int) -> list[str]:
    """A transcript within about ``2 * limit`` characters that keeps the turns where
    criteria failed. Each line is cut; when the whole still does not fit, whole turns
    are left out, with a marker naming them: the failed turns are always kept, then the
    first, the last, and the others from the end back while they fit. A single turn too
    long keeps its first and last events."""
    cut_turns = [[cut(line, max(80, limit // 4)) for line in t] for t in turns]
    if len(cut_turns) > 1:  # number the turns, so "failed_turns" can be read against them
        for n, t in enumerate(cut_turns, start=1):
            if t and t[0].startswith("user: "):
                t[0] = f"user (turn {n}): {t[0][6:]}"
    budget = limit * 2
    sizes = [sum(len(x) for x in t) for t in cut_turns]
    if sum(sizes) <= budget:
        return [x for t in cut_turns for x in t]
    if len(cut_turns) == 1:
        return _head_tail(cut_turns[0], budget)
    last = len(cut_turns) - 1
    must = [n - 1 for n in failed if 0 < n <= len(cut_turns)]
    keep = set(must)
    used = sum(sizes[i] for i in keep)
    for i in [0, last, *range(last - 1, 0, -1)]:
        if i not in keep and used + sizes[i] <= budget:
            keep.add(i)
            used += sizes[i]
    out: list[str] = []
    skipped: list[int] = []
    for i, t in enumerate(cut_turns):
        if i in keep:
            if skipped:
                out.append(_left_out(skipped))
                skipped = []
            out.extend(t)
        else:
            skipped.append(i + 1)
    if skipped:
        out.append(_left_out(skipped))
    return out


def _left_out(turns: list[int]) -> str:
    span = f"turn {turns[0]}" if len(turns) == 1 else f"turns {turns[0]}-{turns[-1]}"
    return f"[... {span} left out ...]"


def fit_cases(cases: Iterable[LowCase], *, max_tokens: int) -> list[LowCase]:
    """The lowest-scoring cases first, each field cut, as many as fit the token budget.

    The budget is counted as ``len(json) / 4`` characters per token. At least
    one case is kept (cut harder) so that the improver always has evidence.
    """
    budget = max_tokens * CHARS_PER_TOKEN
    ordered = sorted(cases, key=lambda c: (c.score if c.score is not None else -1.0, c.id))
    if not ordered:
        return []
    # a field may take at most a quarter of the budget shared by up to 8 cases
    field_limit = max(200, budget // (4 * min(len(ordered), 8)))
    kept: list[LowCase] = []
    used = 0
    for case in ordered:
        fitted = LowCase(
            id=case.id,
            input=_cut_value(case.input, field_limit),
            output=_cut(case.output, field_limit),
            expected=_cut_value(case.expected, field_limit),
            score=case.score,
            verdicts=[
                CriterionVerdict(criterion=v.criterion, score=v.score, reasoning=_cut(v.reasoning, field_limit))
                for v in case.verdicts
            ],
            transcript=_fit_turns(_by_turn(case.transcript), case.failed_turns, field_limit),
            failed_turns=case.failed_turns,
        )
        size = len(fitted.model_dump_json())
        if kept and used + size > budget:
            break
        kept.append(fitted)
        used += size
    return kept


# -- what it answers -------------------------------------------------------------


class SuggestionDraft(BaseModel):
    """One suggestion as the improver model writes it."""

    type: EditType
    tool: str = Field("", description="For tool_description: the tool's name.")
    priority: Priority = "medium"
    current_value: str = Field("", description="Exact text to replace; empty to append.")
    suggested_value: str = Field(description="Replacement text (a JSON object for parameters).")
    reasoning: str = ""
    expected_improvement: str = ""
    target_cases: list[str] = Field(default_factory=list)


class ImproverOutput(BaseModel):
    """The improver's structured answer."""

    suggestions: list[SuggestionDraft] = Field(description="The proposed edits, most important first.")


class ExampleDraft(SuggestionDraft):
    """One suggestion, when few-shot examples may be proposed too."""

    type: SuggestionType  # type: ignore[assignment]
    source_case: str = Field("", description="For example: the id of the case it is drawn from.")


class ImproverOutputWithExamples(BaseModel):
    """The improver's structured answer, when few-shot examples may be proposed too."""

    suggestions: list[ExampleDraft] = Field(description="The proposed edits, most important first.")


class RubricDraft(SuggestionDraft):
    """One suggestion, when the prompt carries its criteria's rubrics (a judge prompt)."""

    type: Literal[EditType, "rubric"]  # type: ignore[assignment,valid-type]
    criterion: str = Field("", description="For rubric: the id of the criterion it edits.")


class ImproverOutputWithRubrics(BaseModel):
    """The improver's structured answer, when rubric edits may be proposed too."""

    suggestions: list[RubricDraft] = Field(description="The proposed edits, most important first.")


#: the improver's answer schemas
Answer = ImproverOutput | ImproverOutputWithExamples | ImproverOutputWithRubrics


def answer_schema(inp: ImproverInput) -> type[Answer]:
    """What the improver may answer: the kinds of edit it is told of. Without examples or
    rubrics the schema is what it always was (cached answers and recorded journals still
    match)."""
    if inp.prompt.rubrics:
        return ImproverOutputWithRubrics
    return ImproverOutput if inp.examples is None else ImproverOutputWithExamples


class Improver:
    """Builds the improver call from a round's evidence and returns Suggestions."""

    def __init__(
        self,
        model: Model,
        *,
        prompt: Prompt | None = None,
        version: str | None = None,
        max_suggestions: int = 5,
    ) -> None:
        self.model = model
        self.prompt = prompt or default_improver_prompt()
        self.version = version
        self.max_suggestions = max_suggestions

    @property
    def offline(self) -> bool:
        """The suggestions come from the offline (or scripted) model: reports say so."""
        return self.model.offline

    def messages(self, inp: ImproverInput) -> list[Message]:
        """The system message and the user message ending with the ```json block."""
        variables = {
            **inp.data(),
            "low_score": inp.low_score,
            "max_suggestions": self.max_suggestions,
        }
        system = render_system(self.prompt, variables)
        if inp.examples is not None:
            system = f"{system.rstrip()}\n\n{EXAMPLE_RULES.format(most=inp.examples.max)}"
        if inp.prompt.rubrics:
            system = f"{system.rstrip()}\n\n{RUBRIC_RULES}"
        if inp.cost is not None:  # off, the request is byte for byte what it was
            system = f"{system.rstrip()}\n\n{COST_RULES.format(margin=inp.cost.margin)}"
        instructions = render_user(self.prompt, variables).rstrip()
        block = json.dumps(inp.data(), indent=2, ensure_ascii=False, default=str)
        user = f"{instructions}\n\n```json\n{block}\n```"
        return [Message.system(system), Message.user(user)]

    async def propose(self, inp: ImproverInput, *, scope: CallScope = NO_SCOPE
                      ) -> list[Suggestion]:
        """One structured call; suggestions sorted by priority, at most ``max_suggestions``."""
        schema = answer_schema(inp)
        out = await self.model.generate_structured(
            self.messages(inp), schema, name=SCHEMA_NAME, role="improver", scope=scope,
        )
        parsed = out.parsed
        try:
            result = parsed if isinstance(parsed, schema) else schema.model_validate(parsed)
        except ValidationError as e:
            raise StructuredOutputError(f"the improver's answer does not follow its schema: {e}") from e
        drafts = sorted(result.suggestions, key=lambda d: PRIORITY_ORDER[d.priority])
        return [Suggestion(**d.model_dump()) for d in drafts[: self.max_suggestions]]


# -- evidence from a run ------------------------------------------------------------


def low_cases(result: RunResult, *, below: float) -> list[LowCase]:
    """Cases whose mean score is below ``below``, each with its representative iteration
    (closest to the case mean) and that iteration's verdicts.

    Errored iterations are left out: an error is not a low score, and a case
    that only errored is not shown to the improver.
    """
    out: list[LowCase] = []
    for case_id, mean in result.case_means.items():
        if mean >= below:
            continue
        stats = result.cases[case_id]
        rep = stats.representative
        if rep is None:
            continue
        info = result.case_info.get(case_id, {})
        out.append(LowCase(
            id=case_id,
            input=rep.input if rep.input is not None else info.get("input"),
            output=rep.output,
            expected=info.get("expected"),
            score=round(stats.mean, 2),
            verdicts=[
                CriterionVerdict(criterion=v.criterion_id, score=v.score, reasoning=v.reasoning)
                for v in rep.verdicts
            ],
            transcript=transcript_lines(rep.trace) if has_behaviour(rep.trace) else [],
            failed_turns=sorted({*tool_error_turns(rep.trace), *(
                n for v in rep.verdicts for n in v.failed_turns)}),
        ))
    return out


def exemplar_cases(result: RunResult, *, at_least: float, held_out: Iterable[str] = (),
                   most: int = 4, max_chars: int = 1200) -> list[ExemplarCase]:
    """The cases whose mean score is at least ``at_least`` (never a held-out one), best
    first, each with its representative output: where a good few-shot example comes from.
    Each field is cut to ``max_chars``."""
    hidden = frozenset(held_out)
    ranked = sorted(((mean, case_id) for case_id, mean in result.case_means.items()
                     if mean >= at_least and case_id not in hidden), key=lambda x: (-x[0], x[1]))
    out: list[ExemplarCase] = []
    for mean, case_id in ranked:
        rep = result.cases[case_id].representative
        if rep is None or not rep.output.strip():
            continue
        info = result.case_info.get(case_id, {})
        out.append(ExemplarCase(
            id=case_id, input=_cut_value(rep.input if rep.input is not None else info.get("input"),
                                         max_chars),
            output=_cut(rep.output, max_chars), score=round(mean, 2)))
        if len(out) >= most:
            break
    return out


def aggregates(result: RunResult) -> dict[str, Any]:
    """The suite's figures the improver sees, with each criterion's mean score."""
    suite = result.suite

    def r2(x: float | None) -> float | None:
        return None if x is None else round(x, 2)

    return {
        "score": r2(suite.score.mean),
        "ci_low": r2(suite.score.ci_low),
        "ci_high": r2(suite.score.ci_high),
        "pass_rate": r2(suite.pass_rate),
        "pass_threshold": result.threshold,
        "cases": suite.cases,
        "passed": suite.passed,
        "failed": suite.failed,
        "errors": suite.errors,
        "criteria": {k: r2(v) for k, v in sorted(result.source.criterion_means().items())},
    }
