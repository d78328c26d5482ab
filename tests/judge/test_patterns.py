"""A user's regular expression that backtracks without end is an error of the
iteration, naming the pattern, within about a second: never a hang of the run."""

from __future__ import annotations

import time

import pytest

from cycle.agents import PromptAgent
from cycle.cases import TestCase
from cycle.evals.runner import Runner
from cycle.judge import Judge
from cycle.judge.criteria import CriterionConfig
from cycle.llm.registry import get_model
from cycle.query import matches
from cycle.records import Prompt
from cycle.testing import clear_scripts, script

EVIL = "^(a|aa)+$"  # backtracks without end even in the regex module
TEXT = "a" * 60 + "b"


@pytest.mark.parametrize("criterion", [
    {"type": "regex", "pattern": EVIL},
    {"type": "toolforge", "expect": {"responseMatches": [EVIL]}},
], ids=["regex-check", "responseMatches"])
async def test_a_runaway_pattern_is_an_error_naming_it_not_a_hang(criterion):
    script("agent", [TEXT], repeat=True)
    try:
        agent = PromptAgent(Prompt(id="p", user_template="{{ q }}"), get_model("scripted:agent"))
        judge = Judge([CriterionConfig(id="shape", check=criterion)])
        started = time.monotonic()
        [r] = (await Runner(agent=agent, judge=judge,
                            cases=[TestCase(id="c", input={"q": "x"})]).run()).results
    finally:
        clear_scripts()
    assert time.monotonic() - started < 10
    assert r.status == "error"
    assert "the pattern /^(a|aa)+$/ took longer than 1 s" in r.error


def test_a_runaway_regex_in_a_state_query_is_an_error_too():
    from cycle.errors import EvalError

    with pytest.raises(EvalError, match="took longer than 1 s"):
        matches({"session": {"note": TEXT}}, {"session.note": {"$regex": EVIL}})


def test_patterns_still_read_as_pythons_re_and_the_classic_bomb_is_fast():
    assert matches({"s": {"n": "Order A-12"}}, {"s.n": {"$regex": r"A-\d+"}})
    started = time.monotonic()  # ^(a+)+$, the issue's: the regex module does not backtrack
    assert not matches({"s": {"n": "a" * 40 + "b"}}, {"s.n": {"$regex": "^(a+)+$"}})
    assert time.monotonic() - started < 1
