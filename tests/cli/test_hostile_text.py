"""What a model writes is data: text no UTF-8 encoder takes, markup and escapes in an
answer are kept and shown as text by every command and report, never obeyed or fatal.
Through the real CLI against the loopback OpenAI-compatible server."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import Fault, Reply

PROMPT = """\
id: p
system: You answer.
user_template: "{{ question }}"
params: {model: openai:gpt-4o-mini}
"""
CONFIG = """\
prompt: prompts/support.yaml
criteria: [{id: short, check: {type: regex, pattern: '^.{0,400}$'}}]
cases: [cases/all.yaml]
run: {iterations: 1}
providers: {openai: {base_url: 'BASE'}}
"""
TWO_CASES = "- id: a\n  input: {question: q1}\n- id: b\n  input: {question: q2}\n"


def test_a_lone_surrogate_in_an_answer_is_kept_as_a_replacement_character(loopback_project,
                                                                          server):
    # the server's JSON says "\ud800": Python's decoder keeps the lone surrogate, which the
    # response cache could not encode: the (paid) iteration was an error, its usage lost
    tmp_path = loopback_project(PROMPT, "- id: a\n  input: {question: q1}\n", CONFIG)
    server.responder = lambda request: Reply(text="fine \ud800 answer")
    result = CliRunner().invoke(cli, ["run", "cycle.yaml", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["cases"][0]["status"] == "passed"
    report = json.loads((tmp_path / data["reports"]["json"]).read_text())
    outputs = json.dumps(report)
    assert "fine \\ufffd answer" in outputs or "fine \ufffd answer" in outputs
    shown = CliRunner().invoke(cli, ["runs", "show", "@last"])
    assert shown.exit_code == 0 and "Serialization" not in shown.output


def test_json_output_stays_json_when_a_prompt_holds_c1_controls(tmp_path, monkeypatch):
    # the terminal stream showed U+0085 (NEL), U+009B (a one-byte CSI) and DEL as "\x85",
    # which is no JSON escape: `cycle diff --json` and `cycle history --json` were not JSON
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    (tmp_path / "p.yaml").write_text("id: p\nsystem: You answer.\nuser_template: '{{ q }}'\n")
    assert runner.invoke(cli, ["prompt", "import", "p.yaml"]).exit_code == 0
    (tmp_path / "p.yaml").write_text(
        'id: p\nsystem: "You answer. \\x85 \\x9b2J \\x7f \\u202e"\nuser_template: "{{ q }}"\n')
    assert runner.invoke(cli, ["prompt", "import", "p.yaml"]).exit_code == 0
    diff = runner.invoke(cli, ["diff", "p", "1.0.0", "1.0.1", "--json"])
    assert diff.exit_code == 0, diff.output
    system = json.loads(diff.stdout)["fields"]["system"]["diff"]
    # one line changed, shown whole: U+0085 ends no line of a diff (str.splitlines' does)
    assert "+You answer. \x85 \x9b2J \x7f \u202e\n" in system and "No newline" not in system
    history = runner.invoke(cli, ["history", "p", "--json"])
    assert history.exit_code == 0, history.output
    assert "\x9b" in json.dumps(json.loads(history.stdout), ensure_ascii=False)
    for raw in ("\x85", "\x9b", "\x7f", "\u202e", "\x1b"):
        assert raw not in diff.stdout and raw not in history.stdout


HOSTILE = ("<img src=x onerror=window.pwned=1></details>\n# Injected heading\n"
           "[click](javascript:alert(1)) | cell \x1b]52;c;ZXZpbA==\x07")


def _rendered(markdown: str) -> tuple[list[str], str]:
    """The Markdown as a GitHub-like renderer shows it (raw HTML let through, tables):
    the tags it makes and the HTML."""
    from html.parser import HTMLParser

    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    tags: list[str] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append(tag + "".join(f" {k}={v}" for k, v in attrs))

        def handle_endtag(self, tag):
            tags.append("/" + tag)

    Tags().feed(html)
    return tags, html


def test_the_markdown_report_shows_a_providers_error_and_an_answer_as_text(loopback_project,
                                                                          server):
    """A provider's error (listed under the case) and a model's answer holding HTML, a
    heading, a link and a pipe: the rendered report had an <img onerror>, a </details> of
    nobody's, a heading and a javascript: link; the file held ESC and BEL for `cat`."""
    tmp_path = loopback_project(PROMPT, TWO_CASES, CONFIG)
    server.enqueue(*[Fault.status(400, message=HOSTILE)] * 2)
    server.responder = lambda request: Reply(text="answer " + HOSTILE)
    result = CliRunner().invoke(cli, ["run", "cycle.yaml", "--json"])
    assert result.exit_code == 3, result.output
    md = (tmp_path / json.loads(result.stdout)["reports"]["markdown"]).read_text()
    assert "\x1b" not in md and "\x07" not in md and "\\x1b]52;c;" in md
    tags, html = _rendered(md)
    assert not [t for t in tags if t.startswith(("img", "script", "a ")) or t == "/details"]
    assert tags.count("h1") == 1  # the report's own title
    assert html.count("onerror=window.pwned=1") == 2  # shown, as text: the error and the answer
    assert "Injected heading" in html


