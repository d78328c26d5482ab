"""Answers of bounded size: a gzip bomb (a small body that inflates to gigabytes) or an
endless answer is stopped at providers.<name>.max_response_mb, after decompression,
with a clear error: no panic, no memory blow-up, nothing read past the limit."""

from __future__ import annotations

import json
import resource

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import Fault, LoopbackServer

PROMPT = """\
id: support
user_template: "{{ question }}"
params: {model: 'openai:gpt-4o-mini'}
"""
CASES = "- id: late\n  input: {question: Where is my parcel?}\n"


@pytest.fixture
def server():
    with LoopbackServer() as srv:
        yield srv


def _project(tmp_path, server, limit: str = "") -> None:
    (tmp_path / "p.yaml").write_text(PROMPT)
    (tmp_path / "cases.yaml").write_text(CASES)
    (tmp_path / "cycle.yaml").write_text(
        "prompt: p.yaml\ncases: [cases.yaml]\nrun: {iterations: 1}\n"
        "criteria: [{id: a, check: {type: contains, values: [x]}}]\n"
        f"providers:\n  openai: {{base_url: '{server.openai_base_url}'{limit}}}\n")


def test_a_gzip_bomb_is_stopped_at_the_limit_with_a_clear_error(tmp_path, server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    _project(tmp_path, server, ", max_response_mb: 8")
    server.enqueue(Fault.bomb(512))  # 512 MB of zeros, half a megabyte on the wire
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                 str(tmp_path / "cycle.yaml"), "--no-cache"])
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert r.exit_code == 3, r.output  # the iteration is an error: the run says so
    report = json.loads(max((tmp_path / "reports").glob("*.json")).read_text())
    error = report["cases"][0]["results"][0]["error"]
    assert "answered more than 8 MB once inflated" in error, error
    assert "max_response_mb" in error
    assert grown_mb < 200  # it never held the 512 MB


def test_an_answer_under_the_limit_is_read_as_it_is(tmp_path, server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    _project(tmp_path, server)
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                 str(tmp_path / "cycle.yaml"), "--no-cache"])
    assert r.exit_code in (0, 1), r.output
    assert server.requests[0].headers.get("accept-encoding") == "gzip, deflate"


def test_a_gzip_bomb_from_a_gemini_endpoint_is_stopped_too(tmp_path, server, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-test-0123456789")
    (tmp_path / "p.yaml").write_text(PROMPT.replace("openai:gpt-4o-mini", "gemini:gemini-2.0-flash"))
    (tmp_path / "cases.yaml").write_text(CASES)
    (tmp_path / "cycle.yaml").write_text(
        "prompt: p.yaml\ncases: [cases.yaml]\nrun: {iterations: 1}\n"
        "criteria: [{id: a, check: {type: contains, values: [x]}}]\n"
        f"providers:\n  gemini: {{base_url: '{server.gemini_base_url}', max_response_mb: 8}}\n")
    server.enqueue(Fault.bomb(256))
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run",
                                 str(tmp_path / "cycle.yaml"), "--no-cache"])
    assert r.exit_code == 3, r.output
    report = json.loads(max((tmp_path / "reports").glob("*.json")).read_text())
    assert "answered more than 8 MB once inflated" in report["cases"][0]["results"][0]["error"]
