"""Protected labels in the store (cycle.store.protection): which protection covers a label,
what a protected head does to saving, and that nothing moves when a move is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cycle.assemble.config import load_config, load_prompt
from cycle.errors import ProtectedLabelError
from cycle.records import IMPROVER_PROMPT_ID, Prompt
from cycle.store import Store


@pytest.fixture
def store(store_target):
    """On each backend (a team's store is where protection matters most)."""
    s = Store.open(store_target)
    s.save_version(Prompt(id="support", system="You help."), author="ann")
    s.save_version(Prompt(id="support", system="You help. Be brief."), author="ann")
    yield s
    s.close()


def test_a_prompts_own_protection_takes_the_place_of_the_one_of_every_prompt(store: Store):
    store.protections.protect("production", allowed=("ann",), by="ann")
    store.protections.protect("production", prompt_id="support", allowed=("bob",), by="ann")
    assert store.protection("support", "production").allowed == ("bob",)
    store.set_label("support", "production", "1.0.0", who="bob")
    with pytest.raises(ProtectedLabelError):
        store.set_label("support", "production", "1.0.1", who="ann")
    # the list for a prompt shows what covers it: its own protection only
    assert [(p.prompt_id, p.allowed) for p in store.protections.all("support")] == [
        ("support", ("bob",))]


def test_every_prompt_means_the_users_not_cycles_own(store: Store):
    store.protections.protect("head", by="ann")
    assert store.protection("support", "head") is not None
    assert store.protection(IMPROVER_PROMPT_ID, "head") is None  # upgrades move its head


def test_a_refused_move_moves_nothing_and_a_move_to_where_it_is_is_no_move(store: Store):
    store.set_label("support", "production", "1.0.0", who="ann")
    store.protections.protect("production", by="ann")  # nobody without --force
    before = store.count_label_moves("support")
    with pytest.raises(ProtectedLabelError) as e:
        store.rollback("support", "1.0.1", label="production", who="ann")
    assert "Nobody may move it without --force" in str(e.value)
    assert store.count_label_moves("support") == before
    assert store.set_label("support", "production", "1.0.0", who="bob") is None  # already there
    move = store.set_label("support", "production", "1.0.1", who="bob", force=True)
    assert move is not None and move.forced and move.who == "bob"
    assert store.label_moves("support", label="production", limit=1)[0].forced


def test_a_protected_head_is_kept_by_saves_unless_allowed_or_forced(store: Store):
    store.protections.protect("head", prompt_id="support", allowed=("ann",), by="ann")
    with pytest.raises(ProtectedLabelError):
        store.save_version(Prompt(id="support", system="v3"), author="bob")
    assert store.count_versions("support") == 2  # refused whole: no version without its move
    v3 = store.save_version(Prompt(id="support", system="v3"), author="bob", move_head=False)
    assert store.labels("support")["head"] == "1.0.1" and v3.author == "bob"
    v4 = store.save_version(Prompt(id="support", system="v4"), author="ann")
    assert store.labels("support")["head"] == v4.version
    # a new prompt still gets its head, whatever protects head of every prompt
    store.protections.protect("head", by="ann")
    first = store.save_version(Prompt(id="greeter", system="Hi."), author="bob")
    assert store.labels("greeter")["head"] == first.version


def test_a_run_of_an_edited_prompt_file_leaves_a_protected_head(tmp_path: Path, store: Store):
    """`cycle run` stores the file's content as a version and evaluates it; head stays."""
    (tmp_path / "p.yaml").write_text(json.dumps({"id": "support", "system": "Edited."}))
    (tmp_path / "cycle.yaml").write_text(json.dumps({
        "prompt": "p.yaml", "agent": "offline:default", "cases": [],
        "criteria": [{"id": "ok", "rubric": "Helpful."}]}))
    store.protections.protect("head", prompt_id="support", by="ann")
    prompt, version = load_prompt(load_config(tmp_path / "cycle.yaml"), store)
    assert prompt.system == "Edited." and version == "1.0.2"
    assert store.labels("support")["head"] == "1.0.1"
