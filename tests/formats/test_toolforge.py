"""tool-forge's eval runner contract (seed 001): every assertion kind passing and failing, in
the contract's order with its short-circuit; tokens resolved and missing; staleness; both file
formats; bad files named by file, line and case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cycle.errors import ConfigError
from cycle.formats import toolforge
from cycle.judge.toolforge import Call, Expect, ToolforgeCheck, assess, js_string
from cycle.records import ToolCall, TraceEvent
from cycle.testing.checks import check_context

WEATHER = Call("get_weather", {"city": "Tokyo", "days": 3, "units": None}, True)


def check(response="Sunny in Tokyo, 21C", calls=(WEATHER,), ms=120.0, stubs=None, **expect):
    return assess(Expect.model_validate(expect), response=response, calls=list(calls),
                  duration_ms=ms, stubs=stubs)


@pytest.mark.parametrize(("expect", "holds"), [
    ({"toolsCalled": ["get_weather"]}, True),
    ({"toolsCalled": ["get_forecast"]}, False),
    ({"toolsCalled": []}, False),
    ({"toolsAcceptable": [["get_forecast"], ["get_weather"]]}, True),
    ({"toolsAcceptable": [["get_forecast"]]}, False),
    ({"toolsAcceptable": [["__none__"]]}, False),
    ({"toolsNotCalled": ["delete_city"]}, True),
    ({"toolsNotCalled": ["get_weather"]}, False),
    ({"toolParams": [{"tool": "get_weather", "paramName": "city", "assertion": "equals", "value": "Tokyo"}]}, True),
    ({"toolParams": [{"tool": "get_weather", "paramName": "city", "assertion": "equals", "value": "tokyo"}]}, False),
    ({"toolParams": [{"tool": "get_weather", "paramName": "days", "assertion": "equals", "value": "3"}]}, True),
    ({"toolParams": [{"tool": "get_weather", "paramName": "city", "assertion": "contains", "value": "oky"}]}, True),
    ({"toolParams": [{"tool": "get_weather", "paramName": "city", "assertion": "contains", "value": "Osa"}]}, False),
    ({"toolParams": [{"tool": "get_weather", "paramName": "city", "assertion": "oneOf", "value": ["Osaka", "Tokyo"]}]}, True),
    ({"toolParams": [{"tool": "get_weather", "paramName": "city", "assertion": "oneOf", "value": ["Osaka"]}]}, False),
    ({"toolParams": [{"tool": "get_weather", "paramName": "units", "assertion": "exists"}]}, True),
    ({"toolParams": [{"tool": "get_weather", "paramName": "lang", "assertion": "exists"}]}, False),
    ({"toolParams": [{"tool": "get_weather", "paramName": "lang", "assertion": "notExists"}]}, True),
    ({"toolParams": [{"tool": "get_weather", "paramName": "city", "assertion": "notExists"}]}, False),
    ({"toolParams": [{"tool": "get_weather", "paramName": "city", "assertion": "matches", "value": "^T\\w+o$"}]}, True),
    ({"toolParams": [{"tool": "get_weather", "paramName": "city", "assertion": "matches", "value": "^Os"}]}, False),
    ({"noToolErrors": True}, True),
    ({"responseNonEmpty": True}, True),
    ({"responseContains": ["Tokyo", "21C"]}, True),
    ({"responseContains": ["tokyo"]}, False),  # case-sensitive
    ({"responseContainsAny": [["rain", "Sunny"], ["21C"]]}, True),
    ({"responseContainsAny": [["rain", "snow"]]}, False),
    ({"responseNotContains": ["fetchedAt"]}, True),
    ({"responseNotContains": ["Sunny"]}, False),
    ({"responseMatches": ["\\d+C$"]}, True),
    ({"responseMatches": ["(?<deg>\\d+)F"]}, False),
    ({"maxLatencyMs": 120}, True),
    ({"maxLatencyMs": 119}, False),
    ({"maxTokens": 5}, True),  # 19 characters: about 5 tokens
    ({"maxTokens": 4}, False),
])
def test_each_assertion_kind_passes_and_fails(expect, holds):
    a = check(**expect)
    assert a.passed is holds
    if holds:
        assert a.error is None
    else:
        assert a.error.startswith(next(iter(expect)) + ":"), a.error


def test_none_means_no_tool_is_acceptable():
    assert check(calls=(), toolsAcceptable=[["__none__"]]).passed
    assert check(calls=(), toolsAcceptable=[["get_weather"], ["__none__"]]).passed
    assert not check(toolsAcceptable=[["__none__"]]).passed
    # a set is order-insensitive
    two = (Call("a", {}, True), Call("b", {}, True))
    assert check(calls=two, toolsAcceptable=[["b", "a"]]).passed
    assert not check(calls=two, toolsCalled=["b", "a"]).passed  # toolsCalled is ordered


def test_order_and_short_circuit_name_the_first_failure_and_count_what_ran():
    a = check(response="", toolsCalled=["get_weather"], responseNonEmpty=True,
              responseContains=["Tokyo", "x"], maxLatencyMs=1)
    # toolsCalled held, responseNonEmpty failed: contains and latency did not run
    assert a.error == "responseNonEmpty: the response is empty"
    assert (a.run, a.passed) == (2, False)
    # the score still sees every assertion: 1 of 5 holds
    assert (a.held, a.total) == (1, 5)
    ok = check(toolsCalled=["get_weather"], responseContains=["Tokyo", "21C"])
    assert (ok.passed, ok.run, ok.error) == (True, 3, None)


def test_a_parameter_of_a_tool_that_was_not_called_is_skipped():
    a = check(calls=(), toolParams=[{"tool": "get_weather", "paramName": "city",
                                     "assertion": "equals", "value": "Tokyo"}])
    assert a.passed and a.skipped == 1 and a.run == 0


def test_no_tool_errors_in_stub_mode_real_execution_and_routing_only():
    failed = (Call("get_weather", {}, False),)
    # tools that ran (an endpoint, stub mode): a failed one fails the assertion
    assert check(calls=failed, noToolErrors=True).error == "noToolErrors: [get_weather] failed"
    # stub mode: a tool with no stub fails it, whether or not it "succeeded"
    hallucinated = (Call("get_weather", {}, True), Call("book_flight", {}, True))
    a = check(calls=hallucinated, stubs=["get_weather"], noToolErrors=True)
    assert a.error == "noToolErrors: called [book_flight], not stubbed by the case"
    # routing only: nothing ran, nothing failed
    assert check(calls=(Call("get_weather", {}, True),), noToolErrors=True).passed


@pytest.mark.parametrize(("value", "text"), [
    (150, "150"), (150.0, "150"), (178.5, "178.5"), (0.1, "0.1"), (1e21, "1e+21"),
    (1e-7, "1e-7"), (0.000001, "0.000001"), (-2.5, "-2.5"), (True, "true"), (None, "null"),
    ("AAPL", "AAPL"), ([1, "a"], "1,a"), ({"a": 1, "b": [2]}, '{"a":1,"b":[2]}'),
])
def test_values_become_text_as_javascript_string_does(value, text):
    assert js_string(value) == text


def test_the_check_reads_the_trace_and_scores_the_share_that_holds():
    call = ToolCall(id="c1", name="get_weather", arguments={"city": "Tokyo"})
    trace = (TraceEvent(kind="user", text="weather?"),
             TraceEvent(kind="model", at=0.1, tool_calls=(call,)),
             TraceEvent(kind="tool_error", at=0.2, tool="get_weather", call_id="c1", error="down"),
             TraceEvent(kind="model", at=0.3, text="Sorry"),
             TraceEvent(kind="final", at=0.45, text="Sorry"))
    ctx = check_context("Sorry", input="weather?", trace=trace, duration=9.0)
    c = ToolforgeCheck(expect=Expect(toolsCalled=["get_weather"], noToolErrors=True,
                                     responseContains=["Sorry"], maxLatencyMs=450))
    out = c.evaluate(ctx)
    # latency is the final event's time (0.45 s), not the whole step's
    assert out.reason == "noToolErrors: [get_weather] failed"
    assert out.score == pytest.approx(75.0)


# -- files and tokens ---------------------------------------------------------------------


def write(tmp_path: Path, data, name="get_weather.golden.json") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return p


SEED = {"holdings": {"equities": [{"symbol": "AAPL", "shares": 150}]},
        "totals": {"portfolioValue": 125000, "mix": {"eq": 0.6}}}


def case(cid="c1", message="hi", **expect):
    return {"id": cid, "description": "d", "input": {"message": message}, "expect": expect}


def test_tokens_resolve_and_missing_ones_are_skipped_with_a_warning(tmp_path):
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps(SEED))
    p = write(tmp_path, [case(
        responseContains=["{{seed:holdings.equities[0].symbol}} x{{seed:holdings.equities[0].shares}}",
                          "{{seed:totals.nothing}}", "{{snapshot:prices.AAPL}}"],
        responseContainsAny=[["{{seed:totals.mix}}", "{{snapshot:a.b}}"], ["{{snapshot:c}}"]],
        responseNotContains=["{{seed:holdings.equities[3].symbol}}"],
        toolParams=[{"tool": "t", "paramName": "n", "assertion": "equals",
                     "value": "{{seed:totals.portfolioValue}}"},
                    {"tool": "t", "paramName": "s", "assertion": "oneOf",
                     "value": ["{{seed:holdings.equities[0].symbol}}", "{{snapshot:x}}"]},
                    {"tool": "t", "paramName": "m", "assertion": "equals",
                     "value": "{{snapshot:x}}"}])])
    loaded = toolforge.load(p, seed_manifest=seed)
    check_ = loaded.check_of(loaded.cases[0])
    e = check_.expect
    assert e.responseContains == ["AAPL x150"]
    assert e.responseContainsAny == [['{"eq":0.6}']]
    assert e.responseNotContains == []
    assert [(tp.paramName, tp.value) for tp in e.toolParams] == [("n", "125000"), ("s", ["AAPL"])]
    # skipped: 2 contains values, the emptied group, the not-contains value, the m param
    assert check_.skipped == 5
    assert "{{snapshot:prices.AAPL}}" in check_.skipped_tokens
    assert "{{seed:totals.nothing}}" in check_.skipped_tokens
    assert any("snapshot capture is not configured" in w for w in loaded.warnings)
    assert any("{{seed:totals.nothing}} did not resolve (the path is not in the data)" in w
               for w in loaded.warnings)
    # with a snapshot the same file resolves them
    again = toolforge.to_cases(loaded.file, toolforge.Tokens(seed=SEED, snapshot={
        "prices": {"AAPL": 178.5}, "a": {"b": "up"}, "c": "z", "x": "y"}))
    e2 = again.check_of(again.cases[0]).expect
    assert e2.responseContains[-1] == "178.5" and e2.responseContainsAny[1] == ["z"]


@pytest.mark.parametrize(("token", "message"), [
    ("{{seed:holdings..x}}", "empty segment"),
    ("{{seed:holdings.equities[x]}}", "an index is written key[0]"),
    ("{{seed:a[0][1]}}", "an index is written key[0]"),
    ("{{live:a.b}}", "unknown token source"),
])
def test_a_bad_token_is_an_error_naming_the_file_line_and_case(tmp_path, token, message):
    p = write(tmp_path, {"cases": [case(), case("c2", responseContains=[token])]})
    with pytest.raises(ConfigError) as e:
        toolforge.load(p, seed_manifest=tmp_path / "none.json")
    assert message in e.value.message and "case 'c2'" in e.value.message
    assert e.value.file == str(p) and e.value.line is not None and e.value.line > 5


def test_seed_tokens_need_the_manifest_before_anything_runs(tmp_path):
    p = write(tmp_path, [case(responseContains=["{{seed:a}}"])])
    with pytest.raises(ConfigError) as e:
        toolforge.load(p, seed_manifest=tmp_path / "missing.json")
    assert "seed manifest" in e.value.message and "missing.json" in e.value.message
    # a file without seed tokens does not need one
    assert toolforge.load(write(tmp_path, [case()], "b.json"),
                          seed_manifest=tmp_path / "missing.json").cases


@pytest.mark.parametrize(("data", "message"), [
    ('{"cases": [\n  {"id": "a",,}\n]}', "not valid JSON"),
    ({"cases": "x"}, "expected {"),
    ([case(responseContian=["x"])], "unknown assertion kind 'responseContian'"),
    ([{"id": "a", "input": {"text": "hi"}}], "no input.message"),
    ([case("a"), case("a")], "duplicate case id 'a'"),
    ([{"input": {"message": "x"}}], "has no 'id'"),
    ([case(toolParams=[{"tool": "t", "paramName": "p", "assertion": "like", "value": "x"}])],
     "assertion"),
    ([case(toolParams=[{"tool": "t", "paramName": "p", "assertion": "oneOf", "value": "x"}])],
     "'oneOf' needs a list"),
    ([case(responseMatches=["(unclosed"])], "invalid regular expression"),
    ([{**case(), "stubs": ["x"]}], "'stubs' must be an object"),
])
def test_malformed_files_name_the_file_and_what_is_wrong(tmp_path, data, message):
    p = write(tmp_path, data)
    with pytest.raises(ConfigError) as e:
        toolforge.load(p)
    assert message in str(e.value) and e.value.file == str(p)


def test_unknown_kind_suggests_the_closest(tmp_path):
    p = write(tmp_path, {"metadata": {}, "cases": [case(), case("b", toolsCaled=["x"])]})
    with pytest.raises(ConfigError) as e:
        toolforge.load(p)
    assert "Did you mean 'toolsCalled'?" in str(e.value)
    lines = p.read_text().splitlines()
    assert e.value.line == next(n for n, x in enumerate(lines, 1) if '"toolsCaled"' in x)


def test_both_formats_and_what_a_case_becomes(tmp_path):
    stubbed = {**case("s", toolsCalled=["get_weather"]), "stubs": {"get_weather": {"t": 21}},
               "maxTurns": 3, "noToolErrors": True, "tags": ["weather"], "difficulty": "easy"}
    bare = toolforge.load(write(tmp_path, [case("r"), stubbed], "w.labeled.json"))
    assert bare.file.metadata is None and bare.file.tier == "labeled"
    assert toolforge.staleness(bare.file, {}).warnings == []  # no metadata: no checks
    routing, stub = bare.cases
    assert (routing.run_tools, routing.max_steps, routing.mocks) == (False, None, {})
    assert stub.run_tools and stub.max_steps == 3 and stub.tags == ["weather"]
    assert stub.mocks["get_weather"].value == {"t": 21}
    # noToolErrors written on the case (the contract's field table) is an assertion too
    assert bare.check_of(stub).expect.noToolErrors is True
    assert bare.check_of(stub).stubs == ["get_weather"]
    env = toolforge.load(write(tmp_path, {"metadata": {"toolName": "get_weather"},
                                          "cases": [case()]}, "evals.json"))
    assert env.file.tool_name == "get_weather" and env.file.tier == "golden"


def test_staleness_checks_against_the_registry(tmp_path):
    meta = {"toolName": "get_weather", "toolVersion": "1.4.0", "registrySize": 2,
            "descriptionHash": toolforge.description_hash("Current weather for a city")}
    ef = toolforge.read_eval_file(write(tmp_path, {"metadata": meta, "cases": [case()]}))
    reg = tmp_path / "tools.json"
    reg.write_text(json.dumps({"tools": [
        {"name": "get_weather", "description": "Current weather for a city", "version": "1.9.2"},
        {"name": "other", "description": "x"}]}))
    fresh = toolforge.staleness(ef, toolforge.load_registry(reg))
    assert fresh.warnings == [] and not fresh.stale
    assert fresh.current["registrySize"] == 2 and fresh.current["toolVersion"] == "1.9.2"
    reg.write_text(json.dumps([
        {"name": "get_weather", "description": "Weather now, and a forecast", "version": "2.0.0"},
        *({"name": f"t{i}"} for i in range(3))]))
    stale = toolforge.staleness(ef, toolforge.load_registry(reg))
    assert stale.stale and len(stale.warnings) == 3
    assert stale.warnings[0].startswith(f"Evals for get_weather generated against description "
                                        f"hash {meta['descriptionHash']}, current is ")
    assert stale.warnings[1] == ("Registry has grown from 2 to 4 tools. Labeled evals may have "
                                 "under-specified toolsAcceptable sets.")
    assert stale.warnings[2] == ("Tool get_weather is version 2.0.0, evals were generated for "
                                 "1.4.0. Schema may have changed.")
    ts = tmp_path / "tools.exports.ts"
    ts.write_text("export * from './weather'")
    with pytest.raises(ConfigError, match="cycle reads JSON or YAML"):
        toolforge.load_registry(ts)


def test_baseline_diff_and_an_unknown_baseline(tmp_path):
    before = {"runId": "r1", "cases": [{"id": "a", "passed": True}, {"id": "b", "passed": False},
                                       {"id": "c", "passed": True}]}
    now = [{"id": "a", "passed": False}, {"id": "b", "passed": True}, {"id": "c", "passed": True},
           {"id": "new", "passed": False}]
    assert toolforge.diff_baseline(before, now) == (["a"], ["b"])
    (tmp_path / "r1.json").write_text(json.dumps(before))
    assert toolforge.load_baseline(tmp_path, "r1")["runId"] == "r1"
    with pytest.raises(ConfigError) as e:
        toolforge.load_baseline(tmp_path, "r2")
    assert "r2" in e.value.message and "Known runs: r1" in str(e.value)


def test_a_result_file_is_written_whole_or_not_at_all(tmp_path):
    ok = toolforge.write_result(tmp_path, {"runId": "r1", "cases": []})
    assert json.loads(ok.read_text())["runId"] == "r1"
    # a write that fails half-way (a value JSON cannot hold) leaves neither the file nor a
    # temporary beside it, and an earlier result is untouched
    with pytest.raises(TypeError):
        toolforge.write_result(tmp_path, {"runId": "r2", "cases": [object()]})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r1.json"]
