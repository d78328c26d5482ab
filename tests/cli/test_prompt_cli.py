"""The prompt commands through the real CLI (CliRunner) on a real store file."""

from __future__ import annotations

import json
import os
import pty
import shutil
import sqlite3
import subprocess
import sys
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
    assert "support-reply@1.0.0 stored" in out.stdout and "[head]" in out.stdout
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


def test_importing_an_older_content_again_says_how_to_move_head(env):
    run, _store, prompt = env
    original = prompt.read_text()
    run("prompt", "import", str(prompt))
    edit(prompt, "at most three sentences", "at most two sentences")
    run("prompt", "import", str(prompt))
    prompt.write_text(original)
    out = run("prompt", "import", str(prompt))
    assert "support-reply@1.0.0 unchanged" in out.stdout
    assert "head is at 1.0.1" in out.stderr and "cycle rollback support-reply --to 1.0.0" in out.stderr


def test_edit_import_history_diff_rollback_label(env):
    run, store, prompt = env
    run("prompt", "import", str(prompt))
    out = run("promote", "support-reply")
    assert out.stdout.splitlines() == ["support-reply: production (none) -> 1.0.0",
                                       "  1.0.0 has never been evaluated: cycle run cycle.yaml"]
    edit(prompt, "at most three sentences", "at most two sentences")
    out = run("prompt", "import", str(prompt), "-m", "shorter answers")
    assert "support-reply@1.0.1 stored" in out.stdout
    edit(prompt, "temperature: 0.2", "temperature: 0.4")
    run("prompt", "import", str(prompt), "--bump", "minor", "-m", "warmer")

    hist = run("history", "support-reply").stdout
    lines = hist.splitlines()
    assert lines[0] == "support-reply: 3 versions"
    assert lines[1].split() == ["VERSION", "LABELS", "SOURCE", "SCORE", "WORDS", "CREATED", "AUTHOR",
                                "PARENT", "MESSAGE"]
    assert lines[2].startswith("1.1.0") and "[head]" in lines[2] and "warmer" in lines[2]
    # the length of each version, in words, to see a prompt grow round after round
    words = lines[1].index("WORDS")
    assert all(line[words:].split()[0].isdigit() for line in lines[2:5])
    assert lines[4].startswith("1.0.0") and "[production]" in lines[4] and "initial" in lines[4]
    # columns are aligned: every row's LABELS cell starts at the same offset
    col = lines[1].index("LABELS")
    assert all(line[col - 2: col] == "  " for line in lines[2:])

    d = run("diff", "support-reply", "1.0.0", "1.0.1").stdout
    # word by word (issue 33): the changed line once, its changed word marked
    assert "~Answer the customer's question in at most [-three-]{+two+} sentences." in d
    lines = run("diff", "support-reply", "1.0.0", "1.0.1", "--lines").stdout
    assert "-Answer the customer's question in at most three sentences." in lines
    assert "+Answer the customer's question in at most two sentences." in lines
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
    run("promote", "support-reply", "1.0.0")
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
    run("promote", "support-reply", "head")
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


def test_import_bumps_major_from_the_command_line(env):
    run, _store, prompt = env
    run("prompt", "import", str(prompt))
    edit(prompt, "at most three sentences", "at most four sentences")
    data = json.loads(run("prompt", "import", str(prompt), "--bump", "major", "-m", "new voice", "--json").stdout)
    assert (data["created"], data["version"], data["parent"], data["message"]) == (True, "2.0.0", "1.0.0", "new voice")
    assert data["labels"] == ["head"]
    out = run("prompt", "import", str(prompt), "--bump", "sideways", code=2)
    assert "sideways" in out.stderr and "patch" in out.stderr


