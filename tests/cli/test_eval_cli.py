"""`cycle run --eval` through the real CLI: an HTTP agent on loopback, the EvalSuiteResult file
field for field, the console summary, the timeout, baselines, bad input caught before any call,
and a cycle.yaml prompt playing the agent through the openai SDK (routing-only and stub mode)."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import LoopbackServer, Reply
from cycle.testing.endpoint import AgentEndpoint

CONTRACT_KEYS = {"runId", "timestamp", "tier", "toolName", "agentEndpoint", "metadata",
                 "stalenessWarnings", "cases", "summary", "baselineRunId", "regressions",
                 "newPasses"}


def weather_agent(body):
    message = body["message"]
    if "slow" in message:
        time.sleep(1.5)
    if "Tokyo" in message:
        return {"response": "Sunny in Tokyo, 21C.", "toolCalls": [
            {"name": "get_weather", "success": True, "durationMs": 4, "params": {"city": "Tokyo"}}]}
    if "broken" in message:
        return {"response": "The weather service is down.", "toolCalls": [
            {"name": "get_weather", "success": False, "durationMs": 9, "params": {"city": "X"}}]}
    return {"response": "I can only help with the weather.", "toolCalls": []}


EVALS = {
    "metadata": {"toolName": "get_weather", "toolVersion": "1.0.0", "registrySize": 1,
                 "descriptionHash": "000000000000"},
    "cases": [
        {"id": "gs-get-weather-001", "description": "trigger phrase - direct question",
         "input": {"message": "Weather in Tokyo?"},
         "expect": {"toolsCalled": ["get_weather"], "noToolErrors": True,
                    "toolParams": [{"tool": "get_weather", "paramName": "city",
                                    "assertion": "equals", "value": "{{seed:home.city}}"}],
                    "responseContains": ["Tokyo", "{{snapshot:temp}}"]}},
        {"id": "gs-get-weather-002", "description": "no raw JSON leak",
         "input": {"message": "Tokyo again"},
         "expect": {"responseNotContains": ["Sunny"]}},
        {"id": "gs-get-weather-003", "description": "off topic",
         "input": {"message": "Tell me a joke"},
         "expect": {"toolsAcceptable": [["__none__"]], "responseNonEmpty": True}},
    ],
}


def invoke(tmp_path, *args):
    return CliRunner().invoke(cli, ["--store", str(tmp_path / "store.db"), *args])


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "seed-manifest.json").write_text(json.dumps({"home": {"city": "Tokyo"}}))
    (tmp_path / "evals" / "get_weather.golden.json").write_text(json.dumps(EVALS, indent=2))
    return tmp_path


@pytest.fixture
def endpoint():
    with AgentEndpoint(weather_agent) as e:
        yield e


def results(tmp_path: Path, folder="evals/results") -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp_path / folder).glob("*.json"))]


def test_an_endpoint_run_writes_the_suite_result_and_the_summary(project, endpoint):
    r = invoke(project, "run", "--eval", "evals/get_weather.golden.json",
               "--agent-endpoint", endpoint.url)
    assert r.exit_code == 1, r.output
    # the summary: one line a case, the failure's reason under it, the totals
    assert "═══ get_weather — golden evals ═══" in r.stdout
    assert "✓ gs-get-weather-001" in r.stdout and "✗ gs-get-weather-002" in r.stdout
    assert "→ responseNotContains: found 'Sunny' in response" in r.stdout
    assert "2/3 passed | 1 failed | 1 skipped assertions" in r.stdout
    # the snapshot token was skipped with a warning, never silently
    assert "{{snapshot:temp}} did not resolve" in r.stderr
    [result] = results(project)
    assert CONTRACT_KEYS <= set(result) and result["tier"] == "golden"
    assert result["agentEndpoint"] == endpoint.url and result["baselineRunId"] is None
    assert set(result["metadata"]) == {"toolVersion", "descriptionHash", "registrySize",
                                       "evalFileHash"}
    one, two, three = result["cases"]
    assert one == {**one, "id": "gs-get-weather-001", "passed": True, "assertionsRun": 4,
                   "assertionsSkipped": 1}
    assert one["details"] == {"toolsCalled": ["get_weather"], "responseLength": 20,
                              "skippedTokens": ["{{snapshot:temp}}"]}
    assert two["error"] == "responseNotContains: found 'Sunny' in response"
    assert three["passed"] and three["details"]["toolsCalled"] == []
    assert result["summary"] == {**result["summary"], "totalCases": 3, "passed": 2, "failed": 1,
                                 "skippedAssertions": 1, "estimatedCostUsd": None}
    # the endpoint was called as the contract says: POST {message}
    assert sorted(b["message"] for b in endpoint.requests) == sorted(
        c["input"]["message"] for c in EVALS["cases"])
    # and the run is a cycle run too: compare reads it
    again = invoke(project, "run", "--eval", "evals/get_weather.golden.json",
                   "--agent-endpoint", endpoint.url, "-q")
    assert again.exit_code == 1
    ids = [x["runId"] for x in results(project)]
    cmp = invoke(project, "compare", *ids, "--json")
    assert cmp.exit_code == 0, cmp.output
    assert json.loads(cmp.stdout)["cases"]


def test_a_tool_that_failed_at_the_endpoint_fails_no_tool_errors(project, endpoint):
    evals = [{"id": "b", "input": {"message": "broken"}, "expect": {"noToolErrors": True}}]
    (project / "b.json").write_text(json.dumps(evals))
    r = invoke(project, "run", "--eval", "b.json", "--agent-endpoint", endpoint.url, "--json")
    assert r.exit_code == 1, r.output
    data = json.loads(r.stdout)
    assert data["cases"][0]["error"] == "noToolErrors: [get_weather] failed"
    assert data["tier"] == "golden" and data["toolName"] == "b"


def test_the_per_case_timeout_fails_that_case_with_timeout(project, endpoint):
    evals = [{"id": "slow", "input": {"message": "slow Tokyo"}, "expect": {}},
             {"id": "fast", "input": {"message": "Tokyo"}, "expect": {}}]
    (project / "t.json").write_text(json.dumps(evals))
    r = invoke(project, "run", "--eval", "t.json", "--agent-endpoint", endpoint.url,
               "--timeout-ms", "300", "--concurrency", "2", "--json")
    assert r.exit_code == 3, r.output  # an error kept a case from being judged
    cases = {c["id"]: c for c in json.loads(r.stdout)["cases"]}
    assert cases["slow"]["passed"] is False and cases["slow"]["error"].startswith("timeout")
    assert cases["fast"]["passed"] is True


def test_baseline_regressions_and_new_passes_are_printed_and_recorded(project, endpoint):
    first = invoke(project, "run", "--eval", "evals/get_weather.golden.json",
                   "--agent-endpoint", endpoint.url, "--json")
    base = json.loads(first.stdout)["runId"]
    changed = json.loads(json.dumps(EVALS))
    changed["cases"][0]["expect"]["responseContains"] = ["Kyoto"]  # passed before, fails now
    changed["cases"][1]["expect"]["responseNotContains"] = ["snow"]  # failed before, passes now
    (project / "evals" / "get_weather.golden.json").write_text(json.dumps(changed))
    r = invoke(project, "run", "--eval", "evals/get_weather.golden.json",
               "--agent-endpoint", endpoint.url, "--baseline", base)
    assert r.exit_code == 1
    assert f"✗ 1 REGRESSION since {base}:" in r.stdout and "✗ gs-get-weather-001" in r.stdout
    assert "✓ 1 new pass: gs-get-weather-002" in r.stdout
    latest = next(x for x in results(project) if x["runId"] != base)
    assert latest["baselineRunId"] == base
    assert (latest["regressions"], latest["newPasses"]) == (["gs-get-weather-001"],
                                                            ["gs-get-weather-002"])


def test_a_snapshot_function_and_a_runner_config_file(project, endpoint, monkeypatch):
    (project / "snap.py").write_text("def capture():\n    return {'temp': '21C'}\n")
    monkeypatch.syspath_prepend(str(project))
    (project / "runner.json").write_text(json.dumps({
        "agentEndpoint": endpoint.url, "snapshotEnabled": True, "snapshot": "snap:capture",
        "outputDir": "out/", "concurrency": 2, "timeoutMs": 5000, "baselineRunId": None}))
    r = invoke(project, "run", "--eval", "evals/get_weather.golden.json",
               "--runner-config", "runner.json", "--json")
    data = json.loads(r.stdout)
    assert data["cases"][0]["assertionsSkipped"] == 0 and data["cases"][0]["passed"]
    assert (project / "out" / f"{data['runId']}.json").exists()


@pytest.mark.parametrize(("setup", "args", "message"), [
    (lambda p: None, ["--baseline", "nope"], "baseline run 'nope' is not in evals/results"),
    (lambda p: (p / "evals" / "seed-manifest.json").unlink(), [],
     "the seed manifest 'evals/seed-manifest.json' does not exist"),
    (lambda p: (p / "evals" / "get_weather.golden.json").write_text('{"cases": [{"id": "a",'),
     [], "get_weather.golden.json:1: not valid JSON"),
    (lambda p: (p / "evals" / "get_weather.golden.json").write_text(
        json.dumps([{"id": "a", "input": {"message": "m"}, "expect": {"toolsUsed": []}}])),
     [], "case 'a': unknown assertion kind 'toolsUsed'"),
    (lambda p: (p / "ro").write_text("a file, not a folder"), ["--output-dir", "ro/x"],
     "cannot write the output folder"),
    (lambda p: None, ["--tool-registry", "tools/tools.exports.ts"], "tool registry"),
    (lambda p: None, ["--snapshot", "nosuchmodule:capture"], "cannot import module"),
    # an id cycle refuses (it would act on the terminal) was an internal error, exit 4
    (lambda p: (p / "evals" / "get_weather.golden.json").write_text(
        json.dumps([{"id": "a\u001b[2Jb", "input": {"message": "m"}, "expect": {}}])),
     [], "[0].id): a case id may not hold control characters"),
])
def test_bad_input_exits_2_before_any_call_and_writes_nothing(project, endpoint, setup, args,
                                                              message):
    setup(project)
    r = invoke(project, "run", "--eval", "evals/get_weather.golden.json",
               "--agent-endpoint", endpoint.url, *args)
    assert r.exit_code == 2, r.output
    assert message in r.stderr and "Traceback" not in r.output
    assert endpoint.requests == []
    assert not (project / "evals" / "results").exists() or results(project) == []


def test_an_unreachable_endpoint_and_flags_that_do_not_fit(project):
    r = invoke(project, "run", "--eval", "evals/get_weather.golden.json",
               "--agent-endpoint", "http://127.0.0.1:9/chat")
    assert r.exit_code == 2 and "is not reachable" in r.stderr
    r = invoke(project, "run", "--eval", "evals/get_weather.golden.json")
    assert r.exit_code == 2 and "--eval needs an agent" in r.stderr
    r = invoke(project, "run", "--agent-endpoint", "http://x")
    assert r.exit_code == 2 and "--agent-endpoint goes with --eval" in r.output
    r = invoke(project, "run", "--eval", "x.json", "--judge", "offline:default")
    assert r.exit_code == 2 and "--judge does not apply to --eval" in r.output


# -- a cycle.yaml prompt plays the agent ---------------------------------------------------

PROMPT = """
id: weather-agent
system: You answer weather questions with the get_weather tool.
user_template: "{{ input }}"
params: {model: "openai:gpt-4o-mini"}
tools:
  - name: get_weather
    description: Current weather for a city
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
  - name: get_forecast
    description: The forecast
