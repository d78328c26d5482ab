"""Every deterministic check, on outputs a user would write them for."""

import pytest
from pydantic import BaseModel, TypeAdapter

from cycle.errors import ConfigError, EvalError
from cycle.judge.checks import CheckContext
from cycle.judge.criteria import CheckSpec
from cycle.records import Usage
from cycle.testing.checks import check_context

SPEC = TypeAdapter(CheckSpec)


def ctx(output: str = "", **kw) -> CheckContext:
    variables = kw.pop("variables", {"order": "A-1042", "name": "Ann"})
    return check_context(output, case_id="c1", input=variables, variables=variables, **kw)


async def score(spec: dict, c: CheckContext) -> float:
    return (await SPEC.validate_python(spec).aevaluate(c)).score


async def test_exact_match_uses_expected_and_options():
    assert await score({"type": "exact"}, ctx("Hello", expected="Hello")) == 100
    assert await score({"type": "exact"}, ctx("hello", expected="Hello")) == 0
    assert await score({"type": "exact", "case_sensitive": False}, ctx("hello", expected="Hello")) == 100
    assert await score({"type": "exact", "value": "a b", "normalize_whitespace": True},
                       ctx("  a \n  b ")) == 100
    with pytest.raises(EvalError):
        await score({"type": "exact"}, ctx("x"))


async def test_contains_scores_share_found_and_fills_templates():
    spec = {"type": "contains", "values": ["{{ order }}", "sorry", "refund"]}
    outcome = await SPEC.validate_python(spec).aevaluate(ctx("Sorry about order A-1042"))
    assert outcome.score == pytest.approx(200 / 3)
    assert "refund" in outcome.reason
    assert await score({"type": "contains", "values": ["SORRY"], "case_sensitive": True},
                       ctx("sorry")) == 0


async def test_contains_any_and_not_contains():
    assert await score({"type": "contains_any", "values": ["x", "order"]}, ctx("the order")) == 100
    assert await score({"type": "contains_any", "values": ["x", "y"]}, ctx("the order")) == 0
    assert await score({"type": "not_contains", "values": ["guarantee"]}, ctx("we guarantee")) == 0
    assert await score({"type": "not_contains", "values": ["guarantee"]}, ctx("we try")) == 100


async def test_regex_compiles_once_and_reports_bad_patterns():
    assert await score({"type": "regex", "pattern": r"#\w-\d{4}"}, ctx("order #A-1042")) == 100
    assert await score({"type": "regex", "pattern": "^hi", "ignore_case": True}, ctx("Hi Ann")) == 100
    assert await score({"type": "regex", "pattern": "^Next", "multiline": True}, ctx("a\nNext step")) == 100
    assert await score({"type": "regex", "pattern": "{{ name }}$"}, ctx("Bye Ann")) == 100
    with pytest.raises(ValueError, match="invalid regular expression"):
        SPEC.validate_python({"type": "regex", "pattern": "("})


class Reply(BaseModel):
    answer: str
    confidence: float


async def test_json_schema_with_schema_or_model():
    schema = {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}
    assert await score({"type": "json_schema", "schema": schema}, ctx('{"answer": "x"}')) == 100
    assert await score({"type": "json_schema", "schema": schema},
                       ctx('```json\n{"answer": "x"}\n```')) == 100
    bad = await SPEC.validate_python({"type": "json_schema", "schema": schema}).aevaluate(ctx('{"a": 1}'))
    assert bad.score == 0 and "answer" in bad.reason
    assert await score({"type": "json_schema", "schema": schema}, ctx("not json")) == 0
    model = "tests.judge.test_checks:Reply"
    assert await score({"type": "json_schema", "model": model},
                       ctx('{"answer": "x", "confidence": 0.5}')) == 100
    assert await score({"type": "json_schema", "model": model}, ctx('{"answer": "x"}')) == 0
    with pytest.raises(ValueError, match="exactly one"):
        SPEC.validate_python({"type": "json_schema"})


async def test_operational_checks():
    c = ctx("x", latency=1.5, duration=2.5, usage=Usage(input_tokens=100, output_tokens=40), cost=0.02)
    assert await score({"type": "max_latency", "seconds": 2}, c) == 100
    assert await score({"type": "max_latency", "seconds": 1}, c) == 0
    assert await score({"type": "completed_within", "seconds": 2}, c) == 0
    assert await score({"type": "completed_within", "seconds": 3}, c) == 100
    assert await score({"type": "max_tokens", "tokens": 50}, c) == 100
    assert await score({"type": "max_tokens", "tokens": 50, "total": True}, c) == 0
    assert await score({"type": "cost_within", "usd": 0.01}, c) == 0
    assert await score({"type": "cost_within", "usd": 0.05}, c) == 100


def mentions_name(c: CheckContext) -> bool:
    return c.variables["name"] in c.output


async def half_async(c: CheckContext) -> tuple[float, str]:
    return 50, "half"


def crashes(c: CheckContext) -> bool:
    raise RuntimeError("boom")


async def test_python_checks_sync_async_and_crash():
    assert await score({"type": "python", "function": "tests.judge.test_checks:mentions_name"},
                       ctx("Hi Ann")) == 100
    outcome = await SPEC.validate_python(
        {"type": "python", "function": "tests.judge.test_checks:half_async"}).aevaluate(ctx())
    assert (outcome.score, outcome.reason) == (50, "half")
    with pytest.raises(EvalError, match="boom"):
        await score({"type": "python", "function": "tests.judge.test_checks:crashes"}, ctx())
    with pytest.raises(ConfigError, match="no 'missing'"):
        await score({"type": "python", "function": "tests.judge.test_checks:missing"}, ctx())
