"""`cycle compare --fail-on ...` where the gate cannot check: nothing paired, one paired case,
a case scored in A that errored in B, a run not finished. Each passed the CI gate (exit 0,
"**Passes the gate**") before; each now fails it saying why, with exit 3 ("errors prevented
judging"), not a regression's 1, so that CI tells them apart; the console says what was left
out."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing.server import Fault
from tests.cli.test_ci_gate import ASKS
from tests.stored import copied, loopback_project


def _runs(tmp_path: Path, *runs: tuple[str, ...], asks: tuple[bool, ...] = ()) -> tuple[list[str], list[str]]:
    """Offline quickstart runs with these extra arguments (``asks``: whose prompt asks for
    what the criteria check); the store's arguments and the run ids."""
    project = copied("quickstart", tmp_path)
    prompt = project / "prompts" / "support-reply.yaml"
    plain = prompt.read_text()
    store = ["--store", str(tmp_path / "s.db")]
    ids = []
    for i, args in enumerate(runs):
        prompt.write_text(plain.replace("Answer the customer's question.",
                                        f"Answer the customer's question. {ASKS}")
                          if i < len(asks) and asks[i] else plain)
        r = CliRunner().invoke(cli, [*store, "run", str(project / "cycle.yaml"), "--json",
                                     "--no-reports", *args])
        assert r.exit_code in (0, 1), r.output
        ids.append(json.loads(r.stdout)["run_id"])
    return store, ids


def test_runs_with_no_case_in_common_do_not_pass_the_gate(tmp_path):
    store, ids = _runs(tmp_path, ("--case", "late-delivery", "-n", "1"),
                       ("--case", "damaged-item", "-n", "1"))
    comment = tmp_path / "c.md"
    for fail_on in ("regression", "case"):
        r = CliRunner().invoke(cli, [*store, "compare", *ids, "--fail-on", fail_on,
                                     "--markdown", str(comment)])
        assert r.exit_code == 3, r.output
        assert ("gate: cannot check (exit 3, not a regression): no case has a score in both "
                "runs") in r.output
        assert "**Fails the gate**: cannot check (exit 3, not a regression)" in comment.read_text()
    r = CliRunner().invoke(cli, [*store, "compare", *ids, "--fail-on", "never"])
    assert r.exit_code == 0 and "Not paired: 1 only in A, 1 only in B" in r.output


def test_a_drop_on_the_only_paired_case_does_not_pass_the_gate(tmp_path):
    one = ("--case", "late-delivery", "-n", "1")
    store, ids = _runs(tmp_path, one, one, asks=(True, False))
    r = CliRunner().invoke(cli, [*store, "compare", *ids, "--fail-on", "regression"])
    assert r.exit_code == 3, r.output
    assert "on the only paired case, and one case gives no interval" in r.output
    # the other way round it gained: nothing to fear from one case
    r = CliRunner().invoke(cli, [*store, "compare", ids[1], ids[0], "--fail-on", "regression"])
    assert r.exit_code == 0, r.output


def test_an_interrupted_run_does_not_pass_the_gate_and_is_named(tmp_path):
    store, ids = _runs(tmp_path, ("-n", "1"), ("-n", "1", "-c", "1", "--stop-on-first-failure"))
    r = CliRunner().invoke(cli, [*store, "compare", *ids, "--fail-on", "regression"])
    assert r.exit_code == 3, r.output
    assert "[unfinished] B is interrupted: its figures are partial." in r.output
    assert "gate: cannot check (exit 3, not a regression): B is interrupted" in r.output
    data = json.loads(CliRunner().invoke(cli, [*store, "compare", *ids, "--json"]).stdout)
    assert data["status"] == {"a": "finished", "b": "interrupted"}


def test_runs_of_different_iterations_say_so(tmp_path):
    store, ids = _runs(tmp_path, ("-n", "3"), ("-n", "1"))
    r = CliRunner().invoke(cli, [*store, "compare", *ids, "--fail-on", "regression"])
    assert r.exit_code == 0, r.output  # the same prompt: no change
    assert "[iterations] A ran 3 a case, B 1" in r.output


def test_a_case_that_errored_in_b_is_named_not_scored_0_and_fails_the_gate(tmp_path, server,
                                                                          monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    config = loopback_project(tmp_path / "p", server.openai_base_url, cases="abcd",
                              criteria="[{id: says, check: {type: contains, values: [a]}}]")
    store = ["--store", str(tmp_path / "s.db")]

    def run() -> str:
        r = CliRunner().invoke(cli, [*store, "run", str(config), "--json", "--no-reports",
                                     "--no-cache", "-n", "2"])
        assert r.exit_code in (0, 1, 3), r.output  # 3: some iteration errored
        return json.loads(r.stdout)["run_id"]

    base = run()
    # case d's every call refused in B: an error, not a verdict
    server.responder = lambda request: Fault.status(400) if request.last_user == "d" else None
    head = run()
    r = CliRunner().invoke(cli, [*store, "compare", base, head, "--fail-on", "regression"])
    assert r.exit_code == 3, r.output
    assert "Not compared: 1 case(s) scored in A have no score in B (error): d" in r.output
    assert "over 3 paired cases" in r.output  # d is not a 0 in the delta
    assert "gate: cannot check (exit 3, not a regression): 1 case(s) scored in A" in r.output
    data = json.loads(CliRunner().invoke(cli, [*store, "compare", base, head, "--json"]).stdout)
    assert data["unscored_in_b"] == ["d"] and data["score"]["delta"]["n"] == 3
    assert data["errors"]["b"] == 2


def test_a_paired_interval_stays_inside_what_a_change_can_be(tmp_path, server, monkeypatch):
    """Two cases that swapped 0 and 100: the change's interval was [-1270.6, +1270.6]."""
    from cycle.testing.server import Reply

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    config = loopback_project(tmp_path / "p", server.openai_base_url, cases="ab",
                              criteria="[{id: says, check: {type: contains, values: [sure]}}]")
    store = ["--store", str(tmp_path / "s.db")]
    ids = []
    for good in ("a", "b"):
        server.responder = lambda request, good=good: Reply(
            text="sure" if request.last_user == good else "no")
        r = CliRunner().invoke(cli, [*store, "run", str(config), "--json", "--no-reports",
                                     "--no-cache", "-n", "1"])
        assert r.exit_code in (0, 1), r.output
        ids.append(json.loads(r.stdout)["run_id"])
    r = CliRunner().invoke(cli, [*store, "compare", *ids, "--fail-on", "regression"])
    assert r.exit_code == 0, r.output
    assert "delta +0.0  95% CI [-100.0, +100.0]  over 2 paired cases" in r.output
    delta = json.loads(CliRunner().invoke(cli, [*store, "compare", *ids, "--json"]).stdout)
    assert delta["score"]["delta"]["clipped"] is True
