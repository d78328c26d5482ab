"""Check before paying: every bad input the durability issue listed is refused with exit 2
and one message naming the file, line or flag and the fix, before the first model call.

The agent is the real openai SDK against the loopback server: "nothing paid" is that the
server saw no request, and "nothing lost" is that no store, cache or report was written."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import Fault

PROMPT = """\
id: support
system: You are a support agent.
user_template: "{{ question }}"
params:
  model: openai:gpt-4o-mini
"""
CASES = "- id: late\n  input: {question: Where is it?}\n- id: refund\n  input: {question: When?}\n"
CONFIG = """\
prompt: prompts/support.yaml
criteria:
  - id: short
    check: {type: regex, pattern: '^.{0,400}$'}
cases: [cases/*.yaml]
providers:
  openai: {base_url: 'BASE'}
"""


@pytest.fixture
def project(loopback_project):
    return loopback_project(PROMPT, CASES, CONFIG)


def _append(name: str, text: str):
    return lambda p: (p / name).write_text((p / name).read_text() + text)


def _replace(name: str, old: str, new: str):
    def change(p: Path) -> None:
        assert old in (p / name).read_text()
        (p / name).write_text((p / name).read_text().replace(old, new))
    return change


def _bytes(name: str, raw: bytes):
    return lambda p: (p / name).write_bytes((p / name).read_bytes() + raw)


IMPROVE = ["improve", "cycle.yaml", "--headless", "--yes"]
RUN = ["run", "cycle.yaml"]

#: name: (how the project is broken, the command, text the message must hold, a word of the fix)
BAD = {
    "config not UTF-8": (_bytes("cycle.yaml", b"# caf\xe9\n"), RUN,
                         "cycle.yaml:8: not UTF-8 text", "Save the file as UTF-8"),
    "case file not UTF-8": (_bytes("cases/all.yaml", b"# \xff\n"), RUN,
                            "all.yaml:5: not UTF-8 text", "UTF-8"),
    "prompt file not UTF-8": (_bytes("prompts/support.yaml", b"# \xff\n"), RUN,
                              "support.yaml:6: not UTF-8 text", "UTF-8"),
    "reports folder is a file": (lambda p: (p / "reports").write_text("x"), RUN,
                                 "reports (the default)): the reports folder 'reports' is a file",
                                 "Remove or rename"),
    "report dir under a file": (lambda p: (p / "r").write_text("x"), [*RUN, "--report-dir", "r/x"],
                                "--report-dir: cannot write the reports folder", "Choose a folder"),
    "report dir in /proc": (lambda p: None, [*RUN, "--report-dir", "/proc/cycle-reports"],
                            "--report-dir: cannot write the reports folder", "Choose a folder"),
    "store folder is a file": (lambda p: (p / ".cycle").write_text("x"), RUN,
                               "the folder of the store '.cycle' is a file", "Remove or rename"),
    "improve reports folder is a file": (lambda p: (p / "reports").write_text("x"), IMPROVE,
                                         "the reports folder 'reports' is a file", "Remove"),
    "events file is a folder": (lambda p: (p / "ev").mkdir(), [*IMPROVE, "--events", "ev"],
                                "'ev' is a directory", ""),
    "iterations too many": (_append("cycle.yaml", "run: {iterations: 1000000000000}\n"), RUN,
                            "cycle.yaml:8 (run.iterations): 2 cases x 1,000,000,000,000 iterations",
                            "raise run.max_evaluations"),
    "iterations too many by flag": (lambda p: None, [*RUN, "-n", "600000"],
                                    "--iterations: 2 cases x 600,000 iterations", "Lower"),
    "glob outside the folder": (_replace("cycle.yaml", "[cases/*.yaml]", "['/**/x']"), RUN,
                                "cycle.yaml:5 (cases[0]): the case glob '/**/x' searches outside",
                                "list them by name"),
    "glob above the folder": (_replace("cycle.yaml", "[cases/*.yaml]", "['../**/*.yaml']"), RUN,
                              "searches outside the folder of cycle.yaml", "Move the case files"),
    "empty label": (_replace("cycle.yaml", "prompts/support.yaml", "store:support@"), RUN,
                    "cycle.yaml:1 (prompt): 'store:support@' names no stored prompt",
                    "store:ID@label"),
    "weight 0": (_replace("cycle.yaml", "  - id: short\n", "  - id: short\n    weight: 0\n"), RUN,
                 "cycle.yaml:4 (criteria[0].weight): Input should be greater than 0", "above 0"),
    "weight inf": (_replace("cycle.yaml", "  - id: short\n", "  - id: short\n    weight: .inf\n"),
                   RUN, "cycle.yaml:4 (criteria[0].weight): Input should be a finite number",
                   "weighted mean"),
    "invalid json schema": (_replace("cycle.yaml", "{type: regex, pattern: '^.{0,400}$'}",
                                     "{type: json_schema, schema: {type: nonsense}}"), RUN,
                            "cycle.yaml:4 (criteria[0].check): invalid JSON schema at type",
                            "deterministic check"),
    "required case unknown": (_append("cycle.yaml", "improve: {required_cases: [refnud]}\n"),
                              IMPROVE, ("cycle.yaml:8 (improve.required_cases[0]): required case "
                              "'refnud' is not among"), "Did you mean 'refund'"),
    "params typo": (_append("prompts/support.yaml", "  temprature: 0.2\n"), RUN,
                    "support.yaml:6 (params.temprature): unknown parameter 'temprature'",
                    "Did you mean 'temperature'"),
    "duplicate key": (_append("cycle.yaml", "run: {iterations: 2}\nrun: {iterations: 3}\n"), RUN,
                      "cycle.yaml:9 (run): duplicate key 'run' (also at line 8)", "Keep one"),
    "duplicate key in a case": (
        lambda p: (p / "cases" / "all.yaml").write_text(
            "- id: late\n  input: {question: a}\n  input: {question: b}\n"),
        RUN, "all.yaml:3 ([0].input): duplicate key 'input'", "Keep one"),
    "a date that is not one in a case": (
        lambda p: (p / "cases" / "all.yaml").write_text(
            "- id: late\n  input: {question: a, due: 2026-02-30}\n"),
        RUN, "all.yaml:2: not valid YAML: '2026-02-30' is not a valid date", "quote it"),
    "a date that is not one in a config naming its store": (
        _append("cycle.yaml", "store: .cycle/cycle.db\nnotes: {due: 2026-13-01}\n"), RUN,
        "cycle.yaml:9: not valid YAML: '2026-13-01' is not a valid date", "quote it"),
    "empty case file": (lambda p: (p / "cases" / "more.yaml").write_text(""), RUN,
                        "more.yaml: the case file is empty", "delete the file"),
    "max_rounds 0": (_append("cycle.yaml", "improve: {stop: {max_rounds: 0}}\n"), IMPROVE,
                     ("cycle.yaml:8 (improve.stop): improve.stop.max_rounds: expected a whole "
                     "number >= 1"), "Stop conditions"),
    "stop cost nan": (_append("cycle.yaml", "improve: {stop: {max_cost: .nan}}\n"), IMPROVE,
                      "(improve.stop): improve.stop.max_cost: expected a number >= 0", ""),
    "billion laughs": (
        lambda p: (p / "cases" / "laughs.yaml").write_text(
            "- id: laughs\n  input: {question: a}\n  state:\n    a0: &a0 [lol, lol, lol, lol]\n"
            + "".join(f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n"
                      for i in range(1, 10))),
        RUN, "laughs.yaml:10: the document expands to more than 1,000,000 values",
        "billion laughs"),
    "case file a symlink loop": (
        lambda p: (p / "cases" / "loop.yaml").symlink_to(p / "cases" / "loop.yaml"), RUN,
        "loop.yaml", "symlink"),
    # nested blocks (not flow [[...]]) escaped the parser's limit: a RecursionError, exit 4
    "case nested 3000 blocks deep": (
        lambda p: (p / "cases" / "deep.yaml").write_text(
            "- id: deep\n  input:\n" + "".join("  " * (i + 2) + "k:\n" for i in range(3000))),
        RUN, "deep.yaml: the YAML is nested deeper", "Flatten"),
    "eval file nested 100k deep": (
        lambda p: (p / "deep.json").write_text("[" * 100_000 + "]" * 100_000),
        ["run", "--eval", "deep.json"], "deep.json: the JSON is nested deeper", "Flatten"),
    "tool args template typo": (
        _replace("cycle.yaml", "  - id: short\n",
                 "  - id: asked\n    check: {type: tool_called, tool: lookup, "
                 "args: {q: '{{ questoin }}'}}\n  - id: short\n"), RUN,
        "cycle.yaml:4 (criteria[0].check.args): case 'late'", "every case's input"),
    "report format unknown": (_append("cycle.yaml", "reports: {formats: [pdf]}\n"), RUN,
                              "cycle.yaml:8 (reports.formats): unknown report format 'pdf'",
                              "Known formats"),
    "budget nan": (lambda p: None, [*RUN, "--budget", "nan"], "--budget", ""),
    "timeout inf": (lambda p: None, [*RUN, "--timeout", "inf"], "--timeout", ""),
}


