"""The runner: iterations, errors kept apart from failures, the store, resume, stop, timeout."""

import asyncio
import io

import pytest

from cycle.agents import CallableAgent, PromptAgent
from cycle.cases import TestCase
from cycle.errors import BadRequestError
from cycle.evals.results import load_run
from cycle.evals.runner import Runner
from cycle.events import CaseFinished, EventBus, RunFinished
from cycle.judge import Judge
from cycle.judge.criteria import CriterionConfig
from cycle.llm.model import ModelServices
from cycle.llm.registry import get_model
from cycle.progress import Progress
from cycle.records import Prompt
from cycle.store import Store
from cycle.testing import script

PROMPT = Prompt(id="p", system="Be brief.", user_template="Order {{ order }}: {{ q }}")
CASES = [TestCase(id=f"c{i}", input={"order": f"A-{i}", "q": "where?"}) for i in range(4)]
ORDER_CHECK = CriterionConfig(id="order", check={"type": "contains", "values": ["{{ order }}"]},
                              required=True)


def judge_with(scores):
    """A scripted judge answer function: score per criterion from ``scores(user_message)``."""

    def answer(messages, tools, config):
        ids = config.response_schema["properties"]["verdicts"]["required"]
        s = scores(messages[-1].content)
        if isinstance(s, BaseException):
            raise s
        return {"verdicts": {i: {"reasoning": "r", "score": s} for i in ids}}

    return answer


def echo_agent(messages, tools, config):
    user = messages[-1].content
    if "A-2" in user:  # this case's provider is down
        raise BadRequestError("provider down", status=400)
    if "A-3" in user:
        return "I cannot find it."  # no order number: the required check fails
    return f"Your order {user.split()[1].rstrip(':')} ships today."


@pytest.fixture
def store(tmp_path):
    s = Store.open(tmp_path / "cycle.db")
    yield s
    s.close()


async def test_errors_are_counted_apart_and_never_averaged(store):
    bus = EventBus()
    seen = []
    bus.subscribe(seen.append)
    with script("agent", echo_agent), script("judge", judge_with(lambda text: 80)) as judge_script:
        agent = PromptAgent(PROMPT, get_model("scripted:agent", ModelServices(bus=bus)))
        judge = Judge([ORDER_CHECK, CriterionConfig(id="accuracy")],
                      model=get_model("scripted:judge", ModelServices(bus=bus), role="judge"))
        result = await Runner(agent=agent, judge=judge, cases=CASES, iterations=2, concurrency=3,
                              store=store, bus=bus).run()
    s = result.suite
    assert (s.cases, s.passed, s.failed, s.errored, s.iterations, s.errors) == (4, 2, 1, 1, 8, 2)
    assert result.cases["c2"].status == "error" and result.cases["c2"].stats.mean is None
    assert "provider down" in next(r.error for r in result.results if r.case_id == "c2")
    assert result.cases["c3"].stats.mean == pytest.approx(40.0)  # (0 + 80) / 2, required failed
    # the suite mean is over the judged cases only: (90 + 90 + 40) / 3
    assert s.score.mean == pytest.approx((90 + 90 + 40) / 3)
    assert s.pass_rate == pytest.approx(2 / 3)
    assert result.exit_code == 3
    # judge calls carry iteration numbers, so a cache cannot collapse repeats
    assert len(judge_script.calls) == 6
    assert s.role("agent").calls == 8 and s.role("judge").calls == 6
    # everything is in the store and reads back the same
    stored = load_run(store.runs, result.run_id)
    assert stored.summary()["score"] == pytest.approx(s.score.mean)
    assert stored.suite.errors == 2 and len(stored.results) == 8
    assert store.db.execute("select count(*) from calls where run_id = ?",
                            (result.run_id,)).fetchone()[0] == 14
    assert sum(isinstance(e, CaseFinished) for e in seen) == 8
    assert isinstance(seen[-1], RunFinished)


async def test_resume_skips_judged_iterations_and_reruns_errors(store):
    state = {"down": True}

    def flaky(messages, tools, config):
        if state["down"] and "A-1" in messages[-1].content:
            raise BadRequestError("down", status=400)
        return "order " + messages[-1].content.split()[1].rstrip(":")

    with script("agent2", flaky) as agent_script:
        agent = PromptAgent(PROMPT, get_model("scripted:agent2"))
        judge = Judge([ORDER_CHECK])
        first = await Runner(agent=agent, judge=judge, cases=CASES[:2], iterations=2,
                             store=store).run()
        assert first.suite.errors == 2 and len(agent_script.calls) == 4
        state["down"] = False
        bus, log = EventBus(), io.StringIO()
        bus.subscribe(Progress(log))
        second = await Runner(agent=agent, judge=judge, cases=CASES[:2], iterations=2,
                              store=store, bus=bus).run(run_id=first.run_id)
    assert len(agent_script.calls) == 6  # only the two errored iterations ran again
    # the progress counts the two judged before as done: it ends at 4 of 4, not 2 of 4
    lines = log.getvalue().splitlines()
    assert lines[0] == f"running {first.run_id}: 4 iterations, 2 judged before"
    assert "4/4 iterations" in lines[-1]
    assert second.run_id == first.run_id and second.suite.errors == 0
    assert second.suite.iterations == 4 and second.exit_code == 0
    assert len(load_run(store.runs, first.run_id).results) == 4


