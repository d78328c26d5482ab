"""Start-up (issue 17, item 5): listing the commands imports none of them, and the commands
that only read the store import no SDK and no TUI. Counted in a fresh interpreter (what
was imported), not timed; benchmarks/bench_startup.py has the CPU figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from cycle.cli import COMMANDS, cli

HEAVY = ("openai", "google.genai", "textual", "cycle.tui", "cycle.llm.openai", "cycle.llm.gemini")


def at_exit(args: list[str], cwd: Path, expression: str,
            env: dict[str, str] | None = None) -> object:
    """``expression`` (JSON) as a fresh ``cycle ARGS`` process, run as the console command
    runs (``cycle.cli.main``), has it when it exits."""
    code = ("import sys, json, atexit, gc\n"
            f"atexit.register(lambda: print('AT EXIT' + json.dumps({expression}), file=sys.stderr))\n"
            "from cycle.cli import main\n"
            f"sys.argv = ['cycle', *{args!r}]\n"
            "main()\n")
    done = subprocess.run([sys.executable, "-c", code], check=False, cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, **(env or {})})
    line = next(x for x in done.stderr.splitlines() if x.startswith("AT EXIT"))
    return json.loads(line[len("AT EXIT"):])


def imported_by(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> set[str]:
    """The modules a fresh ``cycle ARGS`` process has imported when it exits."""
    return set(at_exit(args, cwd, "sorted(sys.modules)", env))  # type: ignore[arg-type]


def test_help_lists_every_command_importing_none(tmp_path: Path) -> None:
    modules = imported_by(["--help"], tmp_path)
    commands = {c.target.split(":")[0] for c in COMMANDS.values()}
    assert not modules & commands
    assert not [m for m in modules if m.startswith(HEAVY) or m in ("asyncio", "pydantic")]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_listed_help_is_the_commands_own(name: str) -> None:
    """COMMANDS carries each command's first sentence so that --help need not import it:
    it must say what the command's own docstring says."""
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    assert COMMANDS[name].help == command.get_short_help_str(limit=10**6)


