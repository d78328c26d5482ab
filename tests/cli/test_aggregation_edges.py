"""A run's figures at the edges, through `cycle run --json`: a score exactly at the pass
threshold, and a case whose every iteration errored."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing.server import Fault
from tests.stored import loopback_project

CHECKS = ("[" + ", ".join(f"{{id: c{i}, weight: 0.1, check: {{type: contains, values: [echo]}}}}"
                          for i in range(3)) + "]")


def test_a_score_equal_to_the_threshold_passes(tmp_path, server, monkeypatch):
    """Three passing checks weighted 0.1 summed to 99.99999999999999: shown as 100.0, and
    failed against pass_threshold 100."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    config = loopback_project(tmp_path / "p", server.openai_base_url, cases="ab",
                              criteria=CHECKS, extra="pass_threshold: 100\n")
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", str(config),
                                 "--json", "--no-reports", "--no-cache", "-n", "1"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["summary"]["score"] == 100.0 and data["summary"]["pass_rate"] == 1.0
    assert {c["status"] for c in data["cases"]} == {"passed"}


def test_a_case_whose_every_iteration_errored_has_no_score_not_0(tmp_path, server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    config = loopback_project(tmp_path / "p", server.openai_base_url, cases="ab",
                              criteria=CHECKS)
    server.responder = lambda request: Fault.status(400) if request.last_user == "b" else None
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", str(config),
                                 "--json", "--no-reports", "--no-cache", "-n", "2"])
    assert r.exit_code == 3, r.output  # errors, kept apart
    data = json.loads(r.stdout)
    b = next(c for c in data["cases"] if c["id"] == "b")
    assert b["status"] == "error" and b["mean"] is None and b["pass_rate"] is None
    assert data["summary"]["score"] == 100.0  # a's alone: b is not a 0 in the mean
    assert data["summary"]["pass_rate"] == 1.0


def test_a_check_returning_nan_is_an_error_not_full_marks(tmp_path, server, monkeypatch):
    """min(100, nan) is 100: a python check's 0/0 passed the case with a score of 100."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    config = loopback_project(
        tmp_path / "p", server.openai_base_url, cases="ab",
        criteria="[{id: share, check: {type: python, function: "
                 "'tests.cli.odd_checks:ratio_of_nothing'}}, {id: over, check: {type: python, "
                 "function: 'tests.cli.odd_checks:overflowing'}}]")
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", str(config),
                                 "--json", "--no-reports", "--no-cache", "-n", "1"])
    assert r.exit_code == 3, r.output
    data = json.loads(r.stdout)
    assert {c["status"] for c in data["cases"]} == {"error"}
    assert data["summary"]["score"] is None and data["summary"]["pass_rate"] is None
    assert "NaN" not in r.stdout


def test_a_check_outcome_over_100_is_cut_to_the_scale(tmp_path, server, monkeypatch):
    """A CheckOutcome(250) was taken as is: a case scored 250 on a 0-100 scale."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    config = loopback_project(
        tmp_path / "p", server.openai_base_url, cases="a",
        criteria="[{id: over, check: {type: python, function: 'tests.cli.odd_checks:overflowing'}}]")
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", str(config),
                                 "--json", "--no-reports", "--no-cache", "-n", "1"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["summary"]["score"] == 100.0


def test_errored_cases_are_in_sight_beside_a_pass_rate(tmp_path, server, monkeypatch):
    """3 of 4 cases errored, 1 passed: the summary said "pass rate 100%" and `cycle runs`
    "100%" over "4" cases, the errors out of sight."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    config = loopback_project(tmp_path / "p", server.openai_base_url, cases="abcd",
                              criteria=CHECKS)
    server.responder = lambda request: None if request.last_user == "a" else Fault.status(400)
    store = ["--store", str(tmp_path / "s.db")]
    r = CliRunner().invoke(cli, [*store, "run", str(config), "--no-reports", "--no-cache",
                                 "-n", "1"])
    assert r.exit_code == 3, r.output
    assert "1 passed, 0 failed, 3 errored   pass rate 100% of 1 judged case   " in r.output
    listed = CliRunner().invoke(cli, [*store, "runs"]).output
    assert "100%  4 (3 errored)" in listed, listed