"""


def model(request):
    """get_weather for Tokyo; after a tool result, an answer quoting it; a hallucinated
    tool for 'book'."""
    tool_results = [m for m in request.messages if m["role"] == "tool"]
    if tool_results:
        return Reply(text=f"Here it is: {tool_results[-1]['content']}")
    if "book" in request.last_user:
        return Reply(tool_calls=[("book_flight", {"to": "Tokyo"})])
    if "forecast" in request.last_user:
        return Reply(tool_calls=[("get_forecast", {})])
    return Reply(tool_calls=[("get_weather", {"city": "Tokyo"})])


def test_a_cycle_yaml_prompt_plays_the_agent_routing_only_and_with_stubs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "agent.yaml").write_text(PROMPT)
    evals = [
        # routing only: the tool is chosen, never run (no mock needed), no final text
        {"id": "route", "input": {"message": "Weather in Tokyo?"},
         "expect": {"toolsCalled": ["get_weather"], "noToolErrors": True,
                    "toolParams": [{"tool": "get_weather", "paramName": "city",
                                    "assertion": "equals", "value": "Tokyo"}]}},
        # stub mode: the stub answers, the final response quotes it
        {"id": "stub", "input": {"message": "Weather in Tokyo?"},
         "stubs": {"get_weather": {"temp": "21C"}},
         "expect": {"toolsCalled": ["get_weather"], "noToolErrors": True,
                    "responseContains": ["21C"]}},
        # stub mode: a tool that does not exist fails noToolErrors
        {"id": "hallucinated", "input": {"message": "book me a flight"},
         "stubs": {"get_weather": {}}, "maxTurns": 2, "expect": {"noToolErrors": True}},
        # stub mode: a real tool with no stub is not run: the case errors, saying how to stub it
        {"id": "unstubbed", "input": {"message": "forecast please"},
         "stubs": {"get_weather": {}}, "expect": {}},
    ]
    (tmp_path / "evals.labeled.json").write_text(json.dumps(evals))
    (tmp_path / "cycle.yaml").write_text(textwrap.dedent("""
        prompt: prompts/agent.yaml
        criteria: [{id: tone, rubric: Polite.}]
        providers: {openai: {base_url: BASE}}
        cache: {enabled: false}
    """))
    with LoopbackServer(responder=model) as srv:
        cfg = tmp_path / "cycle.yaml"
        cfg.write_text(cfg.read_text().replace("BASE", srv.openai_base_url))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        r = invoke(tmp_path, "run", "--eval", "evals.labeled.json", "--json")
        calls = srv.request_count
    assert r.exit_code == 3, r.output
    data = json.loads(r.stdout)
    cases = {c["id"]: c for c in data["cases"]}
    assert cases["route"]["passed"] and cases["route"]["details"]["responseLength"] == 0
    assert cases["stub"]["passed"] and cases["stub"]["details"]["toolsCalled"] == ["get_weather"]
    assert cases["hallucinated"]["error"] == ("noToolErrors: called [book_flight], not stubbed "
                                              "by the case")
    assert "get_forecast" in cases["unstubbed"]["error"]
    assert "has no mock" in cases["unstubbed"]["error"]
    # cycle.yaml's LLM criterion is not asked: the eval file's assertions are the judge
    assert calls == 1 + 2 + 2 + 1
    assert data["agentEndpoint"] == "openai:gpt-4o-mini" and data["tier"] == "labeled"
    assert data["summary"]["estimatedCostUsd"] is not None


def test_eval_files_are_case_files_of_a_cycle_yaml(tmp_path, monkeypatch):
    """The same eval file as the suite of cycle.yaml: judged on its assertions (a required
    criterion) beside cycle.yaml's own criteria, so `cycle run` and `cycle improve` use it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "agent.yaml").write_text(PROMPT)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "seed-manifest.json").write_text(json.dumps({"city": "Tokyo"}))
    (tmp_path / "evals" / "weather.golden.json").write_text(json.dumps({"cases": [
        {"id": "route", "input": {"message": "Weather in Tokyo?"},
         "expect": {"toolsCalled": ["get_weather"],
                    "toolParams": [{"tool": "get_weather", "paramName": "city",
                                    "assertion": "equals", "value": "{{seed:city}}"}]}},
        {"id": "stub", "input": {"message": "Weather?"}, "stubs": {"get_weather": {"t": "9C"}},
         "expect": {"responseContains": ["21C"]}}]}))
    (tmp_path / "cycle.yaml").write_text(textwrap.dedent("""
        prompt: prompts/agent.yaml
        criteria: [{id: short, check: {type: max_tokens, tokens: 200}}]
        cases: [evals/*.golden.json]
        providers: {openai: {base_url: BASE}}
    """))
    with LoopbackServer(responder=model) as srv:
        cfg = tmp_path / "cycle.yaml"
        cfg.write_text(cfg.read_text().replace("BASE", srv.openai_base_url))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        r = invoke(tmp_path, "run", "cycle.yaml", "-n", "1", "--json", "--no-reports")
    assert r.exit_code == 1, r.output
    cases = {c["id"]: c for c in json.loads(r.stdout)["cases"]}
    assert cases["route"]["status"] == "passed"
    assert cases["stub"]["status"] == "failed"
    from cycle.evals.results import load_run
    from cycle.store import Store

    store = Store.open(tmp_path / "store.db")
    run = load_run(store.runs, json.loads(r.stdout)["run_id"])
    verdicts = {v.criterion_id: v for v in run.cases["stub"].representative.verdicts}
    store.close()
    assert set(verdicts) == {"short", "toolforge"} and verdicts["toolforge"].required
    assert verdicts["toolforge"].reasoning == ("responseContains: expected '21C' in response but "
                                               "not found")


