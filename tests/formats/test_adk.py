"""ADK EvalSets through the real CLI: `cycle import adk` (snake_case and camelCase files, turns,
state scopes, tool uses as trajectory checks), `cycle export adk` of a suite (lossless round
trip) and of a run's traces (tool calls and results correlated), append semantics, bad input."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from google.adk.evaluation.eval_set import EvalSet as AdkEvalSet
from pydantic import ValidationError

from cycle.cases import load_case_file
from cycle.cli import cli

EVALSET = {
    "eval_set_id": "weather_agent_evals",
    "name": "Weather Agent Evaluation Set",
    "description": "golden traces",
    "eval_cases": [
        {"eval_id": "weather_agent_2025-12-23T10:00:00",
         "conversation": [{
             "invocation_id": "s1_inv_0",
             "user_content": {"parts": [{"text": "What's the weather in Tokyo?"}], "role": "user"},
             "final_response": {"parts": [{"text": "Sunny in Tokyo, 21C."}], "role": "model"},
             "intermediate_data": {
                 "tool_uses": [{"id": "c1", "name": "get_weather", "args": {"city": "Tokyo"}},
                               {"id": "c2", "name": "get_forecast", "args": {"city": "Tokyo",
                                                                             "days": 2}}],
                 "tool_responses": [{"id": "c1", "name": "get_weather",
                                     "response": {"result": {"temp": 21}}}],
                 "intermediate_responses": []},
             "creation_timestamp": 1766484000.0}],
         "session_input": {"app_name": "weather", "user_id": "u1",
                           "state": {"user:units": "metric", "city_hint": "Tokyo"}},
         "creation_timestamp": 1766484000.0},
        # camelCase, as ADK also accepts; two turns; no tool expected
        {"evalId": "joke", "conversation": [
            {"invocationId": "i0", "userContent": {"parts": [{"text": "Tell me a joke"}]},
             "finalResponse": {"parts": [{"text": "I only do weather."}]},
             "intermediateData": {"toolUses": []}},
            {"invocationId": "i1", "userContent": {"parts": [{"text": "Please?"}]},
             "finalResponse": {"parts": [{"text": "Still only weather."}]}}]},
    ],
    "creation_timestamp": 1766484000.0,
}
PROMPT = """\
id: WeatherAgent
system: You answer weather questions.
user_template: "{{ input }}"
params: {model: offline:default}
tools:
  - name: get_weather
    description: Weather for a city.
    parameters: {type: object, properties: {city: {type: string}}}
  - name: get_forecast
    description: Forecast for a city.
    parameters: {type: object, properties: {city: {type: string}, days: {type: integer}}}
"""
CONFIG = """\
prompt: prompts/p.yaml
criteria:
  - {id: answers, check: {type: regex, pattern: "."}}
