"""The docs' examples, run as written: a YAML block a page shows is a file a reader copies,
so it must load (and run, offline) as the page says. Each test names the page and block."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from tests.stored import copied

ROOT = Path(__file__).resolve().parents[2]


def yaml_blocks(page: str) -> list[str]:
    """The fenced ```yaml blocks of docs/PAGE, in order."""
    return re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / page).read_text(), re.DOTALL)


def test_configuration_cycle_yaml_runs_on_the_quickstart(tmp_path):
    block = next(b for b in yaml_blocks("configuration.md") if b.startswith("prompt:"))
    project = copied("quickstart", tmp_path)
    (project / "cycle.yaml").write_text(block)
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                 str(project / "cycle.yaml"), "-n", "1", "--json", "--no-reports"])
    assert r.exit_code in (0, 1), r.output
    run = json.loads(r.output)
    assert run["offline"] and run["summary"]["errored"] == 0


def test_configuration_few_shot_examples_load(tmp_path):
    # found walking the page: its second example was a plain message, which the block's
    # own template ({{ customer }}, {{ question }}) does not render: the file was refused
    block = next(b for b in yaml_blocks("configuration.md") if "examples:" in b)
    prompt = tmp_path / "fewshot.yaml"
    prompt.write_text("id: fewshot\nsystem: You answer a shop's customers.\n" + block)
    store = ["--store", str(tmp_path / "s.db")]
    r = CliRunner().invoke(cli, [*store, "prompt", "import", str(prompt)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, [*store, "prompt", "export", "fewshot"])
    assert r.exit_code == 0 and "source: late-delivery" in r.output, r.output


AGENT = '''\
import cycle


async def answer(inp, tools):
    looked = await tools.acall("lookup_order", order="D-4501")
    try:
        await tools.acall("refund", order="D-4501")
    except cycle.ToolError as e:
        return f"looked up {looked['status']}; the refund failed: {e}"
    return "refunded"


def lookup(arguments, context):
    return cycle.with_state({"status": "delivered"}, {"session.looked": True})
'''


def test_agents_and_tools_names_import_from_cycle(tmp_path):
    # found walking docs/agents-and-tools.md: a mock function returns `with_state(...)`,
    # but `from cycle import with_state` failed (it lived only in cycle.agents.tools), and
    # a Python agent had no documented way to catch a tool's failure
    (tmp_path / "docs_shop_agent.py").write_text(AGENT)
    (tmp_path / "prompt.yaml").write_text(
        "id: shop\nsystem: Help.\ntools:\n"
        "  - {name: lookup_order, description: Find an order., parameters: {type: object}}\n"
        "  - {name: refund, description: Refund an order., parameters: {type: object}}\n")
    (tmp_path / "cases.yaml").write_text("- {id: one, input: I want a refund.}\n")
    (tmp_path / "cycle.yaml").write_text(
        "prompt: prompt.yaml\nagent: {function: docs_shop_agent:answer}\n"
        "criteria:\n"
        "  - {id: coped, check: {type: contains, values: ['the refund failed:', 'bank down']}}\n"
        "  - {id: looked, check: {type: state_value, path: session.looked, equals: true}}\n"
        "cases: [cases.yaml]\nrun: {iterations: 1}\n"
        "tools:\n  mocks:\n    lookup_order: {function: docs_shop_agent:lookup}\n"
        "    refund: {error: bank down}\n")
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                 str(tmp_path / "cycle.yaml"), "--json", "--no-reports"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["summary"]["passed"] == 1


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / page).read_text(), re.DOTALL)


def test_pytest_gate_of_ones_own_runs_on_the_quickstart(tmp_path):
    # found walking docs/pytest.md: its gate read run.cases["refund"], a case neither the
    # quickstart nor `cycle init` has, and failed with a bare KeyError: 'refund'
    project = copied("quickstart", tmp_path)
    (project / "test_gate.py").write_text("import pytest\n\n" + python_blocks("pytest.md")[0]
                                          + "\n\ndef test_an_unknown_case_says_which_there_are"
                                          "(cycle_suite):\n"
                                          "    with pytest.raises(KeyError, match="
                                          "\"no case 'refund' in this run; its cases: \"):\n"
                                          "        cycle_suite('cycle.yaml', iterations=1)"
                                          ".cases['refund']\n")
    # the quickstart's first prompt fails its cases: the gate runs on the improved one
    prompt = project / "prompts" / "support-reply.yaml"
    prompt.write_text(prompt.read_text().replace(
        "Answer the customer's question.", "Answer the customer's question. Apologise for "
        "the trouble the customer has had. Greet the customer by name. End with one concrete "
        "next step, starting with 'Next step:'. Cite the customer's order number."))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "test_gate.py"], cwd=project, capture_output=True, text=True, check=False,
                         env={**os.environ, "CYCLE_STORE": str(tmp_path / "s.db")})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout


def test_configuration_names_every_top_level_key():
    # found walking the page: cycle.yaml's budget, providers, pricing, cache, tools and
    # improve were nowhere on it, though `cycle init` writes two of them
    from cycle.assemble.config import CycleConfig

    page = (ROOT / "docs" / "configuration.md").read_text()
    assert [k for k in CycleConfig.model_fields if f"`{k}`" not in page
            and f"\n{k}:" not in page] == []


def test_readme_five_minute_tour_runs_as_written(tmp_path):
    # the tour's block, command by command (comments off, `cd` followed), then the commands
    # the paragraph after it names: each as a reader types it, `cycle` being this checkout
    text = (ROOT / "README.md").read_text().split("## Five-minute tour", 1)[1]
    block = re.search(r"```\n(.*?)```", text, re.DOTALL).group(1)
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    commands += ["cycle runs", "cycle runs show @last", "cycle compare @prev @last"]
    here = tmp_path
    for command in filter(None, commands):
        words = command.split()
        if words[0] == "cd":
            here = here / words[1]
            continue
        assert words[0] == "cycle", command
        out = subprocess.run([sys.executable, "-m", "cycle", *words[1:]], cwd=here,
                             capture_output=True, text=True, check=False,
                             env={k: v for k, v in os.environ.items() if k != "CYCLE_STORE"})
        # `cycle run` fails the first prompt's cases, "as it should"
        assert out.returncode == (1 if words[1:] == ["run"] else 0), (command, out.stderr)
    assert out.stdout.startswith("Compare ") and "Newly passing" in out.stdout


def test_tour_shows_make_demos_output_as_it_is(tmp_path):
    # found walking docs/tour.md: its output of `make demo` had lost lines (each round's
    # "done" line, the summary's rounds and cost, the write-back hint) and the judge's
    # state on the round lines. Every line it shows (ids aside; "..." elides) must come,
    # in order, from the demo's command on a fresh copy of the quickstart.
    page = (ROOT / "docs" / "tour.md").read_text()
    shown = re.search(r"runs `cycle improve examples/quickstart/cycle.yaml --headless --yes`:"
                      r"\n\n```\n(.*?)```", page, re.DOTALL).group(1).splitlines()
    copied("quickstart", tmp_path / "examples")
    out = subprocess.run([sys.executable, "-m", "cycle", "improve",
                          "examples/quickstart/cycle.yaml", "--headless", "--yes"],
                         cwd=tmp_path, capture_output=True, text=True, check=False,
                         env={k: v for k, v in os.environ.items() if k != "CYCLE_STORE"})
    assert out.returncode == 0, out.stderr

    def same(line: str) -> str:
        return re.sub(r"c-\d{8}-\d{6}-[0-9a-f]+", "c-ID", line)

    printed = iter([same(line) for line in out.stdout.splitlines()])
    for line in shown:
        if line.strip() == "...":
            continue
        assert same(line) in printed, line  # found after the lines before it


SHOP = {
    "tools.py": '''\
def refund(order: str, reason: str = "") -> dict:
    """Refunds an order.

    Args:
        order: the order number
        reason: why it is returned
    """
    raise AssertionError("a mock answers it")
''',
    "users.py": "def approver(arguments, state):\n    return {'approved': True}\n",
    "sim.py": "def as_lines(turns):\n    return '\\n'.join(f\"{t['role']}: {t['text']}\" "
              "for t in turns)\n",
}


def agents_project(tmp_path: Path) -> Path:
    """docs/agents-and-tools.md's blocks put together: the prompt's tools, the scripted
    conversation case, a case with the simulated user and its end condition, and the
    user agent (with mocks, which the page shows elsewhere as a table)."""
    tools, _http, scripted, user, end, user_agents = yaml_blocks("agents-and-tools.md")
    package = tmp_path / "shop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in SHOP.items():
        (package / name).write_text(text)
    (tmp_path / "prompt.yaml").write_text(
        "id: shop\nsystem: You help a shop's customers.\nuser_template: '{{ question }}'\n"
        + tools + "  - {name: approve_refund, description: Asks the customer., "
        "parameters: {type: object}}\n")
    (tmp_path / "cases.yaml").write_text(
        scripted + "- id: broken\n  input: {question: My shoes broke., customer: Dana}\n"
        + user + end)
    (tmp_path / "cycle.yaml").write_text(
        "prompt: prompt.yaml\nagent: offline:default\njudge: offline:default\n"
        "criteria: [{id: tone, rubric: Polite.},\n"
        # the trace checks' keys the page's table names
        "  {id: order, check: {type: tool_order, tools: [lookup_order, refund], mode: exact}},\n"
        "  {id: refunds, check: {type: event_count, kind: tool_result, where: {tool: refund},"
        " max: 1}}]\n"
        "cases: [cases.yaml]\nrun: {iterations: 1}\n"
        + user_agents + "  mocks:\n    lookup_order: {value: {status: delivered}}\n"
        "    refund: {value: {refunded: true}, state: {session.refunded: true}}\n")
    return tmp_path


def test_agents_and_tools_blocks_load_and_run_offline(tmp_path, monkeypatch):
    # found walking the page: its conversation case's follow-up said {{ order }}, which
    # the case's input did not give (exit 2: 'order' is undefined)
    project = agents_project(tmp_path)
    monkeypatch.syspath_prepend(str(project))
    for name in [m for m in sys.modules if m == "shop" or m.startswith("shop.")]:
        monkeypatch.delitem(sys.modules, name)  # the page's package is this one
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")  # the user's model, priced only
    store = ["--store", str(tmp_path / "s.db")]
    r = CliRunner().invoke(cli, [*store, "run", str(project / "cycle.yaml"), "--dry-run"])
    assert r.exit_code == 0, r.output
    # offline, as the page says the offline model plays a user (without format_history)
    cases = project / "cases.yaml"
    cases.write_text("".join(line for line in cases.read_text().replace(
        "openai:gpt-4o-mini", "offline:default").splitlines(keepends=True)
        if "format_history" not in line))
    r = CliRunner().invoke(cli, [*store, "run", str(project / "cycle.yaml"), "--json",
                                 "--no-reports"])
    assert r.exit_code in (0, 1), r.output
    assert json.loads(r.output)["summary"]["errored"] == 0


def test_every_check_and_its_keys_are_on_the_pages():
    # found walking the pages: the checks' keys were nowhere (regex's `pattern`,
    # max_latency's `seconds`, tool_order's `mode`...): a reader guessed, and was refused
    from cycle.judge import checks, trace_checks

    def kinds(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from kinds(sub)

    pages = {checks.__name__: "configuration.md", trace_checks.__name__: "agents-and-tools.md"}
    missing = []
    for kind in kinds(checks._Check):
        page = pages.get(kind.__module__)
        if page is None or "type" not in kind.model_fields:
            continue  # tool-forge's own, on interop.md
        text = (ROOT / "docs" / page).read_text()
        names = [kind.model_fields["type"].default] + [
            field.alias or name for name, field in kind.model_fields.items() if name != "type"]
        missing += [f"{page}: {names[0]}.{n}" for n in names
                    if f"`{n}`" not in text and f"`{n}: " not in text]
    assert missing == []


