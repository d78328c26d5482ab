"""`cycle init`: a project that runs at once, offline or against a real SDK, never overwriting."""

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import LoopbackServer

FILES = {"cycle.yaml", "prompts/support-reply.yaml", "cases/examples.yaml", ".env.example", ".gitignore"}


def invoke(*args, **kwargs):
    return CliRunner().invoke(cli, list(args), **kwargs)


def files_in(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_offline_project_runs_and_improves_at_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = invoke("init", "proj")  # no terminal, no --provider: asks nothing, offline
    assert r.exit_code == 0, r.output
    assert files_in(tmp_path / "proj") == FILES
    # the cd said once, on its own line, then the commands that run inside (issue 33)
    assert "  cd proj\n  cycle run " in r.output and "offline" in r.output
    assert "&&" not in r.output
    monkeypatch.chdir(tmp_path / "proj")
    r = invoke("run")
    assert r.exit_code == 1, r.output  # the starting prompt fails its cases, as it should
    assert "[offline model]" in r.output and "Cases 3:" in r.output
    r = invoke("improve", "--headless", "--yes")
    assert r.exit_code == 0, r.output
    assert "reached the target 90" in r.output
    r = invoke("history", "support-reply", "--json")
    assert r.exit_code == 0, r.output
    assert '"1.0.1"' in r.output  # the cycle made and kept a better version


def test_refuses_to_overwrite_and_writes_nothing(tmp_path):
    (tmp_path / "cycle.yaml").write_text("prompt: mine.yaml\n")
    r = invoke("init", str(tmp_path))
    assert r.exit_code == 2
    assert "would overwrite" in r.output and "cycle.yaml" in r.output and "Traceback" not in r.output
    assert files_in(tmp_path) == {"cycle.yaml"}
    assert (tmp_path / "cycle.yaml").read_text() == "prompt: mine.yaml\n"


def test_a_dangling_symlink_is_refused_and_nothing_is_written_where_it_points(tmp_path):
    project, elsewhere = tmp_path / "p", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "cycle.yaml").symlink_to(elsewhere / "cycle.yaml")  # points nowhere yet
    r = invoke("init", str(project))
    assert r.exit_code == 2, r.output
    assert "would overwrite" in r.output and "cycle.yaml" in r.output
    assert list(elsewhere.iterdir()) == []


def test_a_directory_that_is_a_dangling_symlink_is_refused_naming_it(tmp_path):
    """init into a link to nothing said "cannot write the project in p: File exists", and
    to write into a folder you can write to: nothing said the link was the matter."""
    project, target = tmp_path / "p", tmp_path / "not-yet"
    project.symlink_to(target, target_is_directory=True)
    r = invoke("init", str(project))
    assert r.exit_code == 2, r.output
    assert f"cannot write into {project}: it is a symlink to {target}, which does not exist" in (
        r.output)
    assert "nothing was written" in r.output and "Create the folder it points to" in r.output
    assert not target.exists() and project.is_symlink()


@pytest.mark.parametrize("kind", ["dangling link", "file"])
def test_a_subfolder_that_is_a_dangling_link_or_a_file_is_refused_before_anything_is_written(
        tmp_path, kind):
    """prompts/ linked to nothing (or a file named prompts) failed only when init came to
    it, once cycle.yaml was written: half a project, and a message saying "File exists"."""
    project = tmp_path / "p"
    project.mkdir()
    if kind == "file":
        (project / "prompts").write_text("mine\n")
    else:
        (project / "prompts").symlink_to("gone", target_is_directory=True)
    r = invoke("init", str(project))
    assert r.exit_code == 2, r.output
    said = "it is a file, not a folder" if kind == "file" else "it is a symlink to gone"
    assert f"cannot write into {project / 'prompts'}: {said}" in r.output
    assert "nothing was written" in r.output and "Traceback" not in r.output
    assert sorted(p.name for p in project.iterdir()) == ["prompts"]
    assert not (project / "gone").exists()


def test_a_file_linked_to_an_existing_file_is_not_overwritten_through_the_link(tmp_path):
    project, mine = tmp_path / "p", tmp_path / "my-config.yaml"
    project.mkdir()
    mine.write_text("prompt: mine.yaml\n")
    (project / "cycle.yaml").symlink_to(mine)
    r = invoke("init", str(project))
    assert r.exit_code == 2, r.output
    assert f"would overwrite {project / 'cycle.yaml'} (a symlink to {mine})" in r.output
    assert mine.read_text() == "prompt: mine.yaml\n"
    assert sorted(p.name for p in project.iterdir()) == ["cycle.yaml"]


def test_a_folder_that_links_outside_is_refused(tmp_path):
    project, elsewhere = tmp_path / "p", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "prompts").symlink_to(elsewhere, target_is_directory=True)
    r = invoke("init", str(project))
    assert r.exit_code == 2, r.output
    assert "outside" in r.output and "prompts" in r.output and "nothing was written" in r.output
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in project.iterdir()) == [
        "prompts"]