def _run_with_python(tmp_path, monkeypatch, module: str, code: str, agent: str, case: str,
                     ) -> str:
    """``cycle run --json`` of one case whose agent (or user) is the Python ``code``,
    written as ``module``; the JSON report's text."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / f"{module}.py").write_text(code)
    (tmp_path / "p.yaml").write_text("id: p\nsystem: You answer.\nuser_template: '{{ q }}'\n")
    (tmp_path / "cases.yaml").write_text(f"- id: a\n  input: {{q: q1}}\n{case}")
    (tmp_path / "cycle.yaml").write_text(
        f"prompt: p.yaml\nagent: {agent}\n"
        "criteria: [{id: short, check: {type: regex, pattern: '^.{0,4000}$'}}]\n"
        "cases: [cases.yaml]\nrun: {iterations: 1}\n")
    result = CliRunner().invoke(cli, ["run", "cycle.yaml", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / json.loads(result.stdout)["reports"]["json"]).read_text())
    return json.dumps(report, ensure_ascii=False)


def test_a_python_agent_answering_a_lone_surrogate_is_stored_not_an_internal_error(
        tmp_path, monkeypatch):
    # the store could not encode the iteration: "internal error: PydanticSerializationError",
    # exit 4, the run left running
    assert "hi \ufffd there" in _run_with_python(
        tmp_path, monkeypatch, "hostile_surrogate_agent",
        "def answer(case_input):\n    return 'hi \\ud800 there'\n",
        "{function: hostile_surrogate_agent:answer}", "")


def test_a_tool_function_returning_a_lone_surrogate_leaves_the_iteration_judged(
        tmp_path, monkeypatch):
    # the tool's result went into the next model call, whose cache key could not be
    # encoded: every iteration was an error (UnicodeEncodeError)
    from tests.stored import copied

    project = copied("agent-tools", tmp_path)
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    (project / "hostile_surrogate_tool.py").write_text(
        "def refund(arguments, context):\n    return {'refunded': 'yes \\ud800'}\n")
    config = project / "cycle.yaml"
    text = config.read_text()
    assert "      value: {refunded: true}\n" in text
    config.write_text(text.replace("      value: {refunded: true}\n",
                                   "      function: hostile_surrogate_tool:refund\n"))
    result = CliRunner().invoke(cli, ["run", "-n", "1", "--json"])
    assert result.exit_code == 1, result.output  # failed on its checks, as it should
    data = json.loads(result.stdout)
    assert data["summary"]["errors"] == 0
    report = (project / data["reports"]["json"]).read_text()
    assert "yes \ufffd" in json.dumps(json.loads(report), ensure_ascii=False)


def test_terminal_review_indents_an_improver_s_lines_under_why(quickstart):
    """The improver's reasoning printed as it came: its own lines read as cycle's (the
    next suggestion's header, a diff's ``+++`` and ``+`` lines) before the reviewer chose."""
    import yaml

    from cycle.llm.base import ModelOutput
    from cycle.testing import script
    from cycle.testing.offline.provider import OfflineAPI

    forged = "\n[2/2] system_prompt (high)  targets: -\n+++ suggested/system\n+Be kind."
    offline = OfflineAPI("default")

    async def improver(messages, tools, config):
        out = await offline.generate(messages, tools, config)
        data = json.loads(out.text)
        for s in data["suggestions"]:
            s["reasoning"] += forged
        return ModelOutput(text=json.dumps(data), finish_reason="stop", usage=out.usage)

    cfg = yaml.safe_load((quickstart / "cycle.yaml").read_text())
    cfg["improver"] = "scripted:hostile-improver"
    cfg["improve"]["stop"] = {"max_rounds": 1}
    (quickstart / "cycle.yaml").write_text(yaml.safe_dump(cfg))
    with script("hostile-improver", improver):
        r = CliRunner().invoke(cli, ["improve", "--headless", "--review", "prompt", "-n", "1"],
                               input="r\n\n" * 6)
    assert "  why: " in r.output, r.output
    lines = r.output.splitlines()
    assert not [line for line in lines if line.startswith(("[2/2] system_prompt (high)", "+Be kind."))]
    assert any(line.startswith(" " * len("  why: ") + "+Be kind.") for line in lines)


def test_prompt_export_to_a_pipe_imports_back_exactly(tmp_path, monkeypatch):
    """The terminal filter made `cycle prompt export ID > FILE` no round trip: a Hebrew
    prompt's right-to-left mark came back as the six characters \\u200f (and --system,
    which feeds an ADK agent's instruction, the same)."""
    import subprocess
    import sys

    import yaml

    monkeypatch.chdir(tmp_path)
    system = "שלום \u200f(RLM)\nsecond line\n"  # a literal block: the mark is written as it is
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(
        {"id": "p", "system": system, "user_template": "{{ q }}"}, allow_unicode=True))
    assert CliRunner().invoke(cli, ["prompt", "import", "p.yaml"]).exit_code == 0

    def export(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "cycle", "prompt", "export", "p", *args],
                              capture_output=True, text=True, check=True, timeout=60)
        return done.stdout

    assert yaml.safe_load(export())["system"] == system
    assert export("--system") == system + "\n"


