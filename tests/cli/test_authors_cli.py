"""Who did what (the team-store issue), through the real CLI on a real store file: every
version and label move records its author, `cycle history` shows them; a protected label
moves only by the people its protection names, or with --force; an older store migrates
with its authors unknown; a cycle's versions are by the loop on behalf of who ran it, its
review decisions by the policy on their behalf, and a protected head stops it cleanly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from sqlite_utils import Database

from cycle.cli import cli
from cycle.records import Prompt
from cycle.store import Store
from cycle.store.migrations import apply_migrations
from tests.stored import copied

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "prompts" / "support-reply.yaml"
QUICKSTART = ROOT / "examples" / "quickstart"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``run(*args, who=NAME, code=0)``: the CLI as NAME (CYCLE_AUTHOR) on one store."""
    store = tmp_path / "s" / "cycle.db"
    prompt = tmp_path / "support-reply.yaml"
    shutil.copy(EXAMPLE, prompt)

    def run(*args: str, who: str = "alice", code: int = 0):
        monkeypatch.setenv("CYCLE_AUTHOR", who)
        result = CliRunner().invoke(cli, ["--store", str(store), *args])
        assert result.exit_code == code, result.output
        assert "Traceback" not in result.output
        return result

    return run, store, prompt


def edit(prompt: Path, old: str, new: str) -> None:
    prompt.write_text(prompt.read_text().replace(old, new))


def history_rows(run) -> dict[str, dict[str, str]]:
    """`cycle history support-reply` as version -> column -> cell (the columns are aligned)."""
    lines = run("history", "support-reply").stdout.splitlines()[1:]
    header = lines[0]
    names = header.split()
    starts = [header.index(n) for n in names]
    rows = {}
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        rows[cells[0]] = dict(zip(names, cells, strict=True))
    return rows


def test_history_shows_who_stored_each_version_and_who_moved_each_label(env):
    run, _store, prompt = env
    run("prompt", "import", str(prompt), who="alice")
    edit(prompt, "at most three sentences", "at most two sentences")
    run("prompt", "import", str(prompt), "-m", "shorter", who="bob")
    run("promote", "support-reply", "1.0.0", who="carol")

    rows = history_rows(run)
    assert (rows["1.0.1"]["AUTHOR"], rows["1.0.0"]["AUTHOR"]) == ("bob", "alice")
    assert all(rows[v]["CREATED"][:2] == "20" for v in rows)  # and when
    data = json.loads(run("history", "support-reply", "--json").stdout)
    assert [(v["version"], v["author"]) for v in data["versions"]] == [("1.0.1", "bob"),
                                                                      ("1.0.0", "alice")]
    assert all(v["created_at"] for v in data["versions"])
    assert "by alice" in run("show", "support-reply@1.0.0").stdout.splitlines()[2]

    moves = run("history", "support-reply", "--labels").stdout
    assert "WHO" in moves.splitlines()[1]
    promoted = next(line for line in moves.splitlines() if "production" in line)
    assert "carol" in promoted
    moved = json.loads(run("history", "support-reply", "--labels", "--json").stdout)["moves"]
    assert [(m["label"], m["who"], m["forced"]) for m in moved] == [
        ("production", "carol", False), ("head", "bob", False), ("head", "alice", False)]


