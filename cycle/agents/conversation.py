"""One conversation driver for every agent kind.

The turn loop lives here, once: the first message, the scripted follow-ups and the
simulated user, the end conditions, ``max_turns`` and ``max_duration``, the tools
(mocks, passthrough, the user agents that answer tools asking the user) and what the
way a conversation ended means for passing (seed 003's outcome rules). An agent kind
only says how it takes one turn (``TurnAgent.take_turn``): the prompt on a model, a
Python function, an HTTP endpoint and an ADK agent each get the conversation so far
and the case's tools, and answer.

Every iteration's final trace event says why its conversation ended (``reason``),
which the JSON report, the Markdown transcript and the TUI show.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from msgspec import Struct, field

from cycle.agents.termination import ConversationState, holds
from cycle.agents.tools import Toolbox
from cycle.agents.users import FunctionUserPlayer, UserAgents, UserSimulator
from cycle.cases import ConversationSpec, FunctionUser, SimulatedUser, TestCase
from cycle.errors import EvalError
from cycle.llm.base import ModelOutput
from cycle.llm.model import Model
from cycle.mocks import DEFAULT_MAX_STEPS, MockSpec, UserAgentSpec
from cycle.prompts.template import render
from cycle.records import AgentResult, Message, ToolCall, ToolDef, TraceEvent, Usage
from cycle.records.scope import NO_SCOPE, CallScope

Verdict = Literal["judged", "pass", "fail"]


class Tally(Struct):
    """What the model calls (or the turns) of one iteration add up to."""

    usage: Usage
    model: str
    cost: float = 0.0
    latency: float = 0.0
    calls: list[ToolCall] = field(default_factory=list)

    def add(self, out: ModelOutput, trace: list[TraceEvent], started: float,
            agent: str | None = None) -> None:
        """Count one model call, and put its turn in the trace (``agent``: which of the
        agent's own agents made the call, where it has several)."""
        self.usage = self.usage + out.usage if self.usage.total_tokens else out.usage
        self.cost += out.cost
        self.latency += out.latency
        self.model = out.model or self.model
        self.calls += out.tool_calls
        trace.append(TraceEvent(kind="model", at=time.monotonic() - started, text=out.text,
                                tool_calls=out.tool_calls, usage=out.usage, cost=out.cost,
                                model=out.model or None, finish_reason=out.finish_reason or None,
                                agent=agent))


class Iteration(Struct):
    """One case iteration as the driver and the agent's turns share it."""

    case: TestCase
    iteration: int
    scope: CallScope
    started: float
    #: the conversation in chat form: the first messages, then each turn's answer and
    #: tool messages, and the user's next message (the last one when a turn starts)
    messages: list[Message]
    trace: list[TraceEvent]
    tally: Tally
    toolbox: Toolbox | None = None
    #: the user turn being answered (from 1)
    turn: int = 1
    #: model turns a user turn may take
    max_steps: int = DEFAULT_MAX_STEPS
    #: the last answer's structured form (a JSON answer of a function or endpoint)
    structured: Any = None
    #: the agent kind's own object for this iteration (ADK's session, a function's tools)
    session: Any = None

    @property
    def said(self) -> str:
        """What the user said last."""
        return self.messages[-1].content

    def scope_of_step(self, step: int) -> CallScope:
        """The scope of a model call: the first call of the first turn keeps the
        iteration's own, later ones add the turn and step."""
        if step == 0 and self.turn == 1:
            return self.scope
        return self.scope.at(turn=self.turn, step=step)

    def now(self) -> float:
        return time.monotonic() - self.started

    @property
    def state(self) -> dict[str, Any]:
        return self.toolbox.state if self.toolbox is not None else dict(self.case.state)


class _Ended(Struct):
    """How a conversation ended."""

    ending: Literal["completed", "terminated"]
    reason: str
    verdict: Verdict = "judged"
    output: str = ""


class TurnAgent:
    """An agent that takes one turn at a time; ``run`` drives the conversation.

    A subclass says what the first messages are (``opening``) and how it answers the
    last of them (``take_turn``), and may hold a session open around the turns
    (``begin`` / ``end``).
    """

    name: str
    offline: bool
    #: what the run's timeout says it waited on ("the HTTP endpoint http://..."), and
    #: whether that is a model's call (the timeout then tells the calls' latency)
    waited_on: str = "the agent"
    calls_models: bool = True

    def __init__(
        self,
        *,
        tools: Sequence[ToolDef] = (),
        mocks: Mapping[str, MockSpec] | None = None,
        functions: Mapping[str, Any] | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        user_model: Callable[[str], Model] | None = None,
        user_agents: Mapping[str, UserAgentSpec] | None = None,
    ) -> None:
        """``mocks``: how the tools answer (a case's own override these); ``max_steps``:
        model turns a user turn may take before the case ends as terminated;
        ``user_model``: makes the model a simulated user or a condition names (default:
        ``get_model(name)``); ``user_agents``: who answers the tools that ask the user."""
        self.tools = list(tools)
        self.mocks = dict(mocks or {})
        self._functions = dict(functions if functions is not None else
                               {t.name: t.function for t in self.tools if t.function})
        self.max_steps = max_steps
        self._user_model = user_model
        self._user_models: dict[str, Model] = {}
        self.user_agents = dict(user_agents or {})
        #: the environment's keys code the user wrote may say (its tools, its user
        #: function), read once for the run's cases (a pass over the environment is 0.1 ms:
        #: not one a case). Not an agent's own secrets (an HTTP agent's headers'): those
        #: stood in for it, and a key a user function said went to the endpoint
        self._environment: tuple[str, ...] | None = None

    # --- what each kind says -------------------------------------------------------

    def opening(self, case: TestCase) -> list[Message]:
        """The first messages of ``case``, the last being the user's."""
        raise NotImplementedError

    async def take_turn(self, it: Iteration) -> str | None:
        """Answer ``it.said``: the answer's text, or None when the step limit ended the
        turn. The turn adds its model turns and tool calls to ``it.trace`` (and may add
        its tool messages to ``it.messages``); the driver adds the answer."""
        raise NotImplementedError

    def wants_toolbox(self, case: TestCase) -> bool:
        """Whether the iteration needs the case's tools."""
        return bool(self.tools)

    def condition_model(self) -> str:
        """The model a natural-language end condition asks when neither it nor a
        simulated user names one."""
        return self.name

    async def begin(self, it: Iteration) -> None:
        """Before the first turn (a framework's session)."""

    async def end(self, it: Iteration) -> None:
        """After the last turn, however it ended."""

    # --- the driver ------------------------------------------------------------------

    async def run(self, case: TestCase, *, iteration: int, scope: CallScope = NO_SCOPE
                  ) -> AgentResult:
        """Each user turn: the agent answers (with its tool calls). A conversation then
        goes on with its next scripted turn or its simulated user, until an end
        condition holds, the script is used up or the user is done, or a limit
        (``max_turns``, ``max_duration``, the step limit) ends it."""
        started = time.monotonic()
        messages = self.opening(case)
        it = Iteration(case=case, iteration=iteration, scope=scope, started=started,
                       messages=messages, trace=[TraceEvent(kind="user", text=messages[-1].content)],
                       tally=Tally(usage=Usage(), model=self.name),
                       max_steps=case.max_steps or self.max_steps)
        if self.wants_toolbox(case):
            it.toolbox = Toolbox(
                self.tools, {**self.mocks, **case.mocks}, case_id=case.id, state=case.state,
                functions=self._functions, started=started, secrets=self._environment_secrets(),
                ask=UserAgents({**self.user_agents, **case.user_agents}, model=self._user,
                               case_id=case.id, iteration=iteration, scope=scope))
        await self.begin(it)
        try:
            ended = await self._converse(it)
        finally:
            await self.end(it)
        it.trace.append(TraceEvent(kind="final", at=it.now(), text=ended.output,
                                   reason=ended.reason or None))
        return AgentResult(
            output=ended.output, structured=it.structured, tool_calls=tuple(it.tally.calls),
            usage=it.tally.usage, cost=it.tally.cost, latency=it.tally.latency,
            duration=time.monotonic() - started, model=it.tally.model, trace=tuple(it.trace),
            state=it.state, ending=ended.ending, note=ended.reason, verdict=ended.verdict)

    async def _converse(self, it: Iteration) -> _Ended:
        case = it.case
        conversation = case.conversation
        script = iter(conversation.user_turns()) if conversation else iter(())
        simulator = self._simulator(conversation, case)
        max_turns = conversation.max_turns if conversation else 1
        deadline = conversation.max_duration if conversation else None
        answer = ""
        while True:
            timer = asyncio.timeout(None if deadline is None else max(deadline - it.now(), 0.0))
            try:
                async with timer:
                    said = await self.take_turn(it)
            except TimeoutError:
                if not timer.expired() or conversation is None or deadline is None:
                    raise  # not ours: the turn's own (an agent's, a tool's) timeout
                return self._limit(conversation.on_max_duration, answer,
                                   f"max_duration reached: {deadline:g} s, during turn {it.turn}")
            if said is None:
                return _Ended("terminated", f"the step limit was reached: {it.max_steps} model "
                              "turns without a final answer", output="")
            answer = said
            if conversation is None:
                return _Ended("completed", "", output=answer)
            if conversation.end_when and await holds(
                    conversation.end_when,
                    ConversationState(case.id, it.turn, answer, it.state, it.trace),
                    model=lambda name: self._user(name or self._condition_model(conversation)),
                    iteration=it.iteration, scope=it.scope.at(turn=it.turn)):
                return _Ended("completed", f"the end condition held after turn {it.turn}: "
                              f"{conversation.end_when.describe()}",
                              conversation.on_condition_met, answer)
            if deadline is not None and it.now() >= deadline:
                return self._limit(conversation.on_max_duration, answer,
                                   f"max_duration reached: {deadline:g} s, after turn {it.turn}")
            following = next(script, None)
            if following is None and simulator is None:
                return self._exhausted(conversation, answer, "the scripted turns were all said")
            if it.turn >= max_turns:
                still = ("with turns still to say" if following is not None
                         else "the simulated user's goal not met")
                return self._limit(conversation.on_max_turns, answer,
                                   f"max_turns reached: {max_turns} user turns, {still}")
            if following is not None:
                text = render(following, case.variables, field="conversation.follow_ups")
            else:
                assert simulator is not None
                turn = await simulator.next_turn(
                    it.trace, iteration=it.iteration,
                    scope=it.scope.at(turn=it.turn + 1), state=it.state)
                if turn.done:
                    return self._exhausted(conversation, answer,
                                           f"the simulated user was done after turn {it.turn}")
                text = turn.message
            it.turn += 1
            it.messages.append(Message.assistant(answer))
            it.messages.append(Message.user(text))
            it.trace.append(TraceEvent(kind="user", at=it.now(), text=text))

    @staticmethod
    def _limit(means: Literal["terminated", "judged", "pass", "fail"], answer: str,
               reason: str) -> _Ended:
        """A limit ended the conversation: terminated (not judged) or a verdict."""
        if means == "terminated":
            return _Ended("terminated", reason, output=answer)
        return _Ended("completed", reason, means, answer)

    @staticmethod
    def _exhausted(conversation: ConversationSpec, answer: str, reason: str) -> _Ended:
        """The user had nothing more to say. With an end condition that never held, that
        is seed 003's "inputs exhausted" (``on_inputs_exhausted``, fail by default);
        without one, the conversation is complete and judged."""
        if conversation.end_when is None:
            return _Ended("completed", reason, output=answer)
        return _Ended("completed", f"{reason} and the end condition never held",
                      conversation.on_inputs_exhausted, answer)

    def _simulator(self, conversation: ConversationSpec | None, case: TestCase
                   ) -> UserSimulator | FunctionUserPlayer | None:
        user = conversation.user if conversation else None
        if user is None:
            return None
        if isinstance(user, FunctionUser):
            return FunctionUserPlayer(user.function, secrets=self._environment_secrets())
        return UserSimulator(user, self._user(user.model), case.variables)

    def _environment_secrets(self) -> tuple[str, ...]:
        """The environment's keys, masked in what code the user wrote says (its tools, its
        user function): read once, not a case at a time (0.1 ms a read)."""
        if self._environment is None:
            from cycle.llm.http import environment_secrets

            self._environment = environment_secrets()
        return self._environment

    def _condition_model(self, conversation: ConversationSpec) -> str:
        user = conversation.user
        return user.model if isinstance(user, SimulatedUser) else self.condition_model()

    def _user(self, name: str) -> Model:
        """The model of a simulated user, user agent or condition (one per name)."""
        model = self._user_models.get(name)
        if model is None:
            if self._user_model is not None:
                model = self._user_model(name)
            else:
                from cycle.llm.registry import get_model

                model = get_model(name, role="user_sim")
            self._user_models[name] = model
        return model

    async def aclose(self) -> None:
        for model in self._user_models.values():
            await model.aclose()
        self._user_models.clear()


def no_conversation(agent: str, case: TestCase, how: str) -> EvalError:
    """The error of a kind that cannot take a later turn of ``case``."""
    return EvalError(f"case '{case.id}' is a conversation, and {agent} {how}")