def test_cli_md_names_every_command_and_option():
    # found walking docs/cli.md: `cycle import otel` had no row, and options such as
    # `cycle run --stop-on-first-failure`, `cycle prompt import --bump` and the
    # listings' `--limit` were on no page; run --eval's own are on interop.md
    import click

    page = (ROOT / "docs" / "cli.md").read_text()
    pages = page + (ROOT / "docs" / "interop.md").read_text()
    missing = []

    def walk(group: click.Group, ctx: click.Context, path: tuple[str, ...]) -> None:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            where = (*path, name)
            if isinstance(command, click.Group):
                walk(command, click.Context(command, parent=ctx), where)
                continue
            if f"`cycle {' '.join(where)}" not in page:
                missing.append(" ".join(where))
            for param in command.params:
                names = [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]
                longs = [n for n in names if n.startswith("--")]
                if longs and not {"--store", "--debug", "--help"} & set(longs) \
                        and not any(n in pages for n in names):
                    missing.append(f"{' '.join(where)} {longs[0]}")

    walk(cli, click.Context(cli), ())
    assert missing == []


def test_tour_commands_after_the_demo_run_as_written(tmp_path):
    # the tour's block of commands in examples/quickstart after `make demo`, each as a
    # reader types it (CYCLE_ID the demo's cycle); the two that open the TUI are left out
    page = (ROOT / "docs" / "tour.md").read_text()
    block = re.search(r"```\n(\. \.\./\.\./\.venv/bin/activate.*?)```", page, re.DOTALL).group(1)
    project = copied("quickstart", tmp_path / "examples")
    env = {k: v for k, v in os.environ.items() if k != "CYCLE_STORE"}

    def cycle(*args: str, cwd: Path = project) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "cycle", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, check=False)

    demo = cycle("improve", "examples/quickstart/cycle.yaml", "--headless", "--yes",
                 cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    cycle_id = re.search(r"starting cycle (c-\S+)", demo.stdout).group(1)
    ran = []
    for line in block.splitlines():
        words = line.split("#", 1)[0].replace("CYCLE_ID", cycle_id).split()
        if not words or words[0] != "cycle" or words[1:] in (["improve", "cycle.yaml"], ["tui"]):
            continue
        out = cycle(*words[1:])
        assert out.returncode == 0, (line, out.stderr)
        ran.append(words[1])
    assert ran == ["history", "diff", "rollback", "rollback", "cycles", "cycles"]


def test_configuration_says_which_keys_are_required():
    # found walking the page: it said "every key has a default", and a cycle.yaml without
    # criteria was refused ("required key 'criteria' is missing")
    from cycle.assemble.config import CycleConfig

    required = [name for name, field in CycleConfig.model_fields.items() if field.is_required()]
    page = " ".join((ROOT / "docs" / "configuration.md").read_text().split())
    assert required == ["prompt", "criteria"]
    assert "(`prompt` and one criterion at least are required, every other key has a default" \
        in page
