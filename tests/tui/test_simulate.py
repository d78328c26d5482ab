"""cycle simulate's screen, driven with Pilot: a person plays the model, the tools answer
through the mocks (and passthrough), and each finished session is appended to an ADK
EvalSet (read back with ADK's own model) and to a case file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.adk.evaluation.eval_set import EvalSet as AdkEvalSet
from textual.widgets import Checkbox, Input, OptionList, TextArea

from cycle.assemble.simulate import config_agent
from cycle.cases import load_case_file
from cycle.simulate import SessionState, Simulation
from cycle.tui.app import SimulateApp
from cycle.tui.screens.confirm import ConfirmScreen
from tests.tui import simtools

PROMPT = """\
id: OrderSupport
system: You are the support agent of an online shop.
user_template: "{{ input }}"
params: {model: offline:default}
tools:
  - name: lookup_order
    description: Returns an order's status.
    parameters:
      type: object
      properties:
        order: {type: string, description: "The order number"}
        verbose: {type: boolean}
        limit: {type: integer}
      required: [order]
  - name: refund
    description: Refunds an order.
    parameters:
      type: object
      properties: {order: {type: string}, amount: {type: number}}
      required: [order, amount]
  - name: find_order
    function: tests.tui.simtools:find_order
    description: The real order system.
    parameters:
      type: object
      properties: {order: {type: string}}
      required: [order]
  - name: delete_account
    description: "Deletes the customer's account (no mock, so it must not run)."
"""
CONFIG = """\
prompt: prompt.yaml
criteria:
  - {id: answers, check: {type: regex, pattern: "."}}
cases: [cases.yaml]
tools:
  mocks:
    lookup_order: {value: {status: delivered}}
    refund: {error: card declined}
    find_order: {passthrough: true}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompt.yaml").write_text(PROMPT)
    (tmp_path / "cycle.yaml").write_text(CONFIG)
    (tmp_path / "cases.yaml").write_text("# hand-written cases\n- {id: first, input: hi}\n")
    simtools.CALLS.clear()
    return tmp_path


def simulation(project: Path, **kw) -> Simulation:
    return Simulation([config_agent(project / "cycle.yaml", eval_set_path=Path("golden.json"),
                                    cases_path=Path("cases.yaml"), **kw)])


async def choose(pilot, option_list: str, option_id: str) -> None:
    widget = pilot.app.screen.query_one(option_list, OptionList)
    widget.highlighted = widget.get_option_index(option_id)
    widget.focus()
    await pilot.press("enter")
    await pilot.pause()


async def fill(pilot, values: dict[str, str]) -> None:
    for name, value in values.items():
        pilot.app.screen.query_one(f"#arg-{name}", Input).value = value


async def ask_then_find(pilot, query: str, order: str) -> None:
    """Start a session with ``query``, then call the find_order tool on ``order``."""
    pilot.app.screen.query_one("#query", TextArea).text = query
    await pilot.press("ctrl+s")
    await pilot.pause()
    await choose(pilot, "#tools", "find_order")
    await fill(pilot, {"order": order})
    await pilot.press("ctrl+s")
    await pilot.pause()


async def play_session(pilot, query: str, response: str) -> None:
    screen = pilot.app.screen
    screen.query_one("#query", TextArea).text = query
    await pilot.press("ctrl+s")
    await pilot.pause()
    assert pilot.app.screen.simulation.state is SessionState.ACTIVE
    # a tool call whose form breaks the schema runs nothing and records nothing
    await choose(pilot, "#tools", "lookup_order")
    await fill(pilot, {"order": "A-1", "limit": "three"})
    await pilot.press("ctrl+s")
    await pilot.pause()
    assert "limit: 'three' is not a whole number" in str(screen.query_one("#form-error").render())
    assert len(screen.simulation.history) == 1
    await fill(pilot, {"limit": "3"})
    screen.query_one("#arg-verbose", Checkbox).value = True
    await pilot.press("ctrl+s")
    await pilot.pause()
    # a failing tool: the mock says the card is declined
    await choose(pilot, "#tools", "refund")
    await fill(pilot, {"order": "A-1", "amount": "20.5"})
    await pilot.press("ctrl+s")
    await pilot.pause()
    # the final response
    await choose(pilot, "#tools", "__final__")
    screen.query_one("#response", TextArea).text = response
    await pilot.press("ctrl+s")
    await pilot.pause()


