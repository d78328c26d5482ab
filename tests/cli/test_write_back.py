"""Issue 33: after `cycle improve` moved head, `cycle run` and pytest evaluated the prompt
*file* (the old version) and nothing said so; `cycle prompt export` dropped the file's
comments. Through the CLI from the quickstart."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
FILE = "prompts/support-reply.yaml"


def test_the_improved_prompt_is_said_and_written_back_with_its_comments(tmp_path, monkeypatch):
    for name in ("cases", "prompts", "cycle.yaml"):
        src = QUICKSTART / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    prompt = tmp_path / FILE
    prompt.write_text("# Our support agent: reviewed in PR 12\n" + prompt.read_text().replace(
        "temperature: 0.2", "temperature: 0.2  # steady answers"))
    runner = CliRunner()
    improved = runner.invoke(cli, ["improve", "--headless", "--yes"])
    assert improved.exit_code == 0, improved.output
    assert f"{FILE} still holds 1.0.0" in improved.output
    assert f"cycle prompt export support-reply --write {FILE}" in improved.output
    ran = runner.invoke(cli, ["run"])
    assert f"this run evaluates {FILE} (1.0.0); the store's head is 1.0.2" in ran.output
    # and so does the pytest plugin, in its summary, with the way to evaluate head there
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(QUICKSTART.parents[1])}
    env.pop("CYCLE_STORE", None)
    tested = subprocess.run([sys.executable, "-m", "pytest", "--cycle", "cycle.yaml", "-q",
                             "-p", "no:cacheprovider"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert (f"cycle note: this run evaluates {FILE} (1.0.0); the store's head is 1.0.2, "
            "ahead of it. Evaluate head with prompt: store:support-reply@head in "
            "cycle.yaml") in tested.stdout, tested.stdout + tested.stderr
    wrote = runner.invoke(cli, ["prompt", "export", "support-reply", "--write", FILE])
    assert wrote.exit_code == 0, wrote.output
    text = prompt.read_text()
    assert text.startswith("# Our support agent: reviewed in PR 12\n")
    assert "temperature: 0.2  # steady answers" in text and "version: 1.0.2" in text
    from cycle.prompts.files import load_prompt_file
    from cycle.store import Store

    with Store.open(tmp_path / ".cycle" / "cycle.db") as store:
        head = store.resolve("support-reply@head")
    assert load_prompt_file(prompt).prompt.content_hash == head.prompt.content_hash
    again = runner.invoke(cli, ["run"])
    assert "this run evaluates" not in again.output  # the file is head now


def test_write_back_refuses_another_prompt_s_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.yaml").write_text("id: a\nsystem: A.\nuser_template: '{{ q }}'\n")
    (tmp_path / "b.yaml").write_text("id: b\nsystem: B.\nuser_template: '{{ q }}'\n")
    runner = CliRunner()
    assert runner.invoke(cli, ["prompt", "import", "a.yaml"]).exit_code == 0
    refused = runner.invoke(cli, ["prompt", "export", "a", "--write", "b.yaml"])
    assert refused.exit_code == 2 and "holds prompt 'b', not 'a'" in refused.output
    assert (tmp_path / "b.yaml").read_text().startswith("id: b\nsystem: B.")


def test_write_back_into_a_file_that_does_not_parse_says_where_and_leaves_it(tmp_path,
                                                                              monkeypatch):
    """A prompt file broken since it was imported (a tab, a second document, an unclosed
    list) ended the write-back in 'internal error: ScannerError/ComposerError/ParserError'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.yaml").write_text("id: a\nsystem: A.\nuser_template: '{{ q }}'\n")
    runner = CliRunner()
    assert runner.invoke(cli, ["prompt", "import", "a.yaml"]).exit_code == 0
    for broken, line in [("id: a\nsystem: A.\n\tuser_template: x\n", 3),
                         ("id: a\nsystem: A.\n---\nid: b\n", 3),
                         ("id: a\nsystem: [A.\n", 3)]:
        (tmp_path / "a.yaml").write_text(broken)
        refused = runner.invoke(cli, ["prompt", "export", "a", "--write", "a.yaml"])
        assert refused.exit_code == 2, refused.output
        assert refused.output.startswith(f"error: a.yaml:{line}: not valid YAML: "), refused.output
        assert (tmp_path / "a.yaml").read_text() == broken
