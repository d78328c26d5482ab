"""`cycle doctor` against the loopback server behaving as OpenAI, llama.cpp's server and a
text-only server (issue 39): what works, what cycle does about the rest, the settings."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import LoopbackServer, Reply


@pytest.fixture(scope="module")
def server():
    with LoopbackServer() as srv:
        yield srv


def doctor(tmp_path, server, *args):
    config = tmp_path / "cycle.yaml"
    config.write_text("prompt: p.yaml\nagent: openai:local-model\ncriteria: [{id: accuracy}]\n"
                      f"providers:\n  openai: {{base_url: '{server.openai_base_url}'}}\n"
                      "pricing:\n  'openai:local-model': {input: 0, output: 0}\n")
    return CliRunner().invoke(cli, ["doctor", str(config), *args])


def probes(result) -> dict:
    return {p["name"]: p for p in json.loads(result.output)["probes"]}


@pytest.mark.parametrize("mode, structured", [(None, "json_schema"), ("llamacpp", "auto"),
                                              ("text-only", "json_object")])
def test_doctor_says_what_works_and_the_setting_that_fits(tmp_path, server, mode, structured):
    server.reset()
    server.compat = mode
    server.responder = lambda r: Reply(tool_calls=[("get_time", {"city": "Paris"})]) \
        if r.tools else None
    r = doctor(tmp_path, server, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    got = probes(r)
    assert got["plain answer"]["ok"] and got["usage"]["ok"] and got["tools"]["ok"]
    assert got["json_schema"]["ok"] == (mode is None)
    assert got["schema in prompt"]["ok"]
    if mode == "llamacpp":
        assert got["json_schema"]["detail"] == "refused (HTTP 500)"
        assert got["json_object + schema"]["ok"]
        assert any("json_schema does not work here" in n for n in data["notes"])
    if mode == "text-only":
        assert got["json_schema"]["detail"] == "answered, but not JSON of the schema"
    assert data["settings"]["providers.openai.structured"] == structured
    assert data["usable"] and server.request_count <= 10


def test_doctor_talks_to_people_and_fails_a_server_that_cannot_judge(tmp_path, server):
    server.reset()
    server.compat = "text-only"
    server.responder = lambda r: Reply(text="I am a poet, not a parser.")
    r = doctor(tmp_path, server)
    assert r.exit_code == 1, r.output
    assert r.output.startswith("cycle doctor: up to 10 tiny calls to openai:local-model; on a "
                               "paid API at most $0.05 (the cap).")
    assert "structured output: no form worked" in r.output
    assert "tools: the model answered without calling the tool" in r.output
    server.responder = None
    server.compat = None


def test_doctor_refuses_the_offline_model(tmp_path):
    r = CliRunner().invoke(cli, ["doctor", "--model", "offline:default"])
    assert r.exit_code == 2 and "no endpoint to probe" in r.output


@pytest.mark.parametrize("budget", ["nan", "-1"])
def test_a_budget_that_is_no_cap_is_refused(tmp_path, server, budget):
    """--budget nan or -1 reached Budget() and ended in 'internal error: ValueError'."""
    r = doctor(tmp_path, server, "--budget", budget)
    assert r.exit_code == 2 and "Invalid value for '--budget'" in r.output, r.output


def test_a_budget_that_stops_the_first_call_says_so(tmp_path, server):
    """A cap below the first probe's reservation ended in 'internal error:
    UnboundLocalError' (the streaming line read the first probe, never made)."""
    server.reset()
    config = tmp_path / "cycle.yaml"
    config.write_text("prompt: p.yaml\nagent: openai:local-model\ncriteria: [{id: accuracy}]\n"
                      f"providers:\n  openai: {{base_url: '{server.openai_base_url}'}}\n")
    r = CliRunner().invoke(cli, ["doctor", str(config), "--budget", "0", "--json"])
    assert r.exit_code == 1, r.output
    data = json.loads(r.output)
    assert any(n.startswith("stopped at the budget") for n in data["notes"])
    assert server.request_count == 0
