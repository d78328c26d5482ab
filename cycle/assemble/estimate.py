"""What a run or a cycle will cost, before anything is sent (``--dry-run``).

Every figure is a range. The low end is the prompts alone: each case's messages as
rendered, at four bytes a token, one model call per user turn (no tool steps), and
answers of no length. The high end is what the budget reserves: a token a byte (a bound
for any script, see ``cycle.llm.model.message_bytes``), every tool step the step limit allows, and every answer at the call's
``max_tokens`` (or ``RESERVED_OUTPUT``). A call the response cache already answered is
free and counted apart: for a plain case (no tools, one turn) the agent's call and the
judge's (each member's, for a judge panel: each makes every judge call) are looked up
exactly, with the cached answer in the judge's message. A cycle's
evaluations draw fresh samples (see ``cycle.loop.core``), so only ``cycle run`` can hit
the cache.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from msgspec import Struct, field

from cycle.agents.agent import generate_config, prompt_messages
from cycle.assemble.config import LoadedConfig
from cycle.assemble.improve import ImproveConfig
from cycle.assemble.suite import agent_model_name, judge_models, price_table
from cycle.cases import SimulatedUser, TestCase
from cycle.improve.improver import default_improver_prompt
from cycle.judge.criteria import Criterion, merge, resolve
from cycle.judge.llm_judge import JUDGE_PROMPT, SCHEMA_NAME, LlmJudge, verdict_model
from cycle.llm.base import GenerateConfig, Usage
from cycle.llm.cache import ResponseCache, cache_key
from cycle.llm.http import safe_url
from cycle.llm.model import RESERVED_OUTPUT, message_bytes, structured_config
from cycle.llm.pricing import PriceTable
from cycle.llm.providers import batch_price
from cycle.loop.stop import StopCondition, max_rounds_of
from cycle.records import Prompt
from cycle.words import plural

#: UTF-8 bytes a token, at the low and at the high end (the budget's worst case: 1)
LOW_CHARS, HIGH_CHARS = 4, 1


def _free(model: str) -> bool:
    from cycle.errors import ConfigError
    from cycle.llm.providers import is_offline

    try:
        return is_offline(model)
    except ConfigError:  # an unknown provider: priced by the fallback, as it says
        return False


class Line(Struct):
    """The calls of one role on one model."""

    role: str
    model: str
    #: each figure at its three ends: low, high, likely (what a run most likely takes)
    calls: list[int] = field(default_factory=lambda: [0, 0, 0])
    cached: int = 0
    input_tokens: list[int] = field(default_factory=lambda: [0, 0, 0])
    output_tokens: list[int] = field(default_factory=lambda: [0, 0, 0])
    cost: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    estimated_price: bool = False

    def add(self, prices: PriceTable, low: tuple[int, int, int], high: tuple[int, int, int],
            times: int = 1, likely: tuple[int, int, int] | None = None) -> None:
        """``times`` calls (low: (calls, input, output) tokens; high and likely: the
        same; likely defaults to low)."""
        for end, (calls, inp, out) in enumerate((low, high, likely or low)):
            self.calls[end] += calls * times
            self.input_tokens[end] += inp * times
            self.output_tokens[end] += out * times
            if _free(self.model):  # the offline model costs nothing: no fallback price
                continue
            cost = prices.cost(self.model, Usage(input_tokens=inp, output_tokens=out))
            self.cost[end] += cost.usd * times
            self.estimated_price |= cost.estimated and inp + out > 0


class Estimate(Struct):
    """The lines of a run (or a cycle), and what the figures assume."""

    lines: list[Line]
    notes: list[str] = field(default_factory=list)

    @property
    def cost(self) -> tuple[float, float]:
        return sum(x.cost[0] for x in self.lines), sum(x.cost[1] for x in self.lines)

    @property
    def likely(self) -> float:
        """The cost a run most likely has (typical answers, the prompts as sent)."""
        return sum(x.cost[2] for x in self.lines)

    @property
    def calls(self) -> tuple[int, int]:
        return sum(x.calls[0] for x in self.lines), sum(x.calls[1] for x in self.lines)

    def as_dict(self) -> dict[str, object]:
        return {
            "dry_run": True, "cost": list(self.cost), "likely_cost": self.likely,
            "calls": list(self.calls), "likely_basis": LIKELY,
            "cached": sum(x.cached for x in self.lines), "notes": self.notes,
            "lines": [{"role": x.role, "model": x.model, "calls": x.calls[:2],
                       "cached": x.cached, "likely_calls": x.calls[2],
                       "input_tokens": x.input_tokens[:2], "output_tokens": x.output_tokens[:2],
                       "cost": x.cost[:2], "likely_cost": x.cost[2],
                       "estimated_price": x.estimated_price}
                      for x in self.lines],
        }

    def table(self) -> str:
        """The estimate as the console shows it."""
        def span(pair: Sequence[float], money: bool = False) -> str:
            shown = [f"${v:,.4f}" if money else f"{v:,.0f}" for v in pair]
            return shown[0] if shown[0] == shown[1] else f"{shown[0]}-{shown[1]}"

        rows = [("role", "model", "calls", "cached", "input tokens", "output tokens",
                 "cost (USD)", "likely")]
        for x in self.lines:
            rows.append((x.role, x.model, span(x.calls[:2]), str(x.cached),
                         span(x.input_tokens[:2]), span(x.output_tokens[:2]),
                         span(x.cost[:2], True) + (" (est.)" if x.estimated_price else ""),
                         f"${x.cost[2]:,.4f}"))
        rows.append(("total", "", span(self.calls), str(sum(x.cached for x in self.lines)),
                     "", "", span(self.cost, True), f"${self.likely:,.4f}"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        return "\n".join([*lines, "", LEGEND, *self.notes])


#: what the likely figure assumes
LIKELY = ("the prompts at 4 bytes a token, one call a turn, answers of typical length: "
          "the store's mean for that role and model when it has one, else 250 tokens an "
          "agent answer (at most max_tokens), 60 a criterion judged, 40 a simulated user's "
          "turn, 800 an improver's answer")

LEGEND = ("low: the prompts alone (4 bytes a token, no tool steps, empty answers); high: "
          "what the budget reserves (a token a byte, every tool step, every answer at "
          "max_tokens or 4,096 tokens); likely: " + LIKELY + ". Cached calls are free.")

#: typical answer lengths (tokens) when the store has none for the role and model
TYPICAL = {"agent": 250, "judge": 60, "user": 40, "improver": 800}


class _Evaluation:
    """One pass over the cases: the agent's, the simulated users' and the judge's calls."""

    def __init__(self, loaded: LoadedConfig, prompt: Prompt, cases: Sequence[TestCase],
                 prices: PriceTable, cache: ResponseCache | None,
                 typical: Mapping[tuple[str, str], float] | None = None) -> None:
        self.loaded, self.prompt, self.cases, self.prices = loaded, prompt, cases, prices
        self.cache = cache
        #: (role, model) -> mean output tokens of its earlier calls in the store
        self.typical = dict(typical or {})
        self.agent_name = agent_model_name(loaded, prompt) or ""
        #: the judge's model, or each member of a panel: each makes every judge call
        self.judge_names = judge_models(loaded, prompt)
        # as Model.generate merges them into the model's (default) config: the cache key's
        self.config = GenerateConfig().merged(generate_config(prompt.params))
        self.max_out = self.config.max_tokens or RESERVED_OUTPUT
        self.steps = loaded.config.tools.max_steps if prompt.tools else 1
        self.judge = LlmJudge(None, JUDGE_PROMPT)  # type: ignore[arg-type]  # only for messages
        self.judge_out = JUDGE_PROMPT.params.get("max_tokens") or RESERVED_OUTPUT

    def add(self, lines: dict[tuple[str, str], Line], iterations: int, *, fresh: bool) -> None:
        def line(role: str, model: str) -> Line:
            return lines.setdefault((role, model), Line(role, model))

        suite = self.loaded.config.criteria
        threshold = self.loaded.config.pass_threshold
        for case in self.cases:
            messages = prompt_messages(self.prompt, case)
            chars = message_bytes(messages, self.prompt.tools)
            turns = 1 + (len(case.conversation.user_turns()) if case.conversation else 0)
            if case.conversation and case.conversation.user is not None:
                turns = case.conversation.max_turns
            criteria = [resolve(c, threshold=threshold) for c in merge(suite, case.criteria)]
            llm = [c for c in criteria if c.kind == "llm"]
            # per-turn criteria: one judge call a turn; the others: one call in all
            judged = (turns if any(c.per_turn for c in llm) else 0) + (
                1 if any(not c.per_turn for c in llm) else 0)
            empty = message_bytes(self.judge.messages(llm, input=case.input, output="",
                                                      expected=case.expected)) if llm else 0
            judge_config = self._judge_config(llm) if llm and self.cache is not None else None
            for iteration in range(iterations):
                answer = None
                if self.agent_name:  # an endpoint's or a function's calls: not cycle's
                    if not fresh and self.cache is not None and turns == 1 \
                            and not self.prompt.tools:
                        answer = self.cache.get(cache_key(self.agent_name, messages, [],
                                                          self.config, iteration, None))
                    if answer is not None:
                        line("agent", self.agent_name).cached += 1
                    else:
                        self._agent(line("agent", self.agent_name), chars, turns)
                simulated = case.conversation.user if case.conversation else None
                if isinstance(simulated, SimulatedUser):
                    said = self.out("user", simulated.model)
                    line("user", simulated.model).add(
                        self.prices, (turns - 1, chars // LOW_CHARS, 0),
                        (turns - 1, chars // HIGH_CHARS + turns * self.max_out, self.max_out),
                        likely=(turns - 1, (turns - 1) * (chars // LOW_CHARS),
                                (turns - 1) * said))
                if not llm:
                    continue
                sent = None
                if answer is not None and judged == 1 and judge_config is not None:
                    sent = self.judge.messages(llm, input=case.input, output=answer.text,
                                               expected=case.expected)
                answer_tokens = self.out("agent", self.agent_name) * turns
                for name in self.judge_names:  # a panel: every member judges every case
                    judge = line("judge", name)
                    if sent is not None and self.cache.get(cache_key(  # type: ignore[union-attr]
                            name, sent, [], judge_config, iteration, None)) is not None:
                        judge.cached += 1
                        continue
                    judge.add(self.prices, (judged, empty // LOW_CHARS, 0),
                              (judged, empty // HIGH_CHARS + turns * self.steps * self.max_out,
                               self.judge_out),
                              likely=(judged, judged * (empty // LOW_CHARS + answer_tokens),
                                      judged * self.out("judge", name, each=len(llm))))

    def compare(self, lines: dict[tuple[str, str], Line], iterations: int, *,
                times: int = 1) -> None:
        """``times`` comparisons of two versions on the pairwise criteria (cycle.loop.
        preference): each case's ``iterations`` pairs, each judged twice (both orders), a
        call each, carrying both versions' answers."""
        from cycle.judge.pairwise import request

        pairwise = [resolve(c, threshold=self.loaded.config.pass_threshold)
                    for c in self.loaded.config.criteria if c.pairwise]
        if not pairwise or not self.judge_names:
            return
        name = self.judge_names[0]  # a panel is refused with pairwise criteria
        line = lines.setdefault(("judge", name), Line("judge", name))
        said = self.out("agent", self.agent_name)
        for case in self.cases:
            for c in pairwise:
                empty = message_bytes(request(c.id, c.description, case.input, case.expected,
                                              "", ""))
                calls = 2 * iterations
                line.add(self.prices, (calls, calls * (empty // LOW_CHARS), 0),
                         (calls, calls * (empty // HIGH_CHARS + 2 * self.max_out),
                          calls * RESERVED_OUTPUT),
                         times=times,
                         likely=(calls, calls * (empty // LOW_CHARS + 2 * said),
                                 calls * TYPICAL["judge"]))

    def _judge_config(self, llm: Sequence[Criterion]) -> GenerateConfig:
        """The judge's call config for these criteria, as its cache key sees it."""
        ids = tuple(c.id for c in llm)
        tens = frozenset(c.id for c in llm if c.scale == 10)
        return structured_config(GenerateConfig().merged(self.judge.config),
                                 verdict_model(ids, tens), SCHEMA_NAME)[0]

    def _agent(self, agent: Line, chars: int, turns: int) -> None:
        """One iteration of a case: at least a call a turn, at most the step limit's;
        likely a call a turn, each carrying the answers before it."""
        calls = turns * self.steps
        # the k-th call carries everything answered before it
        grown = sum(k * self.max_out for k in range(calls))
        said = self.out("agent", agent.model)
        agent.add(self.prices, (turns, turns * (chars // LOW_CHARS), 0),
                  (calls, calls * (chars // HIGH_CHARS + 1) + grown, calls * self.max_out),
                  likely=(turns, turns * (chars // LOW_CHARS) + sum(k * said for k in range(turns)),
                          turns * said))

    def out(self, role: str, model: str, *, each: int = 1) -> int:
        """Typical output tokens of one call: the store's mean for the role and model,
        else ``TYPICAL`` (an agent's at most its max_tokens; a judge's per criterion)."""
        known = self.typical.get(("user_sim" if role == "user" else role, model))
        if known is not None:
            return round(known)
        typical = TYPICAL[role] * each
        return min(typical, self.max_out) if role == "agent" else typical


def own_agent(loaded: LoadedConfig) -> list[str]:
    """The note of an agent whose model calls cycle neither makes nor sees (an HTTP
    endpoint, a Python function): none of its lines, whose model name was '' (a dry run
    refused with "model name '' must have the form provider:model")."""
    spec = loaded.config.agent_config
    what = (f"the HTTP endpoint {safe_url(spec.http)}" if spec.http
            else f"the Python function {spec.function}" if spec.function else None)
    return [] if what is None else [
        f"agent: {what} makes its own calls, which cycle does not see: not counted here"]


def estimate_run(loaded: LoadedConfig, prompt: Prompt, cases: Sequence[TestCase], *,
                 cache: ResponseCache | None,
                 typical: Mapping[tuple[str, str], float] | None = None) -> Estimate:
    """A ``cycle run``: every case, run.iterations times; cached calls are free.
    ``typical``: (role, model) -> mean output tokens of the store's earlier calls."""
    lines: dict[tuple[str, str], Line] = {}
    _Evaluation(loaded, prompt, cases, price_table(loaded), cache, typical).add(
        lines, loaded.config.run.iterations, fresh=False)
    return _batched(Estimate(list(lines.values()), own_agent(loaded)),
                    batch=loaded.config.run.batch)


def _batched(estimate: Estimate, *, batch: bool) -> Estimate:
    """With batch jobs, the evaluations' calls at their providers' batch prices (the
    improver's call stays live)."""
    if not batch:
        return estimate
    for line in estimate.lines:
        share = batch_price(line.model) if line.role != "improver" else 1.0
        line.cost = [c * share for c in line.cost]
    estimate.notes.append("batch jobs: the evaluations' calls at the providers' batch prices "
                          "(half); a call a job cannot answer goes live, at the full price")
    return estimate


def estimate_cycle(loaded: LoadedConfig, prompt: Prompt, cases: Sequence[TestCase],
                   improve: ImproveConfig, stop: StopCondition,
                   typical: Mapping[tuple[str, str], float] | None = None) -> Estimate:
    """A ``cycle improve``. Low: the baseline alone (the cycle may stop at once).
    High: the baseline; per round (improve.stop's max_rounds) the improver's call and the
    candidate's evaluation; the confirmation's two evaluations; and for each round and the
    confirmation a second look at both versions grown to ``improve.max_iterations``; with
    pairwise criteria, each of those comparisons' judge calls. Every evaluation is a fresh
    sample: nothing is cached."""
    prices = price_table(loaded)
    iterations = loaded.config.run.iterations
    evaluation = _Evaluation(loaded, prompt, cases, prices, None, typical)
    notes = own_agent(loaded)
    rounds = max_rounds_of(stop)
    if rounds is None:
        rounds = 1
        notes.append("improve.stop has no max_rounds: the high end is for one round; "
                     "the other stop conditions bound the rest (max_cost caps the spend)")
    low: dict[tuple[str, str], Line] = {}
    high: dict[tuple[str, str], Line] = {}
    likely: dict[tuple[str, str], Line] = {}  # the baseline and each round's candidate
    evaluation.add(low, iterations, fresh=True)
    evaluation.add(high, iterations * (1 + rounds + 2), fresh=True)
    evaluation.add(likely, iterations * (1 + rounds), fresh=True)
    more = (improve.max_iterations or 2 * iterations) - iterations
    if more > 0:  # every comparison may look again, both versions grown
        evaluation.add(high, 2 * more * (rounds + 1), fresh=True)
    population = improve.population
    if population > 1:
        # each candidate's screen: screen_cases cases once. At most one iteration of the
        # whole suite each (the high end holds whichever cases a screen draws); likely,
        # its share of the suite
        evaluation.add(high, population * rounds, fresh=True)
        share = min(improve.screen_cases, len(cases)) / max(1, len(cases))
        if round(population * rounds * share):
            evaluation.add(likely, round(population * rounds * share), fresh=True)
        notes.append(f"improve.population {population}: {population} improver calls and "
                     f"{population} screens of {min(improve.screen_cases, len(cases))} cases "
                     "a round")
    if any(c.pairwise for c in loaded.config.criteria):
        # each round's comparison and the confirmation's, each may look again grown
        grown = improve.max_iterations or 2 * iterations
        evaluation.compare(high, iterations, times=rounds + 1)
        evaluation.compare(high, grown, times=rounds + 1)
        evaluation.compare(likely, iterations, times=rounds)
        notes.append("pairwise criteria: each comparison of two versions judges every case's "
                     "iterations in both orders, a judge call each")
    name = loaded.config.improver or next(iter(evaluation.judge_names), "")
    own = default_improver_prompt()
    chars = sum(len(x.encode()) for x in (own.system, own.user_template, prompt.system,
                                          prompt.user_template))
    # low: the cycle stops after its baseline (target reached, nothing to improve)
    low.setdefault(("improver", name), Line("improver", name))
    high.setdefault(("improver", name), Line("improver", name)).add(
        prices, (0, 0, 0), (1, chars // HIGH_CHARS + improve.context_tokens, RESERVED_OUTPUT),
        times=rounds * population)
    likely.setdefault(("improver", name), Line("improver", name)).add(
        prices, (0, 0, 0), (0, 0, 0), times=rounds * population,
        likely=(1, chars // LOW_CHARS + improve.context_tokens // 2,
                round(evaluation.typical.get(("improver", name), TYPICAL["improver"]))))
    notes.append(f"likely: the baseline and {plural(rounds, 'round')}, each an improver call "
                 "and its candidate's evaluation (no second look, no confirmation)")
    return _batched(Estimate(_ends(low, high, likely), notes), batch=improve.batch)


def _ends(low: dict[tuple[str, str], Line], high: dict[tuple[str, str], Line],
          likely: dict[tuple[str, str], Line]) -> list[Line]:
    """One line a role and model: the low end from ``low``, the high end from ``high``,
    the likely figure from ``likely``."""
    out = []
    for key in dict.fromkeys([*low, *high, *likely]):
        line = Line(*key)
        for end, source in ((0, low.get(key)), (1, high.get(key)), (2, likely.get(key))):
            if source is not None:
                line.calls[end], line.cost[end] = source.calls[end], source.cost[end]
                line.input_tokens[end] = source.input_tokens[end]
                line.output_tokens[end] = source.output_tokens[end]
                line.estimated_price |= source.estimated_price
        out.append(line)
    return out