def test_a_protected_production_moves_only_by_the_people_named_or_with_force(env):
    run, store, prompt = env
    run("prompt", "import", str(prompt))
    edit(prompt, "at most three sentences", "at most two sentences")
    run("prompt", "import", str(prompt))
    run("promote", "support-reply", "1.0.0")
    out = run("protect", "production", "--allow", "alice", "--allow", "dana", who="alice")
    assert out.stdout.strip() == ("production is protected: only alice or dana move it "
                                  "without --force (every prompt)")

    refused = run("promote", "support-reply", who="bob", code=2)
    assert refused.stderr.splitlines() == [
        ("error: bob may not move 'production' of support-reply: the label is protected (by "
         "alice, for every prompt)"),
        ("Only alice or dana may move it: ask them, or add --force to move it anyway (the move "
         "is recorded as forced, with your name)."),
    ]
    # nor by another command that moves it
    run("rollback", "support-reply", "--label", "production", "--to", "1.0.1", who="bob", code=2)
    run("label", "support-reply", "1.0.1", "production", who="bob", code=2)
    with Store.open(store) as s:
        assert s.labels("support-reply")["production"] == "1.0.0"  # nothing moved
        assert s.count_label_moves("support-reply", label="production") == 1

    assert "production 1.0.0 -> 1.0.1" in run("promote", "support-reply", who="dana").stdout
    forced = json.loads(run("rollback", "support-reply", "--label", "production", "--to",
                            "1.0.0", "--force", "-m", "hotfix", "--json", who="bob").stdout)
    assert (forced["from"], forced["to"], forced["moved"]) == ("1.0.1", "1.0.0", True)
    # other labels move as before
    run("label", "support-reply", "1.0.1", "staging", who="bob")

    moves = json.loads(run("history", "support-reply", "--labels", "--label", "production",
                           "--json").stdout)
    assert [(m["who"], m["to_version"], m["forced"]) for m in moves["moves"]] == [
        ("bob", "1.0.0", True), ("dana", "1.0.1", False), ("alice", "1.0.0", False)]
    assert [(p["label"], p["allowed"]) for p in moves["protected"]] == [
        ("production", ["alice", "dana"])]
    text = run("history", "support-reply", "--labels").stdout
    assert "production is protected: only alice or dana move it without --force" in text
    assert "rollback (forced)  bob" in text


def test_changing_or_lifting_a_protection_needs_someone_it_allows_or_force(env):
    run, _store, prompt = env
    run("prompt", "import", str(prompt))
    run("protect", "production", "--prompt", "support-reply", "--allow", "alice")
    # bob cannot widen it for himself, nor lift it
    out = run("protect", "production", "--prompt", "support-reply", "--allow", "bob", who="bob",
              code=2)
    assert "bob may not change the protection of 'production' of support-reply" in out.stderr
    assert "--force" in out.stderr
    out = run("unprotect", "production", "--prompt", "support-reply", who="bob", code=2)
    assert "bob may not unprotect" in out.stderr and "Only alice may lift its protection" in out.stderr
    # nor get round it by a protection of every prompt: the prompt's own one stands
    run("protect", "production", "--allow", "bob", who="bob")
    run("promote", "support-reply", who="bob", code=2)

    listed = json.loads(run("protect", "--json").stdout)
    assert [(p["prompt_id"], p["label"], p["allowed"], p["by"]) for p in listed] == [
        ("*", "production", ["bob"], "bob"), ("support-reply", "production", ["alice"], "alice")]
    table = run("protect").stdout.splitlines()
    assert table[0].split() == ["LABEL", "PROMPT", "MAY", "MOVE", "IT", "BY", "SINCE"]

    out = run("unprotect", "production", "--prompt", "support-reply", who="alice")
    assert "production of support-reply is no longer protected" in out.stdout
    assert "still protected for every prompt: only bob moves it" in out.stderr
    run("unprotect", "production", "--prompt", "support-reply", code=2)  # nothing left to lift
    run("unprotect", "production", who="carol", code=2)
    run("unprotect", "production", "--force", who="carol")
    assert run("promote", "support-reply", who="carol").exit_code == 0
    assert "No label is protected" in run("protect").stdout


def test_protecting_a_label_of_an_unknown_prompt_says_which_exist(env):
    run, _store, prompt = env
    run("prompt", "import", str(prompt))
    out = run("protect", "production", "--prompt", "suport-reply", code=2)
    assert "unknown prompt 'suport-reply'" in out.stderr and "support-reply" in out.stderr
    out = run("protect", "1.0.0", code=2)  # a version number is no label
    assert "cannot be a label name" in out.stderr


def test_a_protected_head_keeps_an_import_from_moving_it_without_force(env):
    run, store, prompt = env
    run("prompt", "import", str(prompt))
    run("protect", "head")
    edit(prompt, "at most three sentences", "at most two sentences")
    out = run("prompt", "import", str(prompt), who="bob", code=2)
    assert "bob may not move 'head' of support-reply" in out.stderr
    run("prompt", "import", str(prompt), "--no-head", who="bob")  # stored, head stays
    with Store.open(store) as s:
        assert s.labels("support-reply")["head"] == "1.0.0"
        assert s.get_version("support-reply", "1.0.1").author == "bob"


