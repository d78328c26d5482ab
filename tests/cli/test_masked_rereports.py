"""The CLI's re-reports of what a store holds (`cycle report`, `cycle runs show`,
`cycle runs`, `cycle compare`, `cycle cycles`, `cycle history`) mask it as the TUI does:
a store written before cycle masked the environment's keys, or dropped an endpoint's
credentials from its URL, may hold them raw (written here by SQL, as an older release
did). The store is not rewritten; what is printed and the reports written are masked."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.cli.test_runs_cli import invoke, two_runs

KEY = "sk-live-0a1b2c3d4e5f6a7b8c9d"  # the environment's, in an OPENAI_API_KEY
PASSWORD = "ep-pass-7f7f7f7f"  # an endpoint's, in its URL only (not in the environment)
URL_TOKEN = "qk-0123456789abcdef"


@pytest.fixture
def old_store(tmp_path: Path, monkeypatch) -> tuple[Path, list[str]]:
    """Two stored runs and a cycle whose texts quote a key of today's environment, and a
    run whose agent is an endpoint named with its credentials: what an older cycle wrote."""
    _, ids = two_runs(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    db = sqlite3.connect(tmp_path / "store.db")
    with db:
        db.execute("update results set output = output || ?, error = ?",
                   [f" (my key is {KEY})", f"the server refused {KEY}"])
        db.execute("update verdicts set reasoning = ?", [f"the answer quotes {KEY}"])
        db.execute("update runs set agent_model = ?",
                   [f"http://agent:{PASSWORD}@127.0.0.1:9/chat?api-key={URL_TOKEN}"])
        db.execute("update versions set message = ?", [f"round 1: quote {KEY}"])
        db.execute("insert into cycles (id, prompt_id, status, config, started_at, stop_reason, "
                   "initial_version, total_cost) values ('c-old', 'support', 'failed', '{}', "
                   "'2026-01-01T00:00:00+00:00', ?, '1.0.0', 0)", [f"the improver said {KEY}"])
    db.close()
    return tmp_path, ids


def _leaks(text: str) -> list[str]:
    return [s for s in (KEY, PASSWORD, URL_TOKEN) if s in text]


def _every_report(folder: Path) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in sorted(folder.iterdir()))


def test_report_shows_and_writes_a_stored_run_masked(old_store) -> None:
    root, (_, run) = old_store
    r = invoke(root, "report", run, "--report-dir", str(root / "again"))
    assert r.exit_code == 0, r.output
    written = _every_report(root / "again")
    assert "my key is ***" in written and "the answer quotes ***" in written
    assert not _leaks(r.output) and not _leaks(written)
    r = invoke(root, "report", run, "--no-write", "--json")
    assert r.exit_code == 0, r.output
    assert not _leaks(r.output)


def test_runs_show_prints_a_stored_run_masked(old_store) -> None:
    root, (_, run) = old_store
    for args in (("runs", "show", run), ("runs", "show", run, "--json")):
        r = invoke(root, *args)
        assert r.exit_code == 0, r.output
        assert not _leaks(r.output), args


def test_runs_lists_an_endpoint_without_its_credentials(old_store) -> None:
    root, _ = old_store
    r = invoke(root, "runs", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert rows[0]["agent_model"] == "http://127.0.0.1:9/chat?api-key=***"
    assert not _leaks(r.output)


def test_compare_prints_stored_runs_masked(old_store, tmp_path) -> None:
    root, (a, b) = old_store
    for extra in ((), ("--json",), ("--markdown", str(tmp_path / "cmp.md"))):
        r = invoke(root, "compare", a, b, *extra)
        assert r.exit_code == 0, r.output
        assert not _leaks(r.output), extra
    assert not _leaks((tmp_path / "cmp.md").read_text(encoding="utf-8"))


def test_cycles_and_a_cycles_report_are_masked(old_store) -> None:
    root, _ = old_store
    for args in (("cycles",), ("cycles", "--json"), ("cycles", "c-old"),
                 ("cycles", "c-old", "--json"), ("report", "c-old", "--report-dir",
                                                 str(root / "cycle-reports"))):
        r = invoke(root, *args)
        assert r.exit_code == 0, (args, r.output)
        assert not _leaks(r.output), args
    assert "the improver said ***" in invoke(root, "cycles", "c-old").output
    assert not _leaks(_every_report(root / "cycle-reports"))


def test_history_shows_version_messages_masked(old_store) -> None:
    root, _ = old_store
    for args in (("history", "support"), ("history", "support", "--json")):
        r = invoke(root, *args)
        assert r.exit_code == 0, (args, r.output)
        assert "round 1: quote ***" in r.output and not _leaks(r.output), args


def test_the_store_is_not_rewritten(old_store) -> None:
    root, (_, run) = old_store
    assert invoke(root, "report", run, "--no-write").exit_code == 0
    db = sqlite3.connect(root / "store.db")
    try:
        assert KEY in db.execute("select output from results limit 1").fetchone()[0]
    finally:
        db.close()


def test_a_stored_run_exported_again_is_masked(old_store) -> None:
    root, (_, run) = old_store
    r = invoke(root, "export", "otel", run, "--content", "--out", str(root / "run.otlp.json"))
    assert r.exit_code == 0, r.output
    otlp = (root / "run.otlp.json").read_text(encoding="utf-8")
    assert "***" in otlp and not _leaks(otlp)
    r = invoke(root, "export", "adk", "--run", run, "--out", str(root / "run.evalset.json"))
    assert r.exit_code == 0, r.output
    assert not _leaks((root / "run.evalset.json").read_text(encoding="utf-8"))