def test_history_labels_shows_every_recorded_move(env):
    run, _store, prompt = env
    run("prompt", "import", str(prompt))
    edit(prompt, "at most three sentences", "at most two sentences")
    run("prompt", "import", str(prompt), "-m", "shorter")
    run("rollback", "support-reply", "--to", "1.0.0", "-m", "too terse")
    run("label", "support-reply", "1.0.1", "staging", "-m", "try it")

    lines = run("history", "support-reply", "--labels").stdout.splitlines()
    assert lines[0] == "support-reply: 4 moves of labels"
    assert lines[1].split() == ["WHEN", "LABEL", "FROM", "TO", "ACTION", "WHO", "WHY"]
    # newest first: staging created, head rolled back, head moved by the save, then the first save
    assert lines[2].split()[2:6] == ["staging", "(new)", "1.0.1", "label"] and lines[2].endswith("try it")
    assert lines[3].split()[2:6] == ["head", "1.0.1", "1.0.0", "rollback"] and lines[3].endswith("too terse")
    assert lines[4].split()[2:6] == ["head", "1.0.0", "1.0.1", "save"] and lines[4].endswith("shorter")

    data = json.loads(run("history", "support-reply", "--labels", "--label", "head", "--json").stdout)
    assert data["total"] == 3
    assert [(m["from_version"], m["to_version"], m["action"]) for m in data["moves"]] == [
        ("1.0.1", "1.0.0", "rollback"), ("1.0.0", "1.0.1", "save"), (None, "1.0.0", "save")]
    assert data["moves"][0]["reason"] == "too terse" and data["moves"][0]["at"]
    page = run("history", "support-reply", "--labels", "-n", "1", "--offset", "1").stdout
    assert page.startswith("support-reply: 2-2 of 4 moves") and "rollback" in page

    out = run("history", "support-reply", "--labels", "--label", "canary", code=2)
    assert "no label 'canary'" in out.stderr and "head, staging" in out.stderr
    assert "Known prompts: support-reply" in run("history", "nope", "--labels", code=2).stderr
    assert "--labels" in run("history", "support-reply", "--label", "head", code=2).stderr


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("id: support-reply\nsystem: hi\n  user_template: x\n", ":3"),  # bad indentation
        ("id: support-reply\n\tsystem: hi\n", ":2"),  # a tab
        ("- id: support-reply\n", ":1"),  # a list, not a mapping
        ("id: support-reply\nsystem: 5\n", ":2 (system)"),
        ("id: support-reply\nparams:\n  temperature: warm\n", ":3 (params.temperature)"),
        ("id: support-reply\nparams:\n  model: nosuch:model\n", ":3 (params.model)"),
        ("id: support-reply\nuser_template: '{{ input '\n", ":2 (user_template)"),
    ],
)
def test_bad_prompt_file_changes_nothing_in_an_existing_store(env, tmp_path: Path, text: str, where: str):
    run, store, prompt = env
    run("prompt", "import", str(prompt))
    before = store.read_bytes()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    out = run("prompt", "import", str(bad), code=2)
    assert out.stderr.startswith(f"error: {bad}{where}") and "Traceback" not in out.output
    assert len(out.stderr.strip().splitlines()) <= 5  # one message and its fix, not a dump
    assert store.read_bytes() == before
    assert json.loads(run("history", "support-reply", "--json").stdout)["total"] == 1


def test_missing_prompt_file_exits_2(env, tmp_path: Path):
    run, store, _prompt = env
    out = run("prompt", "import", str(tmp_path / "nope.yaml"), code=2)
    assert out.stderr.strip() == f"error: {tmp_path / 'nope.yaml'}: file not found"
    assert not store.exists()