cases: [cases/*.yaml]
run: {iterations: 1}
tools:
  mocks: {get_weather: {value: {temp: 21}}, get_forecast: {value: [sun, rain]}}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "p.yaml").write_text(PROMPT)
    (tmp_path / "cycle.yaml").write_text(CONFIG)
    (tmp_path / "weather.evalset.json").write_text(json.dumps(EVALSET, indent=2))
    return tmp_path


def cycle(*args: str):
    return CliRunner().invoke(cli, list(args))


def adk_reads(path: Path) -> AdkEvalSet:
    """The file as ADK's own EvalSet model reads it (raises if ADK rejects it)."""
    return AdkEvalSet.model_validate_json(path.read_text())


def test_import_turns_eval_cases_into_cycle_cases(project):
    r = cycle("import", "adk", "weather.evalset.json", "--out", "cases/weather.yaml")
    assert r.exit_code == 0, r.output
    assert "wrote 2 cases to cases/weather.yaml" in r.output
    cases = {c.id: c for c in load_case_file(project / "cases" / "weather.yaml")}
    tokyo = cases["weather_agent_2025-12-23T10:00:00"]
    assert tokyo.input == "What's the weather in Tokyo?" and tokyo.expected == "Sunny in Tokyo, 21C."
    assert tokyo.state == {"user": {"units": "metric"}, "session": {"city_hint": "Tokyo"}}
    checks = {c.id: c.check.model_dump() for c in tokyo.criteria}
    assert checks["adk_trajectory"]["tools"] == ["get_weather", "get_forecast"]
    assert checks["adk_trajectory"]["mode"] == "exact"
    second = checks["adk_tool_2"]
    assert (second["type"], second["tool"], second["args"], second["match"]) == (
        "tool_called", "get_forecast", {"city": "Tokyo", "days": 2}, "exact")
    joke = cases["joke"]  # camelCase read; the second turn a follow-up; no tool expected
    assert joke.conversation.user_turns() == ["Please?"] and joke.expected == "Still only weather."
    only = joke.criteria[0].check.model_dump()
    assert (only["type"], only["tools"]) == ("only_tools", [])


def test_a_suite_exported_and_imported_again_is_the_same(project):
    assert cycle("import", "adk", "weather.evalset.json", "--out", "cases/weather.yaml").exit_code == 0
    r = cycle("export", "adk", "--out", "out/set.json")
    assert r.exit_code == 0, r.output
    written = json.loads((project / "out" / "set.json").read_text())
    by_adk = adk_reads(project / "out" / "set.json")
    assert [c.eval_id for c in by_adk.eval_cases] == [c["eval_id"] for c in EVALSET["eval_cases"]
                                                      if "eval_id" in c] + ["joke"]
    assert by_adk.eval_cases[0].conversation[-1].intermediate_data.tool_uses[1].args == {
        "city": "Tokyo", "days": 2}
    # seed 002's names for a new file, from the prompt's id
    assert written["eval_set_id"] == "weather_agent_evals"
    assert written["name"] == "WeatherAgent Evaluation Set"
    tokyo = written["eval_cases"][0]
    assert tokyo["session_input"]["state"] == {"user:units": "metric", "city_hint": "Tokyo"}
    uses = tokyo["conversation"][-1]["intermediate_data"]["tool_uses"]
    assert [(u["name"], u["args"]) for u in uses] == [("get_weather", {"city": "Tokyo"}),
                                                      ("get_forecast", {"city": "Tokyo", "days": 2})]
    assert cycle("import", "adk", "out/set.json", "--out", "again/weather.yaml").exit_code == 0
    assert (project / "again" / "weather.yaml").read_text() == \
        (project / "cases" / "weather.yaml").read_text()


def test_a_runs_traces_export_with_tool_calls_and_results_correlated(project):
    assert cycle("import", "adk", "weather.evalset.json", "--out", "cases/weather.yaml").exit_code == 0
    run = json.loads(cycle("--store", "s.db", "run", "--json", "--no-reports").stdout)
    r = cycle("--store", "s.db", "export", "adk", "--run", run["run_id"], "--out", "run.json")
    assert r.exit_code == 0, r.output
    cases = {c["eval_id"]: c for c in json.loads((project / "run.json").read_text())["eval_cases"]}
    adk_reads(project / "run.json")
    tokyo = cases["weather_agent_2025-12-23T10:00:00"]["conversation"]
    assert tokyo[0]["user_content"]["parts"][0]["text"] == "What's the weather in Tokyo?"
    data = tokyo[0]["intermediate_data"]
    assert data["tool_uses"], "the offline agent called a tool"
    assert [u["id"] for u in data["tool_uses"]] == [x["id"] for x in data["tool_responses"]]
    assert data["tool_responses"][0]["response"] == {"result": {"temp": 21}}
    assert tokyo[-1]["final_response"]["parts"][0]["text"]
    assert len(cases["joke"]["conversation"]) == 2  # one invocation per user turn


def test_export_appends_and_refuses_an_eval_id_already_there(project):
    assert cycle("import", "adk", "weather.evalset.json", "--out", "cases/weather.yaml").exit_code == 0
    (project / "cases" / "more.yaml").write_text("- {id: extra, input: Rain in Oslo?}\n")
    existing = project / "set.json"
    existing.write_text(json.dumps({**EVALSET, "eval_cases": EVALSET["eval_cases"][:0]}))
    r = cycle("export", "adk", "--out", "set.json")
    assert r.exit_code == 0 and "appended 3 eval cases" in r.output
    assert len(adk_reads(existing).eval_cases) == 3
    before = existing.read_text()
    r = cycle("export", "adk", "--out", "set.json")
    assert r.exit_code == 2 and "already in the EvalSet" in r.output
    assert existing.read_text() == before  # nothing half-written
    assert json.loads(before)["eval_set_id"] == "weather_agent_evals"  # the file's own kept


@pytest.mark.parametrize(("content", "message"), [
    ("{\n  \"eval_set_id\": ", "weather.evalset.json:2: not valid JSON"),
    (json.dumps({"eval_cases": []}), "not an ADK EvalSet: eval_set_id: Field required"),
    (json.dumps({"eval_set_id": "x", "eval_cases": [{"eval_id": "a", "conversation": []}]}),
     "eval case 'a' has no conversation"),
])
def test_bad_evalsets_are_clear_errors_and_write_nothing(project, content, message):
    (project / "weather.evalset.json").write_text(content)
    r = cycle("import", "adk", "weather.evalset.json", "--out", "cases/weather.yaml")
    assert r.exit_code == 2 and message in r.output, r.output
    assert "Traceback" not in r.output and not (project / "cases" / "weather.yaml").exists()


def test_import_never_overwrites_a_case_file(project):
    (project / "cases").mkdir()
    (project / "cases" / "weather.yaml").write_text(textwrap.dedent("- {id: mine, input: hi}\n"))
    r = cycle("import", "adk", "weather.evalset.json", "--out", "cases/weather.yaml")
    assert r.exit_code == 2 and "does not overwrite" in r.output
    assert yaml.safe_load((project / "cases" / "weather.yaml").read_text())[0]["id"] == "mine"


def test_a_file_written_by_adk_itself_imports_the_same(project):
    """tests/formats/data/weather.adk-2.13.evalset.json is EVALSET read by google-adk 2.13's
    own EvalSet model and written with its model_dump_json (every null field included);
    it imports to the same cases as the hand-written file."""
    written_by_adk = Path(__file__).parent / "data" / "weather.adk-2.13.evalset.json"
    assert cycle("import", "adk", str(written_by_adk), "--out", "a/cases.yaml").exit_code == 0
    assert cycle("import", "adk", "weather.evalset.json", "--out", "b/cases.yaml").exit_code == 0
    assert (project / "a" / "cases.yaml").read_text() == (project / "b" / "cases.yaml").read_text()


@pytest.mark.parametrize("broken", [
    {"eval_set_id": "x", "eval_cases": {"not": "a list"}},
    {"eval_set_id": "x", "eval_cases": [{"eval_id": "a", "conversation": [{"invocation_id": "i"}]}]},
    {"eval_set_id": "x", "eval_cases": [{"conversation": []}]},
    {"eval_set_id": "x", "eval_cases": [{"eval_id": "a", "conversation": [{
        "invocation_id": "i", "user_content": {"parts": [{"text": "hi"}]},
        "creation_timestamp": "yesterday"}]}]},
])
def test_what_adks_schema_rejects_cycle_rejects_with_a_clear_message(project, broken):
    path = project / "weather.evalset.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(ValidationError):
        adk_reads(path)
    r = cycle("import", "adk", "weather.evalset.json", "--out", "cases/weather.yaml")
    assert r.exit_code == 2 and "weather.evalset.json" in r.output, r.output
    assert "not an ADK EvalSet" in r.output and "Traceback" not in r.output