@pytest.mark.parametrize("name", list(BAD))
def test_every_bad_input_exits_2_naming_where_and_the_fix_before_paying(project, server, name):
    breaks, args, where, fix = BAD[name]
    breaks(project)
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2, r.output
    assert where in r.output and fix in r.output, r.output
    assert "Traceback" not in r.output and "internal error" not in r.output
    assert server.requests == []  # nothing was paid for
    # nothing was stored: no store, no cache, no report
    assert not (project / ".cycle" / "cycle.db").exists()
    assert not (project / ".cycle" / "cache.db").exists()
    reports = project / "reports"
    assert not reports.is_dir() or not any(reports.iterdir())


def test_a_retry_after_above_the_configured_cap_fails_the_call_at_once(project, server):
    config = project / "cycle.yaml"
    config.write_text(config.read_text().replace(
        "{base_url: ", "{max_retry_after: 2, base_url: ") + "run: {iterations: 1}\n")
    for _ in range(2):
        server.enqueue(Fault.status(429, retry_after=30))
    started = time.monotonic()
    r = CliRunner().invoke(cli, [*RUN, "--json", "-c", "1"])
    assert time.monotonic() - started < 20  # the 30 s asked for were not waited
    data = json.loads(r.stdout)
    errors = [c for c in data["cases"] if c["errors"]]
    assert r.exit_code == 3 and len(errors) == 2, r.output
    shown = (project / "reports").glob("*.md")
    report = "".join(p.read_text() for p in shown)
    assert "asked to wait 30 s" in report and "providers.openai.max_retry_after" in report


def test_a_big_suite_is_allowed_when_the_config_raises_the_limit(project, server):
    config = project / "cycle.yaml"
    config.write_text(config.read_text() + textwrap.dedent("""\
        run: {iterations: 3, max_evaluations: 6}
    """))
    r = CliRunner().invoke(cli, [*RUN, "-q"])
    assert r.exit_code == 0, r.output
    assert len(server.requests) == 6