def test_a_python_user_saying_a_lone_surrogate_is_heard_not_an_error(tmp_path, monkeypatch):
    # a user's turn goes into the next requests as it is (they are not looked at again:
    # cycle.llm.model.well_formed), so it is made whole where it enters
    assert "more \ufffd please" in _run_with_python(
        tmp_path, monkeypatch, "hostile_surrogate_user",
        "def next_turn(messages, state):\n"
        "    return None if len(messages) > 3 else 'more \\udc00 please'\n",
        "offline:default",
        "  conversation: {user: {function: 'hostile_surrogate_user:next_turn'}, max_turns: 4}\n")


def test_a_case_id_with_a_pipe_and_backticks_keeps_its_row_and_its_code_span(
        tmp_path, monkeypatch):
    # an author's id `a|b` split the summary's row into a cell more; a backtick in one
    # ended its code span early
    import re

    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text("id: p\nsystem: You answer.\nuser_template: '{{ q }}'\n")
    (tmp_path / "cases.yaml").write_text(
        "- id: 'refund|late'\n  input: {q: q1}\n- id: 'say `hi`'\n  input: {q: q2}\n")
    (tmp_path / "cycle.yaml").write_text(
        "prompt: p.yaml\nagent: offline:default\n"
        "criteria: [{id: 'short|ish', check: {type: regex, pattern: '^x$'}}]\n"
        "cases: [cases.yaml]\nrun: {iterations: 1}\n")
    result = CliRunner().invoke(cli, ["run", "cycle.yaml", "--json"])
    assert result.exit_code == 1, result.output  # both fail: their sections are written
    md = (tmp_path / json.loads(result.stdout)["reports"]["markdown"]).read_text()
    _, html = _rendered(md)
    for table in re.findall(r"<table>(.*?)</table>", html, re.DOTALL):
        header, *rows = re.findall(r"<tr>(.*?)</tr>", table, re.DOTALL)
        assert rows and all(r.count("<td") == header.count("<th") for r in rows), table
    assert "<code>refund|late</code>" in html and "<code>say `hi`</code>" in html