async def test_a_whole_session_is_exported_to_the_evalset_and_the_case_file(project):
    sim = simulation(project)
    app = SimulateApp(sim)
    async with app.run_test(size=(110, 32)) as pilot:
        await play_session(pilot, "Where is my order A-1?", "It was delivered; the refund failed.")
        assert sim.state is SessionState.COMPLETED
        tools = pilot.app.screen.query_one("#tools", OptionList)
        unmocked = tools.get_option("delete_account")
        assert unmocked.disabled  # no mock: it cannot be chosen
    kinds = [e.type for e in sim.history]
    assert kinds == ["user_query", "tool_call", "tool_output", "tool_call", "tool_error",
                     "final_response"]
    error = sim.history[4]
    assert (error.error_type, error.error_message) == ("ToolFailure", "card declined")
    assert error.call_id == sim.history[3].call_id and error.duration_ms >= 0

    evalset = AdkEvalSet.model_validate_json((project / "golden.json").read_text())
    assert evalset.eval_set_id == "order_support_evals"
    assert evalset.name == "OrderSupport Evaluation Set"
    (case,) = evalset.eval_cases
    assert case.eval_id.startswith("order_support_20")
    (inv,) = case.conversation
    assert inv.user_content.parts[0].text == "Where is my order A-1?"
    assert inv.final_response.parts[0].text == "It was delivered; the refund failed."
    uses = inv.intermediate_data.tool_uses
    assert [(u.name, u.args) for u in uses] == [
        ("lookup_order", {"order": "A-1", "verbose": True, "limit": 3}),
        ("refund", {"order": "A-1", "amount": 20.5})]
    responses = inv.intermediate_data.tool_responses
    assert [r.id for r in responses] == [u.id for u in uses]
    assert responses[0].response == {"result": {"status": "delivered"}}
    assert responses[1].response == {"error": {"type": "ToolFailure", "message": "card declined"}}

    # the case file keeps its own cases and comment, and gains the session as a case
    text = (project / "cases.yaml").read_text()
    assert text.startswith("# hand-written cases\n- {id: first, input: hi}\n")
    _, golden = load_case_file(project / "cases.yaml")
    assert golden.id == case.eval_id and golden.expected == "It was delivered; the refund failed."
    checks = [c.check.model_dump() for c in golden.criteria]
    assert checks[0]["tools"] == ["lookup_order", "refund"]


async def test_a_second_session_appends_to_the_same_file_and_a_real_tool_fails_with_its_traceback(
        project):
    sim = simulation(project)
    app = SimulateApp(sim)
    async with app.run_test(size=(110, 32)) as pilot:
        await play_session(pilot, "first", "first answer")
        await pilot.press("ctrl+n")  # a finished session: no question asked
        await pilot.pause()
        assert sim.state is SessionState.AWAITING_QUERY and sim.history == []
        await ask_then_find(pilot, "second", "Z-9")
        await choose(pilot, "#tools", "__final__")
        pilot.app.screen.query_one("#response", TextArea).text = "I cannot find Z-9."
        await pilot.press("ctrl+s")
        await pilot.pause()
        history = pilot.app.screen.query_one("#sim-history")
        shown = "\n".join(str(w.render()) for w in history.query(".entry"))
        assert "LookupError: no order Z-9" in shown and "find_order" in shown
    assert simtools.CALLS == ["Z-9"]  # passthrough: the real function ran
    error = sim.history[2]
    assert error.error_type == "LookupError" and "simtools.py" in error.traceback
    data = json.loads((project / "golden.json").read_text())
    assert len(data["eval_cases"]) == 2
    ids = [c["eval_id"] for c in data["eval_cases"]]
    assert len(set(ids)) == 2
    second = data["eval_cases"][1]["conversation"][0]["intermediate_data"]["tool_responses"][0]
    assert second["response"]["error"] == {"type": "LookupError", "message": "no order Z-9"}
    AdkEvalSet.model_validate(data)
    assert len(load_case_file(project / "cases.yaml")) == 3


async def test_quitting_mid_session_asks_and_exports_nothing(project):
    sim = simulation(project)
    app = SimulateApp(sim)
    async with app.run_test(size=(110, 32)) as pilot:
        pilot.app.screen.query_one("#query", TextArea).text = "half a session"
        await pilot.press("ctrl+s")
        await pilot.pause()
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(pilot.app.screen, ConfirmScreen)
        await pilot.press("n")  # stay
        await pilot.pause()
        assert not isinstance(pilot.app.screen, ConfirmScreen) and pilot.app.is_running
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
    assert not (project / "golden.json").exists()
    assert len(load_case_file(project / "cases.yaml")) == 1