def test_reading_the_store_imports_no_sdk_and_no_tui(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(json.dumps({"id": "p", "system": "Hi."}))
    subprocess.run([sys.executable, "-m", "cycle", "prompt", "import", "p.yaml"], cwd=tmp_path,
                   check=True, capture_output=True)
    for args in (["history", "p"], ["show", "p@head"], ["runs"], ["cycles"]):
        modules = imported_by(args, tmp_path)
        assert "cycle.store" in modules, args  # it did read the store
        assert not [m for m in modules if m.startswith(HEAVY)], args


def test_only_an_adk_agent_imports_google_adk(tmp_path: Path) -> None:
    """google-adk costs most of a second to import: a run of a prompt agent does not."""
    (tmp_path / "p.yaml").write_text(json.dumps({"id": "p", "system": "Hi.",
                                                 "user_template": "{{ input }}"}))
    (tmp_path / "cases.yaml").write_text(json.dumps([{"id": "c1", "input": "Hello"}]))
    config = {"prompt": "p.yaml", "agent": "offline:default", "cases": ["cases.yaml"],
              "criteria": [{"id": "any", "check": {"type": "regex", "pattern": "."}}],
              "run": {"iterations": 1}}
    (tmp_path / "cycle.yaml").write_text(json.dumps(config))
    modules = imported_by(["run", "--no-reports", "-q"], tmp_path)
    assert "cycle.evals.runner" in modules  # it did run
    assert not [m for m in modules if m.startswith(("google.adk", "cycle.agents.adk"))]
    # nor does a run import the improvement loop (about 0.1 s of start-up)
    assert not [m for m in modules if m.startswith(("cycle.loop", "cycle.improve"))]
    config["agent"] = {"adk": "tests.agents.adk_agents:plain_agent", "model": "offline:default"}
    (tmp_path / "cycle.yaml").write_text(json.dumps(config))
    root = str(Path(__file__).resolve().parents[2])  # where tests.agents imports from
    modules = imported_by(["run", "--no-reports", "-q"], tmp_path, env={"PYTHONPATH": root})
    assert "google.adk.runners" in modules and "cycle.agents.adk" in modules


def test_a_run_imports_only_what_it_uses(tmp_path: Path) -> None:
    """A run of a prompt agent on a YAML case file loads no sqlite_utils (only migrating
    an older store does: about 45 ms; a new one is made with plain SQL), no eval-file
    reader, no cycle log or suggestion records, and no tenacity while no call needs a
    retry (issue 17: start-up)."""
    (tmp_path / "p.yaml").write_text(json.dumps({"id": "p", "system": "Hi.",
                                                 "user_template": "{{ input }}"}))
    (tmp_path / "cases.yaml").write_text(json.dumps([{"id": "c1", "input": "Hello"}]))
    (tmp_path / "cycle.yaml").write_text(json.dumps({
        "prompt": "p.yaml", "agent": "offline:default", "judge": "offline:default",
        "cases": ["cases.yaml"], "criteria": [
            {"id": "any", "check": {"type": "regex", "pattern": "."}}, {"id": "accuracy"}]}))
    first = imported_by(["run", "-q"], tmp_path)
    assert "cycle.store.migrations" in first  # the new store was made
    assert not [m for m in first if m.startswith("sqlite_utils")]
    modules = imported_by(["run", "-q"], tmp_path)
    assert "cycle.evals.runner" in modules and "cycle.store.store" in modules  # it did run
    assert "cycle.report.markdown" in modules and "cycle.judge.llm_judge" in modules
    # nor jinja2 (about 25 ms): the prompt's templates and the judge's are text and
    # placeholders (cycle.prompts.template), and the reports it writes are no templates
    assert not [m for m in modules if m.startswith((
        "sqlite_utils", "cycle.formats", "cycle.store.cycles", "cycle.records.suggestions",
        "tenacity", "jinja2"))]
    # a JSON case file may be an eval file: its reader is loaded to find out
    (tmp_path / "cases.json").write_text(json.dumps([{"id": "c1", "input": "Hello"}]))
    (tmp_path / "cycle.yaml").write_text(json.dumps({
        "prompt": "p.yaml", "agent": "offline:default", "cases": ["cases.json"],
        "criteria": [{"id": "any", "check": {"type": "regex", "pattern": "."}}]}))
    assert "cycle.formats.toolforge" in imported_by(["run", "--no-reports", "-q"], tmp_path)


def test_the_collector_is_off_while_loading_and_on_for_every_command_that_works(
        tmp_path: Path) -> None:
    """main() turns the collector off for loading (about 30 ms of start-up): every run path
    (cases, an eval file, several agents, a cycle) and every other command turns it back on,
    with the young threshold raised and what loading left frozen."""
    (tmp_path / "p.yaml").write_text(
        'id: p\nsystem: hi\nuser_template: "{{ input }}"\nparams: {model: "offline:default"}\n')
    (tmp_path / "cases.yaml").write_text(json.dumps([{"id": "a", "input": "hello"}]))
    (tmp_path / "evals.json").write_text(json.dumps([
        {"id": "e", "input": {"message": "hi"}, "expect": {"responseNonEmpty": True}}]))
    (tmp_path / "cycle.yaml").write_text(json.dumps({
        "prompt": "p.yaml", "agent": "offline:default", "judge": "offline:default",
        "improver": "offline:default", "cases": ["cases.yaml"],
        "criteria": [{"id": "any", "check": {"type": "regex", "pattern": "."}}],
        "run": {"iterations": 1}, "improve": {"stop": {"max_rounds": 1}}}))
    state = "[gc.isenabled(), gc.get_threshold()[0], gc.get_freeze_count() > 0]"
    for args in (["run", "--no-reports", "-q"],
                 ["run", "--eval", "evals.json", "--json"],
                 ["run", "--agent", "offline:default", "--agent", "offline:other", "--no-reports",
                  "-q"],
                 ["improve", "--headless", "--yes", "-q"]):
        assert at_exit(args, tmp_path, state) == [True, 10_000, True], args
    assert at_exit(["history", "p"], tmp_path, state)[0] is True  # type: ignore[index]
    assert at_exit(["run", "--dry-run"], tmp_path, "gc.isenabled()") is False  # loads, runs nothing


def test_only_a_run_with_a_pattern_imports_regex(tmp_path: Path) -> None:
    """regex (5 ms of start-up) is imported by the first pattern a run matches."""
    (tmp_path / "p.yaml").write_text(json.dumps({"id": "p", "system": "Hi.",
                                                 "user_template": "{{ input }}"}))
    (tmp_path / "cases.yaml").write_text(json.dumps([{"id": "c1", "input": "Hello"}]))
    for check, imports in (({"type": "contains", "values": ["x"]}, False),
                           ({"type": "regex", "pattern": "x+"}, True)):
        config = {"prompt": "p.yaml", "agent": "offline:default", "cases": ["cases.yaml"],
                  "criteria": [{"id": "said", "check": check}], "run": {"iterations": 1}}
        (tmp_path / "cycle.yaml").write_text(json.dumps(config))
        modules = imported_by(["run", "--no-reports", "-q"], tmp_path)
        assert "cycle.evals.runner" in modules  # it did run
        assert ("regex" in modules) is imports, check
