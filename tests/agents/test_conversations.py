"""Multi-turn cases with scripted follow-ups: the real openai SDK on the loopback server,
limits and what they mean, the turn count, and the whole conversation in the trace."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from cycle.agents import PromptAgent
from cycle.cases import ConversationSpec, TestCase
from cycle.cli import cli
from cycle.evals.runner import Runner
from cycle.judge import Judge
from cycle.judge.criteria import CriterionConfig
from cycle.llm.registry import get_model
from cycle.records import Prompt
from cycle.testing import LoopbackServer, clear_scripts, script

PROMPT = Prompt(id="returns", system="You handle returns.", user_template="{{ question }}")


def case(**conversation) -> TestCase:
    return TestCase(id="ret", input={"question": "I want to return shoes.", "order": "A-7"},
                    conversation=ConversationSpec.model_validate(conversation))


@pytest.fixture(scope="module")
def server():
    with LoopbackServer() as srv:
        yield srv


async def test_scripted_follow_ups_make_one_conversation_on_the_real_sdk(server):
    server.reset()
    agent = PromptAgent(PROMPT, get_model("openai:gpt-4o-mini", options=server.openai_options()))
    result = await agent.run(case(follow_ups=["It is order {{ order }}.",
                                              {"say": "Yes, go ahead.", "turns": 2}]),
                             iteration=0)
    await agent.model.aclose()
    assert [e.kind for e in result.trace] == [
        "user", "model", "user", "model", "user", "model", "user", "model", "final"]
    assert result.ending == "completed" and result.output == "echo: Yes, go ahead."
    # the fourth request carried the whole conversation so far
    sent = server.requests[3].messages
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "assistant",
                                         "user", "assistant", "user"]
    assert sent[3]["content"] == "It is order A-7."


@pytest.mark.parametrize(("on_max", "status", "passed"), [
    ("terminated", "terminated", None), ("judged", "passed", True),
    ("fail", "failed", False), ("pass", "passed", True),
])
async def test_max_turns_means_what_the_case_says(on_max, status, passed):
    script("agent", ["Sure."], repeat=True)
    try:
        agent = PromptAgent(PROMPT, get_model("scripted:agent"))
        c = case(follow_ups=["more"] * 5, max_turns=3, on_max_turns=on_max)
        judge = Judge([CriterionConfig(id="said", check={"type": "contains", "values": ["Sure"]}),
                       CriterionConfig(id="short", check={"type": "turn_count", "max": 3})])
        result = await Runner(agent=agent, judge=judge, cases=[c]).run()
    finally:
        clear_scripts()
    [r] = result.results
    assert (r.status, r.passed) == (status, passed)
    assert sum(1 for e in r.trace if e.kind == "user") == 3
    if on_max == "fail":
        assert r.score == 100  # the judge's score stays; the limit decides the outcome
        assert "max_turns reached" in r.verdicts[-1].reasoning
    if on_max != "terminated":
        assert result.cases["ret"].turns.mean == 3


async def _judged(c, answers, *criteria):
    script("agent", answers, repeat=True)
    try:
        agent = PromptAgent(PROMPT, get_model("scripted:agent"))
        judge = Judge(list(criteria) or [
            CriterionConfig(id="said", check={"type": "contains", "values": ["Sure"]})])
        [r] = (await Runner(agent=agent, judge=judge, cases=[c]).run()).results
    finally:
        clear_scripts()
    return r


async def test_a_pass_outcome_never_lifts_a_case_over_a_failed_criterion():
    # seed 003: passed = the way it ended AND the judge; the condition says pass, the
    # required criterion fails: the case fails
    c = case(follow_ups=["more"], end_when={"field_set": "status"}, on_condition_met="pass")
    r = await _judged(c, ['{"status": "done"}'], CriterionConfig(
        id="polite", required=True, check={"type": "contains", "values": ["please"]}))
    assert r.status == "failed" and r.score == 0
    assert [v.criterion_id for v in r.verdicts] == ["polite", "conversation"]
    assert r.verdicts[-1].passed  # the outcome itself passed


async def test_inputs_exhausted_without_the_condition_fails_by_default():
    c = case(follow_ups=["more", "again"], end_when={"field_set": "nothing"})
    r = await _judged(c, ["Sure."])
    assert r.status == "failed" and r.score == 100  # the judge liked it; the outcome did not
    assert r.trace[-1].reason == ("the scripted turns were all said and the end condition "
                                  "never held")
    judged = await _judged(case(follow_ups=["more"], end_when={"field_set": "nothing"},
                                on_inputs_exhausted="judged"), ["Sure."])
    assert judged.status == "passed"
    # without an end condition, a script played out is a complete conversation
    plain = await _judged(case(follow_ups=["more"]), ["Sure."])
    assert plain.status == "passed"
    assert plain.trace[-1].reason == "the scripted turns were all said"


async def test_max_duration_ends_the_conversation_and_keeps_its_trace():
    import asyncio

    async def slow(messages, tools, config):
        await asyncio.sleep(0.05)
        return "Sure."

    c = case(follow_ups=["more"] * 50, max_turns=100, max_duration="0.2s")
    r = await _judged(c, slow)
    assert r.status == "terminated"  # seed 000 counts it apart, not judged
    said = sum(1 for e in r.trace if e.kind == "user")
    assert 1 <= said < 50, said  # some turns were played, not all 50
    assert r.trace[-1].kind == "final" and r.trace[-1].reason.startswith(
        "max_duration reached: 0.2 s")
    assert "max_duration reached" in r.error
    fails = await _judged(case(follow_ups=["more"] * 50, max_turns=100, max_duration=0.2,
                               on_max_duration="fail"), slow)
    assert fails.status == "failed" and fails.score == 100


async def test_the_judge_sees_every_turn_not_only_the_first_and_the_last():
    seen = []

    def judge_answer(messages, tools, config):
        seen.append(messages[-1].content)
        return {"verdicts": {"kept_track": {"score": 90, "reasoning": "ok"}}}

    script("agent", lambda m, t, c: f"turn {sum(1 for x in m if x.role == 'user')}")
    script("judge", judge_answer)
    try:
        judge = Judge([CriterionConfig(id="kept_track", rubric="Remembers the order number.")],
                      model=get_model("scripted:judge", role="judge"))
        await Runner(agent=PromptAgent(PROMPT, get_model("scripted:agent")), judge=judge,
                     cases=[case(follow_ups=["It is A-7.", "Thanks."])]).run()
    finally:
        clear_scripts()
    payload = json.loads(seen[0].rsplit("```json", 1)[1].split("```")[0])
    assert payload["transcript"] == ["user: I want to return shoes.", "assistant: turn 1",
                                     "user: It is A-7.", "assistant: turn 2", "user: Thanks.",
                                     "assistant: turn 3"]


def run_case(tmp_path, case: str, *, extra: str = ""):
    """``cycle run`` of one case (``case``: its YAML under ``- id: c``, input ``{q: hi}``)
    on a prompt the offline model plays, with one contains check (``extra``: more of
    cycle.yaml)."""
    (tmp_path / "p.yaml").write_text("id: p\nuser_template: '{{ q }}'\n"
                                     "params: {model: 'offline:default'}\n")
    (tmp_path / "cases.yaml").write_text("- id: c\n  input: {q: hi}\n"
                                         + textwrap.indent(textwrap.dedent(case), "  "))
    (tmp_path / "cycle.yaml").write_text("prompt: p.yaml\ncases: [cases.yaml]\ncriteria: "
                                         "[{id: a, check: {type: contains, values: [x]}}]\n"
                                         + extra)
    return CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                    str(tmp_path / "cycle.yaml")])


def test_a_follow_up_with_an_unknown_variable_is_refused_before_any_call(tmp_path):
    r = run_case(tmp_path, """\
        conversation:
          follow_ups: ["my order is {{ ordr }}"]
        """)
    assert r.exit_code == 2, r.output
    assert "cases.yaml:1" in r.output and "follow-up turn 2" in r.output and "ordr" in r.output
    assert not (tmp_path / "s.db").exists()


async def test_a_simulated_user_speaks_after_the_script_until_its_goal_is_met():
    seen_by_user = []

    def user(messages, tools, config):
        block = json.loads(messages[-1].content.rsplit("```json", 1)[1].split("```")[0])
        seen_by_user.append(block["conversation"])
        if len(seen_by_user) == 1:
            return {"message": "It is order A-7, they are too small.", "done": False}
        return {"message": "Thanks!", "done": True}

    script("agent", lambda m, t, c: f"answer {sum(1 for x in m if x.role == 'user')}")
    script("user", user)
    try:
        agent = PromptAgent(PROMPT, get_model("scripted:agent"))
        c = case(follow_ups=["Hello?"], user={"model": "scripted:user", "persona": "Ana",
                                              "goal": "return the shoes",
                                              "facts": {"order": "A-7"}})
        result = await agent.run(c, iteration=0)
        await agent.aclose()
    finally:
        clear_scripts()
    users = [e.text for e in result.trace if e.kind == "user"]
    assert users == ["I want to return shoes.", "Hello?", "It is order A-7, they are too small."]
    assert result.output == "answer 3" and result.ending == "completed"
    # the simulated user saw the conversation so far, itself as "user"
    assert seen_by_user[0] == [
        {"role": "user", "text": "I want to return shoes."}, {"role": "assistant", "text": "answer 1"},
        {"role": "user", "text": "Hello?"}, {"role": "assistant", "text": "answer 2"}]
    assert len(seen_by_user) == 2


def history_as_lines(said):
    return "\n".join(f"{turn['role'].upper()}: {turn['text']}" for turn in said)


async def test_the_simulated_user_is_shaped_by_templates_over_the_case_and_a_history_hook():
    seen = []

    def user(messages, tools, config):
        seen.append(messages)
        return {"message": "bye", "done": True}

    script("agent", ["Hello, how can I help?"], repeat=True)
    script("user", user)
    try:
        agent = PromptAgent(PROMPT, get_model("scripted:agent"))
        c = case(user={"model": "scripted:user", "persona": "a customer with order {{ order }}",
                       "goal": "return {{ order }}",
                       "system": "You are a terse customer of order {{ order }}.",
                       "format_history": "tests.agents.test_conversations:history_as_lines"})
        await agent.run(c, iteration=0)
        await agent.aclose()
    finally:
        clear_scripts()
    system, message = seen[0]
    assert system.content == "You are a terse customer of order A-7."
    assert "Who you are: a customer with order A-7" in message.content
    assert "Your goal: return A-7" in message.content
    assert "USER: I want to return shoes.\nASSISTANT: Hello, how can I help?" in message.content


def test_an_offline_user_with_format_history_says_what_to_change(tmp_path):
    # found walking docs/agents-and-tools.md: its simulated user, played by the offline
    # model, errored with "the cycle_user request has no ```json block" and a hint about
    # the judge and the improver; format_history, which took the block away, went unnamed
    r = run_case(tmp_path, """\
        conversation:
          user: {model: 'offline:default', persona: P, goal: G,
                 format_history: 'tests.agents.test_conversations:history_as_lines'}
        """, extra="run: {iterations: 1}\n")
    assert r.exit_code == 3, r.output
    report = next((tmp_path / "reports").glob("*.md")).read_text()
    assert "format_history" in report and "leave format_history out" in report


def test_a_simulated_users_template_with_an_unknown_variable_is_refused(tmp_path):
    r = run_case(tmp_path, """\
        conversation:
          user: {model: 'offline:default', persona: 'owner of {{ ordr }}', goal: G}
        """)
    assert r.exit_code == 2, r.output
    assert "cases.yaml:1" in r.output and "conversation.user.persona" in r.output
    assert "ordr" in r.output


def test_an_offline_conversation_with_a_simulated_user_through_the_cli(tmp_path):
    (tmp_path / "p.yaml").write_text(textwrap.dedent("""\
        id: returns
        system: You are a support agent.
        user_template: |
          Customer: {{ customer }}
          Question: {{ question }}
        params: {model: 'offline:default'}
        """))
    (tmp_path / "cases.yaml").write_text(textwrap.dedent("""\
        - id: refund
          input: {customer: Dana, question: "My shoes arrived broken."}
          conversation:
            user:
              model: offline:default
              persona: Dana, who bought shoes that arrived broken
              goal: get a refund
              facts: {order_number: D-4501}
            max_turns: 6
        """))
    (tmp_path / "cycle.yaml").write_text(textwrap.dedent("""\
        prompt: p.yaml
        criteria:
          - {id: talked, check: {type: turn_count, min: 2}}
          - {id: tone, rubric: Polite.}
        cases: [cases.yaml]
        run: {iterations: 2}
        """))
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                 str(tmp_path / "cycle.yaml"), "--json"])
    assert r.exit_code in (0, 1), r.output
    summary = json.loads(r.output)["summary"]
    assert summary["errors"] == 0 and summary["terminated"] == 0
    assert summary["usage"]["user_sim"]["calls"] >= 2  # the simulated user's calls are counted
    report = json.loads(next((tmp_path / "reports").glob("*.json")).read_text())
    trace = report["cases"][0]["results"][0]["trace"]
    users = [e["text"] for e in trace if e["kind"] == "user"]
    assert users[1] == "I would like to get a refund."
    assert report["cases"][0]["turns"]["mean"] >= 2
    assert report["cases"][0]["results"][0]["verdicts"][0]["passed"] is True  # turn_count
    # the console's cost split names every role that made calls, the simulated user too
    console = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "report", "@last",
                                       "--no-write"]).output
    assert "(agent $0.0000, judge $0.0000, simulated user $0.0000)" in console
    assert "simulated user " in next(line for line in console.splitlines()
                                     if line.startswith("Tokens "))


def test_a_simulated_user_on_an_unknown_provider_is_refused_before_any_call(tmp_path):
    r = run_case(tmp_path, """\
        conversation:
          user: {model: 'nosuch:model', persona: P, goal: G}
        """)
    assert r.exit_code == 2, r.output
    assert "cases.yaml" in r.output and "nosuch" in r.output
    assert "conversation.user.model" in r.output


def function_user(conversation, state):
    """Gives the order number once asked, then is done."""
    last = conversation[-1]["text"]
    if "order" in last.lower() and not any("A-7" in c["text"] for c in conversation):
        return "It is A-7."
    return ("Thanks, bye.", True) if len(conversation) > 2 else "Hello?"


async def test_a_python_function_can_play_the_user():
    script("agent", lambda m, t, c: "Which order?" if sum(1 for x in m if x.role == "user") == 1
           else "Found it.")
    try:
        agent = PromptAgent(PROMPT, get_model("scripted:agent"))
        c = case(user={"function": "tests.agents.test_conversations:function_user"})
        result = await agent.run(c, iteration=0)
    finally:
        clear_scripts()
    assert [e.text for e in result.trace if e.kind == "user"] == [
        "I want to return shoes.", "It is A-7."]
    assert result.output == "Found it." and result.ending == "completed"


async def test_a_criterion_judged_on_every_turn_is_averaged():
    seen = []

    def judge_answer(messages, tools, config):
        block = json.loads(messages[-1].content.rsplit("```json", 1)[1].split("```")[0])
        seen.append((block["input"], block["output"], len(block.get("transcript", []))))
        ids = config.response_schema["properties"]["verdicts"]["required"]
        score = 90 if "2" in block["output"] else 50
        return {"verdicts": {i: {"score": score if i == "polite" else 80, "reasoning": "r"}
                             for i in ids}}

    script("agent", lambda m, t, c: f"answer {sum(1 for x in m if x.role == 'user')}")
    script("judge", judge_answer)
    try:
        judge = Judge([CriterionConfig(id="polite", rubric="Polite.", per_turn=True),
                       CriterionConfig(id="whole", rubric="Solves it.")],
                      model=get_model("scripted:judge", role="judge"))
        result = await Runner(agent=PromptAgent(PROMPT, get_model("scripted:agent")),
                              judge=judge, cases=[case(follow_ups=["More?"])]).run()
    finally:
        clear_scripts()
    polite = next(v for v in result.results[0].verdicts if v.criterion_id == "polite")
    assert polite.score == 70  # (50 + 90) / 2
    assert polite.reasoning.startswith("mean of 2 turn(s); turn 1: 50")
    # one call for the whole conversation, one per turn for the per-turn criterion
    per_turn = [s for s in seen if s[0] != {"question": "I want to return shoes.", "order": "A-7"}]
    assert [(s[0], s[1]) for s in per_turn] == [
        ("I want to return shoes.", "answer 1"), ("More?", "answer 2")]


def test_a_limit_is_not_counted_as_an_error_by_the_dashboard_or_the_progress_line():
    import io

    from cycle import events as ev
    from cycle.progress import Progress
    from cycle.tui.state import DashboardState
    from cycle.tui.widgets.case_table import case_cells

    events = [
        ev.RunStarted(run_id="r", cases=1, iterations=3),
        ev.CaseFinished(run_id="r", case_id="c", iteration=0, score=80, passed=True,
                        status="passed", turns=3),
        ev.CaseFinished(run_id="r", case_id="c", iteration=1, score=None, passed=None,
                        error="terminated: max_turns reached", status="terminated", turns=6),
        ev.CaseFinished(run_id="r", case_id="c", iteration=2, score=None, passed=None,
                        error="agent: provider down", status="error", turns=1),
    ]
    state = DashboardState()
    out = io.StringIO()
    progress = Progress(out, interval=3600)
    for e in events:
        state.apply(e)
        progress(e)
    row = state.cases["c"]
    assert (row.errors, row.terminated, row.turns) == (1, 1, [3, 6])
    # the dashboard's row: passed of judged, turns (the range), ended by a limit, errors
    assert [text for text, _ in case_cells(row)][3:] == ["1/1", "3-6", "1", "1"]
    assert "1 errors  1 ended by a limit" in progress.line()


def test_the_simulated_users_calls_are_cached_and_costed_across_runs(tmp_path):
    """The README's promise: a second identical run is served by the response cache, the
    simulated user's calls included, and they appear in the run's usage."""
    test_an_offline_conversation_with_a_simulated_user_through_the_cli(tmp_path)
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                 str(tmp_path / "cycle.yaml"), "--json"])
    usage = json.loads(r.output)["summary"]["usage"]["user_sim"]
    assert usage["calls"] >= 2 and usage["cache_hits"] == usage["calls"]