async def test_two_agents_an_adk_one_chosen_from_the_list(project, monkeypatch):
    """With a config's agent and an ADK agent, the session starts by choosing; the ADK
    agent's tools are its own, answered by the config's mocks and --passthrough."""
    from cycle.simulate import adk_agent
    from tests.agents import adk_agents

    adk_agents.CALLS.clear()
    config = config_agent(project / "cycle.yaml", eval_set_path=Path("golden.json"),
                          cases_path=None)
    adk = adk_agent("tests.agents.adk_agents:root_agent", eval_set_path=Path("adk.json"),
                    cases_path=None, mocks=config.mocks, passthrough=["lookup_order"])
    assert adk.name == "order_support" and adk.how("refund") == "mock: error"  # the config's
    sim = Simulation([config, adk])
    async with SimulateApp(sim).run_test(size=(110, 32)) as pilot:
        assert sim.state is SessionState.SELECTING_AGENT
        await choose(pilot, "#agents", "order_support")
        assert sim.agent is adk and sim.state is SessionState.AWAITING_QUERY
        pilot.app.screen.query_one("#query", TextArea).text = "Where is A-7?"
        await pilot.press("ctrl+s")
        await pilot.pause()
        await choose(pilot, "#tools", "lookup_order")
        await fill(pilot, {"order": "A-7"})
        await pilot.press("ctrl+s")
        await pilot.pause()
        await choose(pilot, "#tools", "__final__")
        pilot.app.screen.query_one("#response", TextArea).text = "A-7 has shipped."
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert adk_agents.CALLS == ["lookup_order A-7"]  # the ADK agent's real tool, passed through
    evalset = AdkEvalSet.model_validate_json((project / "adk.json").read_text())
    assert evalset.eval_set_id == "order_support_evals"
    (case,) = evalset.eval_cases
    data = case.conversation[0].intermediate_data
    assert data.tool_responses[0].response == {"result": {"order": "A-7", "status": "shipped"}}


async def test_cycle_tui_opens_simulate_on_the_config_here(project, history_store):
    from cycle.tui.app import CycleApp
    from cycle.tui.screens.simulate import SimulateScreen

    app = CycleApp(store=history_store, prompt_id="support-reply")
    async with app.run_test(size=(110, 32)) as pilot:
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, SimulateScreen)
        assert app.screen.simulation.agent.name == "OrderSupport"
        await pilot.press("ctrl+q")  # nothing under way: back to History, not out of the app
        await pilot.pause()
        assert not isinstance(app.screen, SimulateScreen) and app.is_running


async def test_a_real_tools_error_quoting_the_environments_key_is_masked_on_screen_and_in_the_files(
        project, monkeypatch):
    """The toolbox masked the key in what the model is shown, but the session kept the
    exception as it was raised: its message and traceback, shown in the history and
    written into the EvalSet and the case file (files committed with the project)."""
    key = "shop-key-5c1e7a9d0b"
    monkeypatch.setenv("SHOP_API_KEY", key)
    sim = simulation(project)
    app = SimulateApp(sim)
    async with app.run_test(size=(110, 32)) as pilot:
        await ask_then_find(pilot, "where is it?", "keyed")
        history = pilot.app.screen.query_one("#sim-history")
        shown = "\n".join(str(w.render()) for w in history.query(".entry"))
        assert "PermissionError: the order system refused the key ***" in shown
        assert key not in shown
        await choose(pilot, "#tools", "__final__")
        pilot.app.screen.query_one("#response", TextArea).text = "The system is down."
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert sim.state is SessionState.COMPLETED
    error = sim.history[2]
    assert key not in error.error_message and key not in (error.traceback or "")
    for written in ("golden.json", "cases.yaml"):
        assert key not in (project / written).read_text()
    assert "refused the key ***" in (project / "golden.json").read_text()


@pytest.mark.parametrize("url", ["ftp://bob:hunter2pass@gw.example.com/v1",
                                 "http://bob:hunter2pass@[::1/v1"])
async def test_a_base_url_refused_in_the_config_is_named_without_its_password(
        project, history_store, url):
    """s on the History screen opens Simulate on ./cycle.yaml; a config whose base_url is
    not an http(s) URL was refused quoting it whole, the password with it (and one that
    does not parse at all was an internal error: UnboundLocalError)."""
    from cycle.tui.app import CycleApp

    (project / "cycle.yaml").write_text(
        CONFIG + f"providers:\n  openai: {{base_url: '{url}'}}\n")
    app = CycleApp(store=history_store, prompt_id="support-reply")
    async with app.run_test(size=(110, 32)) as pilot:
        await pilot.press("s")
        await pilot.pause()
        said = " ".join(str(n.message) for n in app._notifications)
        await pilot.press("q")
    assert "providers.openai.base_url" in said and "is not an http(s) URL" in said
    assert "hunter2pass" not in said


async def test_a_tools_error_with_rich_markup_is_notified_as_text_and_stops_nothing(project):
    """A real tool's error quotes what it was given: ``[/b]`` in it, read as markup by the
    notification, was an error that stopped the app; ``[@click=...]`` made a button."""
    sim = simulation(project)
    app = SimulateApp(sim)
    async with app.run_test(size=(110, 32), notifications=True) as pilot:
        await ask_then_find(pilot, "where is it?", "[/b][@click=app.quit]Z-9[/]")
        await pilot.pause()
        shown = [str(n.message) for n in app._notifications]
        assert any("no order [/b][@click=app.quit]Z-9[/]" in m for m in shown)
        toasts = [w for w in app.screen.walk_children(with_self=False) if type(w).__name__ == "Toast"]
        assert toasts and any("[/b][@click=app.quit]Z-9[/]" in str(t.render()) for t in toasts)
        await choose(pilot, "#tools", "__final__")
        pilot.app.screen.query_one("#response", TextArea).text = "Not found."
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert app.return_code in (None, 0)
    assert sim.state is SessionState.COMPLETED