def _on_a_terminal(args: list[str], cwd: Path) -> str:
    """Run the real ``cycle`` command with its stdout on a pseudo-terminal; what it printed."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "cycle", *args], cwd=cwd, env=env,
                            stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command ended
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode()


def test_diff_is_coloured_on_a_terminal_and_plain_in_a_file(env, tmp_path: Path):
    run, store, prompt = env
    run("prompt", "import", str(prompt))
    edit(prompt, "at most three sentences", "at most two sentences")
    run("prompt", "import", str(prompt))
    args = ["--store", str(store), "diff", "support-reply", "1.0.0", "1.0.1"]

    shown = _on_a_terminal(args, tmp_path)
    assert "at most \x1b[31m[-three-]\x1b[0m\x1b[32m{+two+}\x1b[0m sentences." in shown

    out = tmp_path / "d.diff"
    with out.open("w") as f:
        subprocess.run([sys.executable, "-m", "cycle", *args], cwd=tmp_path, stdout=f, check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    text = out.read_text()
    assert "\x1b[" not in text and "at most [-three-]{+two+} sentences." in text
    assert "\x1b[" not in _on_a_terminal([*args, "--no-color"], tmp_path)


def test_default_store_is_beside_the_config_wherever_the_command_runs(tmp_path: Path, monkeypatch):
    project = tmp_path / "project"
    shutil.copytree(ROOT / "examples" / "quickstart", project,
                    ignore=shutil.ignore_patterns(".cycle", "reports"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("CYCLE_STORE", raising=False)
    result = CliRunner().invoke(cli, ["run", str(project / "cycle.yaml"), "-n", "1"])
    assert result.exit_code in (0, 1), result.output
    assert (project / ".cycle" / "cycle.db").is_file()
    assert not (elsewhere / ".cycle").exists()
    # the prompt commands read it where they run: in the project, as the README says
    monkeypatch.chdir(project)
    assert "support-reply@1.0.0" in CliRunner().invoke(cli, ["show", "support-reply"]).stdout
    # CYCLE_STORE wins over the config's directory
    monkeypatch.setenv("CYCLE_STORE", str(tmp_path / "env.db"))
    result = CliRunner().invoke(cli, ["run", str(project / "cycle.yaml"), "-n", "1"])
    assert result.exit_code in (0, 1), result.output
    assert (tmp_path / "env.db").is_file()


@pytest.mark.parametrize("kind", ["other-app", "newer-release"])
def test_another_apps_sqlite_or_a_newer_store_exits_2_and_is_left_alone(env, tmp_path: Path, kind: str):
    run, store, prompt = env
    if kind == "other-app":
        store.parent.mkdir(parents=True)
        with sqlite3.connect(store) as conn:
            conn.execute("CREATE TABLE notes (body TEXT)")
        says = "not a cycle store"
    else:
        run("prompt", "import", str(prompt))
        with sqlite3.connect(store) as conn:
            conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                         "VALUES ('cycle', 'm999_from_the_future', 'x')")
        says = "newer release"
    before = store.read_bytes()
    for args in (["prompt", "import", str(prompt)], ["history", "support-reply"], ["prompt", "list"]):
        out = run(*args, code=2)
        assert says in out.stderr and "Traceback" not in out.output
    assert store.read_bytes() == before


def test_prompt_list_hides_cycles_own_prompts_unless_all(env):
    from cycle.records import Prompt

    run, store, prompt = env
    run("prompt", "import", str(prompt))
    with Store.open(store) as s:
        s.save_version(Prompt(id="cycle-improver", system="Propose edits."))
        s.save_version(Prompt(id="cycle-judge", system="Score the reply."))
    assert [p["id"] for p in json.loads(run("prompt", "list", "--json").stdout)] == ["support-reply"]
    listed = run("prompt", "list").stdout
    assert "cycle-improver" not in listed and "cycle-judge" not in listed
    everything = json.loads(run("prompt", "list", "--all", "--json").stdout)
    assert [p["id"] for p in everything] == ["cycle-improver", "cycle-judge", "support-reply"]


def test_promote_moves_production_and_shows_the_evidence(env):
    run, store, prompt = env
    run("prompt", "import", str(prompt))
    edit(prompt, "at most three sentences", "at most two sentences")
    run("prompt", "import", str(prompt))
    with Store.open(store) as s:
        assert "production" not in s.labels("support-reply")  # saving never promotes
        s.runs.create(run_id="run-1", prompt_id="support-reply", version="1.0.1")
        s.runs.finish("run-1", status="finished", summary={"score": 88.25, "pass_rate": 0.75})
    out = run("promote", "support-reply")
    assert out.stdout.splitlines() == ["support-reply: production (none) -> 1.0.1",
                                       "  its latest run run-1 scored 88.2 (pass rate 75%)"]
    assert "already at 1.0.1" in run("promote", "support-reply", "1.0.1").stdout
    data = json.loads(run("promote", "support-reply", "1.0.0", "--json").stdout)
    assert (data["from"], data["to"], data["moved"]) == ("1.0.1", "1.0.0", True)
    assert "no version 9.9.9" in run("promote", "support-reply", "9.9.9", code=2).stderr