def test_resume_pays_nothing_finished_and_report_dir_adds_cycle_reports(project, endpoint):
    first = invoke(project, "run", "--eval", "evals/get_weather.golden.json",
                   "--agent-endpoint", endpoint.url, "--json")
    run_id = json.loads(first.stdout)["runId"]
    asked = len(endpoint.requests)
    again = invoke(project, "run", "--eval", "evals/get_weather.golden.json",
                   "--agent-endpoint", endpoint.url, "--resume", run_id,
                   "--report-dir", "reports")
    assert again.exit_code == 1, again.output
    assert len(endpoint.requests) == asked  # every case was finished: none is sent again
    assert [r["runId"] for r in results(project)] == [run_id]
    assert "2/3 passed" in again.stdout
    assert sorted(p.suffix for p in (project / "reports").iterdir()) == [".html", ".json", ".md", ".xml"]


def test_cycle_cases_written_as_json_stay_cycle_cases(tmp_path, monkeypatch):
    """A .json case file in cycle's own format is not taken for a tool-forge file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "p.yaml").write_text(
        'id: p\nsystem: hi\nuser_template: "{{ q }}"\nparams: {model: "offline:default"}\n')
    (tmp_path / "cases.json").write_text(json.dumps([
        {"id": "a", "input": {"q": "hello"}, "expected": "hello",
         "criteria": [{"id": "says", "check": {"type": "regex", "pattern": "."}}]},
        {"id": "b", "input": {"q": "world"}}]))
    (tmp_path / "cycle.yaml").write_text(
        "prompt: prompts/p.yaml\ncriteria: [{id: any, check: {type: regex, pattern: '.'}}]\n"
        "cases: [cases.json]\n")
    r = invoke(tmp_path, "run", "cycle.yaml", "-n", "1", "--json", "--no-reports")
    assert r.exit_code == 0, r.output
    assert sorted(c["id"] for c in json.loads(r.stdout)["cases"]) == ["a", "b"]
