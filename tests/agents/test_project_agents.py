"""A project's Python agent and mock functions are its own (``cycle.imports``): two
projects in one process, each with ``agent.py`` (``agent:run``) and a mock module of
the same name beside its cycle.yaml, each run theirs, and the modules theirs import by
a plain name."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from tests.test_imports import means_of_runs

PROMPT = textwrap.dedent("""\
    id: p
    system: Answer.
    user_template: '{{ q }}'
    tools:
      - name: lookup
        description: Look it up.
        parameters: {type: object, properties: {q: {type: string}}, required: [q]}
    """)


def _project(folder: Path, word: str, *, mocked: bool) -> Path:
    """A project whose agent ``agent:run`` answers ``word``: from ``helpers.py`` beside
    it, or (``mocked``) from the tool ``lookup``, mocked by ``answers:lookup``."""
    folder.mkdir()
    (folder / "helpers.py").write_text(f"WORD = {word!r}\n")
    (folder / "answers.py").write_text(
        f"def lookup(arguments, context):\n    return {{'word': {word!r}}}\n")
    if mocked:
        (folder / "agent.py").write_text(
            "def run(inp, tools):\n    return tools.call('lookup', q=inp['q'])['word']\n")
    else:
        (folder / "agent.py").write_text("import helpers\n\ndef run(inp):\n"
                                         "    return helpers.WORD\n")
    (folder / "p.yaml").write_text(PROMPT)
    (folder / "cases.yaml").write_text("- id: one\n  input: {q: hi}\n")
    mocks = "tools: {mocks: {lookup: {function: 'answers:lookup'}}}\n" if mocked else ""
    (folder / "cycle.yaml").write_text(textwrap.dedent(f"""\
        prompt: p.yaml
        agent: {{function: 'agent:run'}}
        criteria: [{{id: word, check: {{type: contains, values: [{word}]}}}}]
        cases: [cases.yaml]
        """) + mocks)
    return folder / "cycle.yaml"


@pytest.mark.parametrize("mocked", [False, True], ids=["agent", "mock"])
def test_two_projects_agents_and_mocks_of_one_name_each_run_their_own(tmp_path, mocked):
    configs = [_project(tmp_path / word, word, mocked=mocked)
               for word in ("alpha", "beta", "gamma")]
    assert means_of_runs(configs) == [100, 100, 100]
    assert not {"agent", "helpers", "answers"} & set(sys.modules)


@pytest.mark.parametrize(("path", "says"), [
    ("agent:runn", ["module 'agent' has no 'runn'", "Define runn in it", "agent.py"]),
    ("agnt:run", ["cannot import module 'agnt'"]),
])
def test_a_missing_agent_function_or_module_is_named_with_the_fix(tmp_path, path, says):
    cfg = _project(tmp_path / "p", "alpha", mocked=False)
    cfg.write_text(cfg.read_text().replace("agent:run", path))
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", str(cfg), "-n", "1",
                                 "--no-reports"])
    assert r.exit_code == 2, r.output
    assert all(said in r.output.replace("\n", "") for said in says), r.output


def _direct(folder: Path, word: str, *, mocked: bool) -> Path:
    """A project whose agent calls its declared tool ``tools:lookup`` directly, by a
    plain ``from tools import lookup``: mocked (``word``), or passed through to the real
    function (``real-word``)."""
    folder.mkdir()
    (folder / "tools.py").write_text(
        f"def lookup(q):\n    return {{'word': 'real-{word}'}}\n")
    (folder / "agent.py").write_text(
        "from tools import lookup\n\ndef run(inp):\n    return lookup(q=inp['q'])['word']\n")
    (folder / "p.yaml").write_text(PROMPT.replace("- name: lookup\n",
                                                  "- name: lookup\n    function: tools:lookup\n"))
    (folder / "cases.yaml").write_text("- id: one\n  input: {q: hi}\n")
    expected = word if mocked else f"real-{word}"
    mock = f"{{value: {{word: {word}}}}}" if mocked else "{passthrough: true}"
    (folder / "cycle.yaml").write_text(
        "prompt: p.yaml\nagent: {function: 'agent:run'}\n"
        f"criteria: [{{id: word, check: {{type: regex, pattern: '^{expected}$'}}}}]\n"
        f"cases: [cases.yaml]\ntools: {{mocks: {{lookup: {mock}}}}}\n")
    return folder / "cycle.yaml"


@pytest.mark.parametrize("mocked", [True, False], ids=["intercepted", "passthrough"])
def test_a_projects_tool_called_directly_is_its_own_and_answered_by_its_mock(tmp_path, mocked):
    """The agent's plain ``from tools import lookup`` is the project's ``tools.py``, and
    the declared ``tools:lookup`` the same function: intercepted (the real one never
    runs), or passed through to that project's real one."""
    configs = [_direct(tmp_path / word, word, mocked=mocked) for word in ("alpha", "beta")]
    assert means_of_runs(configs) == [100, 100]
