"""Prompt versions, labels, rollback and diffs through the Store API, on a real SQLite file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from cycle.errors import NotFoundError, StoreError, TemplateError
from cycle.records import Prompt
from cycle.store import Store


def make(system: str = "You help.", *, pid: str = "support", temperature: float = 0.2, **kw) -> Prompt:
    return Prompt(id=pid, system=system, user_template="Q: {{ input }}",
                  params={"model": "offline:default", "temperature": temperature}, **kw)


@pytest.fixture
def store(store_target):
    """The store on each backend (tests/conftest.py: a SQLite file, a PostgreSQL schema)."""
    with Store.open(store_target) as s:
        yield s


def test_first_version_is_initial_1_0_0_with_head_only(store: Store, tmp_path: Path):
    v = store.save_version(make(), message="first draft")
    assert (v.version, v.source, v.parent, v.seq, v.message) == ("1.0.0", "initial", None, 1, "first draft")
    assert v.hash == make().content_hash
    # production is a person's decision (cycle promote), never the effect of a save
    assert store.labels("support") == {"head": "1.0.0"}
    assert store.path is None or (tmp_path / ".cycle" / "cycle.db").is_file()


def test_new_versions_bump_patch_minor_major_with_parent_and_source(store: Store):
    store.save_version(make("a"))
    v2 = store.save_version(make("b"), source="improver", message="tighter")
    v3 = store.save_version(make("c"), bump="minor")
    v4 = store.save_version(make("d"), bump="major")
    v5 = store.save_version(make("e"))
    assert [v.version for v in (v2, v3, v4, v5)] == ["1.0.1", "1.1.0", "2.0.0", "2.0.1"]
    assert (v2.parent, v2.source, v2.message) == ("1.0.0", "improver", "tighter")
    assert v5.parent == "2.0.0"
    assert store.labels("support") == {"head": "2.0.1"}


def test_identical_content_returns_existing_version_without_a_row(store: Store):
    v1 = store.save_version(make("a"))
    store.save_version(make("b"))
    again = store.save_version(make("a", metadata={"note": "metadata is not content"}))
    assert again.version == v1.version and again.hash == v1.hash
    assert store.count_versions("support") == 2
    assert store.labels("support")["head"] == "1.0.1"  # no label moved either
    assert store.find_version(make("b")).version == "1.0.1"
    assert store.find_version(make("z")) is None


def test_version_named_by_a_file_is_used_only_above_the_latest(store: Store):
    assert store.save_version(make("a"), version="2.3.0").version == "2.3.0"
    assert store.save_version(make("b"), version="3.0.0").version == "3.0.0"
    assert store.save_version(make("c"), version="1.0.0").version == "3.0.1"


def test_move_head_false_keeps_head(store: Store):
    store.save_version(make("a"))
    v = store.save_version(make("b"), move_head=False)
    assert store.labels("support")["head"] == "1.0.0"
    assert store.resolve("support@1.0.1").version == v.version


def test_parent_defaults_to_head_after_rollback(store: Store):
    store.save_version(make("a"))
    store.save_version(make("b"))
    store.rollback("support", "1.0.0", reason="b was worse")
    v = store.save_version(make("c"))
    assert (v.version, v.parent) == ("1.0.2", "1.0.0")


def test_resolve_by_id_number_label_and_hash_prefix(store: Store):
    v1 = store.save_version(make("a"))
    v2 = store.save_version(make("b"))
    store.set_label("support", "production", "1.0.0")
    assert store.resolve("support").version == "1.0.1"
    assert store.resolve("support@head").version == "1.0.1"
    assert store.resolve("support@production").version == "1.0.0"
    assert store.resolve("support@v1.0.0").prompt == v1.prompt
    assert store.resolve(f"support@{v2.hash[:8]}").version == "1.0.1"
    assert store.get_version("support", "1.0.1").prompt.system == "b"


def test_unknown_prompt_version_and_label_list_what_exists(store: Store):
    store.save_version(make("a"))
    store.save_version(make("x", pid="other"))
    with pytest.raises(NotFoundError) as e:
        store.resolve("nope@head")
    assert "unknown prompt 'nope'" in str(e.value) and "other, support" in str(e.value)
    with pytest.raises(NotFoundError) as e:
        store.resolve("support@9.9.9")
    assert "no version 9.9.9" in str(e.value) and "1.0.0" in str(e.value)
    with pytest.raises(NotFoundError) as e:
        store.resolve("support@staging")
    assert "Labels: head -> 1.0.0." in str(e.value)


def test_history_pages_newest_first(store: Store):
    for i in range(7):
        store.save_version(make(f"v{i}"))
    page = store.history("support", limit=3)
    assert [v.version for v in page] == ["1.0.6", "1.0.5", "1.0.4"]
    assert [v.version for v in store.history("support", limit=3, offset=6)] == ["1.0.0"]
    with pytest.raises(NotFoundError):
        store.history("nope")


def test_list_prompts(store: Store):
    store.save_version(make("a", pid="b-prompt"))
    store.save_version(make("a", pid="a-prompt"))
    store.save_version(make("b", pid="a-prompt"))
    store.set_label("a-prompt", "staging", "1.0.0")
    summaries = store.list_prompts()
    assert [(s.id, s.versions, s.latest) for s in summaries] == [("a-prompt", 2, "1.0.1"), ("b-prompt", 1, "1.0.0")]
    assert summaries[0].labels == {"head": "1.0.1", "staging": "1.0.0"}
    store.save_version(make("i", pid="cycle-improver"))  # cycle's own prompt: hidden on request
    assert "cycle-improver" in [s.id for s in store.list_prompts()]
    assert [s.id for s in store.list_prompts(builtin=False)] == ["a-prompt", "b-prompt"]


def test_set_label_records_moves_and_skips_no_op(store: Store):
    store.save_version(make("a"))
    store.save_version(make("b"))
    move = store.set_label("support", "staging", "1.0.1", reason="try it", who="ann")
    assert (move.from_version, move.to_version, move.who, move.reason) == (None, "1.0.1", "ann", "try it")
    assert store.set_label("support", "staging", "head") is None  # already there: no move
    store.set_label("support", "production", "1.0.1")
    moves = store.label_moves("support")
    assert [(m.label, m.from_version, m.to_version, m.action) for m in moves[:2]] == [
        ("production", None, "1.0.1", "label"), ("staging", None, "1.0.1", "label"),
    ]
    # head (first save), head (second save), staging, production
    assert len(moves) == 4


def test_label_names_cannot_look_like_versions(store: Store):
    store.save_version(make("a"))
    for bad in ("1.2.3", "has space", "", "-x"):
        with pytest.raises(StoreError):
            store.set_label("support", bad, "1.0.0")


def test_rollback_moves_head_records_it_and_deletes_nothing(store: Store):
    store.save_version(make("a"))
    store.save_version(make("b"))
    store.save_version(make("c"))
    v = store.rollback("support", "1.0.0", reason="regression on refunds", who="bob")
    assert v.version == "1.0.0"
    assert store.resolve("support").prompt.system == "a"
    assert store.count_versions("support") == 3
    last = store.label_moves("support", label="head")[0]
    assert (last.from_version, last.to_version, last.action, last.reason, last.who) == (
        "1.0.2", "1.0.0", "rollback", "regression on refunds", "bob")
    # and forward again: still only a label move
    store.rollback("support", "1.0.2")
    assert store.labels("support")["head"] == "1.0.2"


def test_rollback_of_a_named_label_and_unknown_label(store: Store):
    store.save_version(make("a"))
    store.save_version(make("b"))
    store.set_label("support", "production", "1.0.1")
    store.rollback("support", "1.0.0", label="production")
    assert store.labels("support") == {"head": "1.0.1", "production": "1.0.0"}
    with pytest.raises(NotFoundError) as e:
        store.rollback("support", "1.0.0", label="canary")
    assert "head, production" in str(e.value)
    with pytest.raises(NotFoundError):
        store.rollback("support", "7.0.0")
    assert store.labels("support") == {"head": "1.0.1", "production": "1.0.0"}


def test_diff_per_field(store: Store):
    store.save_version(make("line one\nline two\n"))
    store.save_version(make("line one\nline 2\n", temperature=0.7))
    store.set_label("support", "production", "1.0.0")
    d = store.diff("support", "1.0.0", "head")
    assert (d.a, d.b) == ("1.0.0", "1.0.1")
    assert d.field("system").changed and not d.field("user_template").changed
    assert "-line two\n+line 2\n" in d.field("system").text
    assert '-  "temperature": 0.2\n+  "temperature": 0.7' in d.field("params").text
    assert "\x1b[" not in d.render() and "\x1b[" in d.render(color=True)
    data = json.loads(json.dumps(d.to_dict()))
    assert data["fields"]["user_template"] == {"changed": False, "diff": ""}
    assert not store.diff("support", "1.0.0", "production").changed


def test_a_line_added_after_the_last_is_shown_as_added_alone(store: Store):
    """Prompt fields seldom end with a newline: a line the improver adds after the last
    one is one added line, not the last line removed and added again."""
    store.save_version(make("You help.\nAnswer politely."))
    store.save_version(make("You help.\nAnswer politely.\nNever promise a refund."))
    text = store.diff("support", "1.0.0", "1.0.1").field("system").text
    assert text.splitlines()[2:] == ["@@ -1,2 +1,3 @@", " You help.", " Answer politely.",
                                     "+Never promise a refund."]
    # a newline really added or taken away is still said
    store.save_version(make("You help.\nAnswer politely.\nNever promise a refund.\n"))
    text = store.diff("support", "1.0.1", "1.0.2").field("system").text
    assert "\\ No newline at end of field" in text


def test_template_that_does_not_compile_is_not_stored(store: Store):
    with pytest.raises(TemplateError):
        store.save_version(Prompt(id="support", user_template="{% if %}"))
    assert store.list_prompts() == []


def test_bad_arguments(store: Store):
    with pytest.raises(StoreError):
        store.save_version(make(), bump="huge")
    with pytest.raises(StoreError):
        store.save_version(make(), source="magic")
    with pytest.raises(StoreError):
        store.save_version(make(pid="has@at"))
    assert store.list_prompts() == []


def test_a_write_failing_halfway_leaves_no_partial_version(store: Store):
    store.save_version(make("a"))
    # make the label update (the last write of save_version) fail inside the transaction
    _fail_inserts(store, "label_moves", "disk on fire")
    with pytest.raises(StoreError, match="nothing was saved"):
        store.save_version(make("b"))
    assert store.count_versions("support") == 1
    assert store.labels("support")["head"] == "1.0.0"
    store.db.execute("DROP TRIGGER no_inserts ON label_moves" if store.path is None
                     else "DROP TRIGGER no_inserts")
    assert store.save_version(make("b")).version == "1.0.1"  # the store is still usable


def _fail_inserts(store: Store, table: str, message: str) -> None:
    """Make every insert into ``table`` fail, in the store's own database."""
    if store.path is None:  # PostgreSQL
        store.db.execute("CREATE OR REPLACE FUNCTION fail_insert() RETURNS trigger LANGUAGE "
                         f"plpgsql AS $$ BEGIN RAISE EXCEPTION '{message}'; END $$")
        store.db.execute(f"CREATE TRIGGER no_inserts BEFORE INSERT ON {table} FOR EACH ROW "
                         "EXECUTE FUNCTION fail_insert()")
    else:
        store.db.execute(f"CREATE TRIGGER no_inserts BEFORE INSERT ON {table} "
                         f"BEGIN SELECT RAISE(ABORT, '{message}'); END")