def test_a_store_from_before_authors_migrates_and_shows_them_unknown(tmp_path: Path):
    path = tmp_path / "old.db"
    old = Database(path)
    apply_migrations(old.conn, stop_before="m014_population")
    assert "author" not in {c.name for c in old["versions"].columns}
    content = Prompt(id="p", system="s")
    old.execute("INSERT INTO prompts VALUES ('p', '2026-01-01T00:00:00+00:00')")
    old.execute(
        "INSERT INTO versions (prompt_id, seq, version, hash, parent, source, message, created_at, "
        "system, user_template, params, metadata) VALUES ('p', 1, '1.0.0', ?, NULL, 'initial', '', "
        "'2026-01-01T00:00:00+00:00', 's', '{{ input }}', '{}', '{}')", (content.content_hash,))
    old.execute("INSERT INTO labels VALUES ('p', 'head', '1.0.0', '2026-01-01T00:00:00+00:00')")
    old.execute("INSERT INTO label_moves (prompt_id, label, from_version, to_version, action, at) "
                "VALUES ('p', 'head', NULL, '1.0.0', 'save', '2026-01-01T00:00:00+00:00')")
    old.execute("INSERT INTO suggestions (id, cycle_id, round, type, priority, suggested_value, "
                "decision) VALUES ('s1', 'c1', 1, 'system_prompt', 'high', 'x', 'approved')")
    old.conn.commit()
    old.close()

    r = CliRunner().invoke(cli, ["--store", str(path), "history", "p"])
    assert r.exit_code == 0, r.output
    header, row = r.stdout.splitlines()[1:3]
    assert row[header.index("AUTHOR"):].split()[0] == "-"
    data = json.loads(CliRunner().invoke(cli, ["--store", str(path), "history", "p", "--json"]).stdout)
    assert data["versions"][0]["author"] is None
    with Store.open(path) as store:
        (move,) = store.label_moves("p")
        assert (move.who, move.forced) == ("user", False)  # m002's default for older moves
        (s,) = store.cycles.get_suggestions("c1")
        assert (s.decision, s.decided_by, s.decided_at) == ("approved", None, None)
        assert store.protections.all() == []
        # and it is written as any store from now on
        v = store.save_version(Prompt(id="p", system="t"))
        assert v.author == "tester"


@pytest.fixture
def quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tmp_path = copied("quickstart", tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CYCLE_AUTHOR", "alice")
    cfg = yaml.safe_load(Path("cycle.yaml").read_text())
    cfg["improve"]["stop"] = {"max_rounds": 1}
    Path("cycle.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path


def test_a_cycle_records_its_versions_and_decisions_on_behalf_of_who_ran_it(quickstart: Path):
    r = CliRunner().invoke(cli, ["improve", "--headless", "--yes"])
    assert r.exit_code == 0, r.output
    with Store.open(quickstart / ".cycle" / "cycle.db") as store:
        versions = store.history("support-reply")
        assert [v.author for v in versions] == ["cycle (alice)", "alice"]
        moves = store.label_moves("support-reply", label="head")
        assert [m.who for m in moves] == ["cycle (alice)", "alice"]
        (cycle,) = store.cycles.recent()
        decided = store.cycles.get_suggestions(cycle.id)
        assert decided and {s.decided_by for s in decided} == {"policy:auto (alice)"}
        assert all(s.decided_at for s in decided)
    report = next(line for line in r.stdout.splitlines() if line.startswith("report: "))
    assert "approved by policy:auto (alice)" in (quickstart / report.removeprefix("report: ")
                                                 .strip()).read_text()


def test_a_protected_head_stops_the_cycle_with_the_reason_not_a_traceback(quickstart: Path):
    r = CliRunner().invoke(cli, ["protect", "head"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["improve", "--headless", "--yes"])
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    assert ("head stays at 1.0.0: cycle (alice) may not move 'head' of support-reply: the label "
            "is protected") in r.stdout
    assert "cycle rollback support-reply --to 1.0.1 --force" in r.stdout
    with Store.open(quickstart / ".cycle" / "cycle.db") as store:
        assert store.labels("support-reply")["head"] == "1.0.0"
        assert store.get_version("support-reply", "1.0.1").author == "cycle (alice)"  # kept
        (cycle,) = store.cycles.recent()
        assert cycle.status == "finished" and "is protected" in cycle.stop_reason
