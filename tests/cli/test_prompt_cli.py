"""The prompt commands through the real CLI (CliRunner) on a real store file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.store import Store

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "prompts" / "support-reply.yaml"


@pytest.fixture
def env(tmp_path: Path):
    """A runner, a store path and a prompt file to edit."""
    store = tmp_path / "s" / "cycle.db"
    prompt = tmp_path / "support-reply.yaml"
    shutil.copy(EXAMPLE, prompt)

    def run(*args: str, code: int = 0):
        result = CliRunner().invoke(cli, ["--store", str(store), *args])
        assert result.exit_code == code, result.output
        return result

    return run, store, prompt


def edit(prompt: Path, old: str, new: str) -> None:
    prompt.write_text(prompt.read_text().replace(old, new))


def test_import_export_round_trip_is_exact(env, tmp_path: Path):
    run, _store, prompt = env
    out = run("prompt", "import", str(prompt))
    assert "support-reply@1.0.0 stored" in out.stdout and "[head, production]" in out.stdout
    assert run("prompt", "export", "support-reply").stdout == EXAMPLE.read_text()
    run("prompt", "export", "support-reply@1.0.0", "-o", str(tmp_path / "out" / "p.yaml"))
    assert (tmp_path / "out" / "p.yaml").read_text() == EXAMPLE.read_text()


def test_importing_the_same_content_twice_stores_it_once(env):
    run, store, prompt = env
    run("prompt", "import", str(prompt))
    out = run("prompt", "import", str(prompt), "--json")
    data = json.loads(out.stdout)
    assert data["created"] is False and data["version"] == "1.0.0"
    with Store.open(store) as s:
        assert s.count_versions("support-reply") == 1


def test_edit_import_history_diff_rollback_label(env):
    run, store, prompt = env
    run("prompt", "import", str(prompt))
    edit(prompt, "at most three sentences", "at most two sentences")
    out = run("prompt", "import", str(prompt), "-m", "shorter answers")
    assert "support-reply@1.0.1 stored" in out.stdout
    edit(prompt, "temperature: 0.2", "temperature: 0.4")
    run("prompt", "import", str(prompt), "--bump", "minor", "-m", "warmer")

    hist = run("history", "support-reply").stdout
    lines = hist.splitlines()
    assert lines[0] == "support-reply: 3 versions"
    assert lines[1].split() == ["VERSION", "LABELS", "SOURCE", "SCORE", "CREATED", "PARENT", "MESSAGE"]
    assert lines[2].startswith("1.1.0") and "[head]" in lines[2] and "warmer" in lines[2]
    assert lines[4].startswith("1.0.0") and "[production]" in lines[4] and "initial" in lines[4]
    # columns are aligned: every row's LABELS cell starts at the same offset
    col = lines[1].index("LABELS")
    assert all(line[col - 2: col] == "  " for line in lines[2:])

    d = run("diff", "support-reply", "1.0.0", "1.0.1").stdout
    assert "-Answer the customer's question in at most three sentences." in d
    assert "+Answer the customer's question in at most two sentences." in d
    assert "\x1b[" not in d  # not a terminal: plain
    assert "\x1b[32m" in run("diff", "support-reply", "1.0.0", "1.0.1", "--color").stdout
    dj = json.loads(run("diff", "support-reply", "1.0.1", "head", "--json").stdout)
    assert dj["fields"]["params"]["changed"] and not dj["fields"]["system"]["changed"]

    out = run("rollback", "support-reply", "--to", "1.0.0", "--message", "too terse")
    assert out.stdout.strip() == "support-reply: head 1.1.0 -> 1.0.0"
    assert "support-reply@1.0.0 [head, production]" in run("show", "support-reply").stdout
    out = run("rollback", "support-reply", "--to", "1.0.0")
    assert "already at 1.0.0" in out.stdout

    out = run("label", "support-reply", "1.1.0", "staging", "-m", "try warmer")
    assert out.stdout.strip() == "support-reply: staging (new) -> 1.1.0"
    shown = run("show", "support-reply@staging").stdout
    assert shown.startswith("# support-reply@1.1.0 [staging]") and "temperature: 0.4" in shown
    rb = json.loads(run("rollback", "support-reply", "--to", "1.0.1", "--label", "staging", "--json").stdout)
    assert (rb["from"], rb["to"], rb["moved"]) == ("1.1.0", "1.0.1", True)

    with Store.open(store) as s:
        assert s.count_versions("support-reply") == 3  # nothing deleted
        moves = s.label_moves("support-reply")
        assert (moves[0].label, moves[0].action) == ("staging", "rollback")
        assert any(m.reason == "too terse" and m.action == "rollback" for m in moves)


def test_list_show_history_json(env):
    run, _store, prompt = env
    assert "No prompts yet" in run("prompt", "list").stdout
    assert json.loads(run("prompt", "list", "--json").stdout) == []
    run("prompt", "import", str(prompt))
    run("prompt", "import", str(ROOT / "prompts" / "summarize.yaml"))
    listed = run("prompt", "list").stdout.splitlines()
    assert listed[0].split()[:3] == ["PROMPT", "LATEST", "VERSIONS"]
    assert listed[1].startswith("summarize ") and listed[2].startswith("support-reply ")
    data = json.loads(run("prompt", "list", "--json").stdout)
    assert [p["id"] for p in data] == ["summarize", "support-reply"]
    assert data[1]["labels"] == {"head": "1.0.0", "production": "1.0.0"}
    shown = json.loads(run("show", "support-reply@production", "--json").stdout)
    assert shown["version"] == "1.0.0" and shown["labels"] == ["head", "production"]
    assert shown["prompt"]["params"]["max_tokens"] == 300
    hist = json.loads(run("history", "support-reply", "--json").stdout)
    assert hist["total"] == 1 and hist["versions"][0]["score"] is None


def test_history_shows_the_latest_run_score(env):
    run, store, prompt = env
    run("prompt", "import", str(prompt))
    with Store.open(store) as s, s.transaction() as db:
        db.execute("INSERT INTO runs (id, prompt_id, version, status, started_at, finished_at, summary) "
                   "VALUES ('r1', 'support-reply', '1.0.0', 'finished', '2026-01-01', '2026-01-01', "
                   "'{\"score\": 81.25}')")
    assert "81.2" in run("history", "support-reply").stdout
    assert json.loads(run("history", "support-reply", "--json").stdout)["versions"][0]["score"] == 81.25


def test_unknown_prompt_version_and_label_exit_2_with_what_exists(env):
    run, _store, prompt = env
    run("prompt", "import", str(prompt))
    out = run("show", "nope", code=2)
    assert "unknown prompt 'nope'" in out.stderr and "support-reply" in out.stderr
    assert "Traceback" not in out.output
    out = run("show", "support-reply@9.0.0", code=2)
    assert "no version 9.0.0" in out.stderr and "1.0.0" in out.stderr
    out = run("rollback", "support-reply", "--to", "1.0.0", "--label", "canary", code=2)
    assert "no label 'canary'" in out.stderr and "head, production" in out.stderr
    out = run("diff", "support-reply", "1.0.0", "staging", code=2)
    assert "Labels: head -> 1.0.0, production -> 1.0.0" in out.stderr
    out = run("label", "support-reply", "1.0.0", "2.0.0", code=2)
    assert "cannot be a label name" in out.stderr


def test_malformed_prompt_file_exits_2_naming_file_line_field_and_stores_nothing(env, tmp_path: Path):
    run, store, _prompt = env
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: support-reply\nsystem: hi\ntemprature: 0.3\n")
    out = run("prompt", "import", str(bad), code=2)
    assert f"{bad}:3 (temprature)" in out.stderr
    bad.write_text("id: support-reply\nuser_template: |\n  Hi\n  {{ input }\n")
    out = run("prompt", "import", str(bad), code=2)
    assert f"{bad}:4 (user_template)" in out.stderr and "does not compile" in out.stderr
    assert not store.exists()  # the store was not even created


def test_not_a_store_exits_2_and_is_left_alone(tmp_path: Path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n" * 20)
    result = CliRunner().invoke(cli, ["--store", str(notes), "prompt", "import", str(EXAMPLE)])
    assert result.exit_code == 2
    assert "not a cycle store" in result.stderr and "Traceback" not in result.output
    assert notes.read_text() == "not a database\n" * 20


def test_read_commands_do_not_create_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["history", "support-reply"])
    assert result.exit_code == 2 and "no cycle store at .cycle/cycle.db" in result.stderr
    assert not (tmp_path / ".cycle").exists()


def test_default_store_is_in_the_cwd_and_cycle_store_overrides_it(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(cli, ["prompt", "import", str(EXAMPLE)]).exit_code == 0
    assert (tmp_path / ".cycle" / "cycle.db").is_file()
    monkeypatch.setenv("CYCLE_STORE", str(tmp_path / "other.db"))
    result = CliRunner().invoke(cli, ["prompt", "list", "--json"])
    assert json.loads(result.stdout) == []
    assert CliRunner().invoke(cli, ["prompt", "import", str(EXAMPLE)]).exit_code == 0
    assert (tmp_path / "other.db").is_file()