def test_first_version_failing_leaves_no_prompt(store: Store):
    _fail_inserts(store, "labels", "nope")
    with pytest.raises(StoreError):
        store.save_version(make("a"))
    assert store.db.execute("SELECT count(*) FROM prompts").fetchone()[0] == 0
    assert store.db.execute("SELECT count(*) FROM versions").fetchone()[0] == 0


def test_latest_scores_from_runs_summary(store: Store):
    store.save_version(make("a"))
    store.save_version(make("b"))
    rows = [
        ("r1", "1.0.0", "finished", "2026-01-01T00:00:00", {"score": 60.0}),
        ("r2", "1.0.0", "finished", "2026-01-02T00:00:00", {"score": 70.5}),
        ("r3", "1.0.1", "interrupted", "2026-01-03T00:00:00", {"score": 99.0}),
        ("r4", "1.0.1", "finished", "2026-01-04T00:00:00", {"cases": 3}),
    ]
    with store.transaction() as db:
        for rid, version, status, at, summary in rows:
            db.execute(
                "INSERT INTO runs (id, prompt_id, version, status, started_at, finished_at, summary) "
                "VALUES (?, 'support', ?, ?, ?, ?, ?)", (rid, version, status, at, at, json.dumps(summary)),
            )
    assert store.latest_scores("support") == {"1.0.0": 70.5}