async def test_a_timeout_in_the_agent_names_what_it_waited_on():
    """Before, every agent's timeout said "no model call of this run had been answered
    yet: if the server is slow (a local model)", a Python function's too."""
    async def slow(payload):
        await asyncio.sleep(5)

    result = await Runner(agent=CallableAgent(slow), judge=Judge([ORDER_CHECK]),
                          cases=CASES[:1], timeout=0.05).run()
    assert result.results[0].error == (
        "timeout: the case took longer than 0.05 s (agent: the Python function "
        f"{slow.__module__}:{slow.__qualname__}): it had not answered; if it is that slow, "
        "raise run.timeout (or lower run.concurrency: cases in flight slow it down)")

    async def sleepy(messages, tools, config):
        await asyncio.sleep(5)

    with script("sleepy", sleepy, repeat=True):
        agent = PromptAgent(PROMPT, get_model("scripted:sleepy", ModelServices()))
        result = await Runner(agent=agent, judge=Judge([ORDER_CHECK]), cases=CASES[:1],
                              timeout=0.05).run()
    assert result.results[0].error.startswith(
        "timeout: the case took longer than 0.05 s (agent: its model scripted:sleepy); "), \
        result.results[0].error


async def test_stop_on_first_failure_and_timeout():
    async def slow_or_wrong(payload):
        if payload["order"] == "A-0":
            await asyncio.sleep(5)
        return "nothing useful"

    agent = CallableAgent(slow_or_wrong)
    judge = Judge([ORDER_CHECK])
    result = await Runner(agent=agent, judge=judge, cases=CASES, concurrency=1, timeout=0.05,
                          stop_on_first_failure=True).run()
    assert result.cases["c0"].status == "error"
    assert "timeout" in result.results[0].error
    # c1 failed, so c2 and c3 never ran
    assert set(result.cases) == {"c0", "c1"} and result.status == "interrupted"
    assert "stop-on-first-failure" in result.stop_reason


def sync_agent(payload):
    return {"response": f"order {payload['order']}", "tool_calls": [{"name": "lookup", "arguments": {"id": 1}}]}


async def test_callable_agent_by_import_path_with_tool_calls():
    agent = CallableAgent("tests.evals.test_runner:sync_agent")
    result = await Runner(agent=agent, judge=Judge([ORDER_CHECK]), cases=CASES[:1]).run()
    r = result.results[0]
    assert r.status == "passed" and r.tool_calls[0].name == "lookup"
    assert result.exit_code == 0


async def test_agent_crash_is_an_error():
    def crash(payload):
        raise KeyError("oops")

    result = await Runner(agent=CallableAgent(crash), judge=Judge([ORDER_CHECK]), cases=CASES[:1]).run()
    assert result.results[0].status == "error" and "KeyError" in result.results[0].error


async def test_a_subscriber_that_cannot_record_stops_the_run_and_the_store_says_so(store):
    """The bus does not swallow a subscriber's failure: a recorder that cannot write must
    stop the run (it would pay on for results --resume could not find)."""
    bus = EventBus()
    after: list = []

    class DiskFull(OSError):
        pass

    def recorder(event):
        if isinstance(event, CaseFinished) and event.case_id == "c1":
            raise DiskFull("no space left on device")

    bus.subscribe(recorder)
    bus.subscribe(after.append)
    with script("agent", "Your order A-0 ships."), script("judge", judge_with(lambda t: 80)):
        agent = PromptAgent(PROMPT, get_model("scripted:agent", ModelServices(bus=bus)))
        judge = Judge([ORDER_CHECK], model=get_model("scripted:judge", ModelServices(bus=bus), role="judge"))
        runner = Runner(agent=agent, judge=judge, cases=CASES, iterations=1, concurrency=1,
                        store=store, bus=bus)
        with pytest.raises(DiskFull):
            await runner.run(run_id="run-full")
    assert store.runs.get("run-full").status == "interrupted"
    # the failing event went no further down the subscriber list
    assert not any(isinstance(e, CaseFinished) and e.case_id == "c1" for e in after)