def test_server_url_project_runs_through_the_openai_sdk(tmp_path, monkeypatch):
    with LoopbackServer() as srv:
        r = invoke("init", str(tmp_path), "--provider", srv.openai_base_url, "--model", "tiny")
        assert r.exit_code == 0, r.output
        config = yaml.safe_load((tmp_path / "cycle.yaml").read_text())
        assert config["agent"] == config["judge"] == config["improver"] == "openai:tiny"
        assert config["providers"]["openai"]["base_url"] == srv.openai_base_url
        # a model on this machine is slow and answers a few calls at a time
        assert config["run"]["concurrency"] == 2 and config["run"]["timeout"] == 600
        assert config["providers"]["openai"]["timeout"] == 300
        monkeypatch.chdir(tmp_path)
        r = invoke("run", "-n", "1")
        assert r.exit_code in (0, 1), r.output
        assert srv.request_count >= 3  # the agent (and the judge) really were asked
        assert "[offline model]" not in r.output and "(est.)" not in r.output  # priced at 0 as set


def test_a_remote_server_keeps_the_usual_concurrency(tmp_path):
    r = invoke("init", str(tmp_path), "--provider", "https://openrouter.ai/api/v1", "--model", "x")
    assert r.exit_code == 0, r.output
    config = yaml.safe_load((tmp_path / "cycle.yaml").read_text())
    assert config["run"]["concurrency"] == 8 and "timeout" not in config["run"]


def test_openai_project_names_the_key_it_needs(tmp_path, monkeypatch):
    r = invoke("init", str(tmp_path), "--provider", "openai")
    assert r.exit_code == 0, r.output
    assert "OPENAI_API_KEY" in r.output
    assert "OPENAI_API_KEY=" in (tmp_path / ".env.example").read_text()
    assert yaml.safe_load((tmp_path / "cycle.yaml").read_text())["agent"] == "openai:gpt-4o-mini"
    monkeypatch.chdir(tmp_path)
    r = invoke("run")  # no key anywhere: one clear error before any call
    assert r.exit_code == 2, r.output
    assert "OPENAI_API_KEY" in r.output and "Traceback" not in r.output


def test_gemini_project_runs_through_the_google_genai_sdk(tmp_path, monkeypatch):
    """The gemini project as written, with providers.gemini.base_url sending it to loopback."""
    r = invoke("init", str(tmp_path), "--provider", "gemini")
    assert r.exit_code == 0, r.output
    assert "GEMINI_API_KEY=" in (tmp_path / ".env.example").read_text()
    (tmp_path / ".env").write_text("GEMINI_API_KEY=test-key-from-dotenv\n")
    monkeypatch.chdir(tmp_path)
    with LoopbackServer() as srv:
        cfg = tmp_path / "cycle.yaml"
        cfg.write_text(cfg.read_text() + f"providers:\n  gemini: {{base_url: '{srv.gemini_base_url}'}}\n")
        r = invoke("run", "-n", "1")
        assert r.exit_code in (0, 1), r.output
        assert srv.request_count >= 3
        assert all("/models/gemini-2.5-" in req.path for req in srv.requests)


def test_unknown_provider_is_a_usage_error(tmp_path):
    r = invoke("init", str(tmp_path), "--provider", "anthropic")
    assert r.exit_code == 2
    assert "neither offline, openai, gemini nor an http(s) URL" in r.output
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("args", "flag"), [
    (["--provider", "openai", "--model", "gpt 4o\nagent: x"], "--model"),
    (["--provider", "openai", "--model", "my#model"], "--model"),
    (["--provider", 'http://localhost:11434/v1"'], "--provider"),
    (["--provider", "http://localhost:11434/v1\n#"], "--provider"),
])
def test_a_model_or_url_that_would_break_cycle_yaml_is_refused(tmp_path, args, flag):
    """--model 'gpt 4o<newline>...' (or one with '#', or a URL with a quote or a newline)
    was written into cycle.yaml as it was: the project init made did not parse
    (cycle run: 'cycle.yaml:5: not valid YAML')."""
    r = invoke("init", str(tmp_path), *args)
    assert r.exit_code == 2 and f"Invalid value for {flag}" in r.output, r.output
    assert not any(tmp_path.iterdir())


def test_asks_in_a_terminal(tmp_path):
    """In a real terminal it asks for the provider, and for a server's URL and model."""
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "cycle", "init", str(tmp_path)],
                            stdin=child, stdout=child, stderr=child, close_fds=True)
    os.close(child)
    seen = b""

    def read_until(text: bytes) -> None:
        nonlocal seen
        deadline = time.monotonic() + 30
        while text not in seen and time.monotonic() < deadline:
            if select.select([main], [], [], 0.5)[0]:
                try:
                    seen += os.read(main, 4096)
                except OSError:
                    break
        assert text in seen, seen.decode(errors="replace")

    read_until(b"Provider")
    os.write(main, b"url\n")
    read_until(b"Server base URL")
    os.write(main, b"http://127.0.0.1:8000/v1\n")
    read_until(b"Model name")
    os.write(main, b"qwen3\n")
    read_until(b"Created 5 files")
    assert proc.wait(timeout=30) == 0
    os.close(main)
    config = yaml.safe_load((tmp_path / "cycle.yaml").read_text())
    assert config["agent"] == "openai:qwen3"
    assert config["providers"]["openai"]["base_url"] == "http://127.0.0.1:8000/v1"


def test_an_existing_gitignore_is_left_alone(tmp_path):
    (tmp_path / ".gitignore").write_text("node_modules/\n")
    r = invoke("init", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert (tmp_path / ".gitignore").read_text() == "node_modules/\n"
    assert "Left your .gitignore as it was: add .env, .cycle/ and reports/" in r.output
    assert files_in(tmp_path) == FILES