def test_versions_survive_reopening(tmp_path: Path):
    path = tmp_path / "c.db"
    with Store.open(path) as s:
        s.save_version(make("a"))
        s.rollback("support", "1.0.0")
    with Store.open(path) as s:
        assert s.resolve("support@head").prompt == make("a")
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_open_without_create_refuses_a_missing_store(tmp_path: Path):
    with pytest.raises(NotFoundError, match="no cycle store"):
        Store.open(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()


def test_a_cycle_is_named_by_a_unique_part_of_its_id(store: Store):
    for cycle_id in ("c-20261128-083621-302e6d", "c-20261128-090000-aa11bb",
                     "c-20261128-090000-cc22dd"):
        store.cycles.create(cycle_id=cycle_id, prompt_id="support", initial_version="1.0.0",
                            config={})
    assert store.cycles.resolve("302e6d") == "c-20261128-083621-302e6d"
    assert store.cycles.resolve("c-20261128-0836") == "c-20261128-083621-302e6d"
    with pytest.raises(NotFoundError, match="matches several cycles: c-20261128-090000-"):
        store.cycles.resolve("c-20261128-0900")
    with pytest.raises(NotFoundError, match="no cycle '1_%'") as e:
        store.cycles.resolve("1_%")  # LIKE's wildcards are the id's own characters
    assert "Recent cycles: " in str(e.value)
