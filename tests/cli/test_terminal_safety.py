"""Issue 32: escape sequences in a provider's error, a model's answer, an improver's edit
or a case id reached the terminal raw through ``cycle run`` and ``cycle diff``; a newline
in a case id forged a console line. Through the real CLI: nothing from outside is obeyed."""

from __future__ import annotations

import textwrap

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import Fault, LoopbackServer, Reply

EVIL = "\x1b]0;owned\x07\x1b]8;;http://evil.example\x07click\x1b]8;;\x07\x1b[2J\rFAKE"
CONFIG = """\
prompt: p.yaml
criteria: [{{id: short, check: {{type: regex, pattern: '^.{{0,400}}$'}}}}]
cases: [cases.yaml]
run: {{iterations: 1}}
providers: {{openai: {{base_url: '{url}'}}}}
"""


def _project(tmp_path, url: str) -> None:
    (tmp_path / "p.yaml").write_text(textwrap.dedent("""\
        id: p
        system: You answer.
        user_template: "{{ question }}"
        params: {model: openai:gpt-4o-mini}
    """))
    (tmp_path / "cases.yaml").write_text("- id: a\n  input: {question: q1}\n"
                                         "- id: b\n  input: {question: q2}\n")
    (tmp_path / "cycle.yaml").write_text(CONFIG.format(url=url))


def test_escape_sequences_from_a_provider_never_reach_the_terminal(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    monkeypatch.chdir(tmp_path)
    with LoopbackServer() as srv:
        _project(tmp_path, srv.openai_base_url)
        srv.enqueue(*[Fault.status(400, message=f"bad request {EVIL}")] * 2)
        srv.responder = lambda request: Reply(text=f"answer {EVIL}")
        result = CliRunner().invoke(cli, ["run", "cycle.yaml"])
    assert "\x1b" not in result.output and "\r" not in result.output and "\x07" not in result.output
    assert "\\x1b]0;owned" in result.output  # shown, visibly


def test_a_case_id_with_a_newline_or_an_escape_is_refused_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    monkeypatch.chdir(tmp_path)
    _project(tmp_path, "http://127.0.0.1:9/v1")
    (tmp_path / "cases.yaml").write_text(
        '- id: "a\\nround 1 done: 1.0.0 scored 100.0"\n  input: {question: q}\n'
        '- id: "b\\e[2J"\n  input: {question: q}\n')
    result = CliRunner().invoke(cli, ["run", "cycle.yaml"])
    assert result.exit_code == 2 and "cases.yaml" in result.output
    assert "control characters or newlines" in result.output
    assert "\nround 1 done" not in result.output and "\x1b" not in result.output


def test_cycle_diff_shows_an_edit_s_escapes_visibly(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text("id: p\nsystem: You answer.\nuser_template: '{{ q }}'\n")
    runner = CliRunner()
    assert runner.invoke(cli, ["prompt", "import", "p.yaml"]).exit_code == 0
    (tmp_path / "p.yaml").write_text(
        'id: p\nsystem: "You answer. \\e]0;owned\\a\\e[2J"\nuser_template: "{{ q }}"\n')
    assert runner.invoke(cli, ["prompt", "import", "p.yaml"]).exit_code == 0
    result = runner.invoke(cli, ["diff", "p", "1.0.0", "1.0.1"])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\\x1b]0;owned" in result.output
