"""The quickstart and the agent-tools example, run and improved through the real openai SDK
against the loopback server behaving as real OpenAI-compatible servers do (llama.cpp's,
one that ignores response_format, one that refuses the tool role): the same scores and the
same cycle as against a server that behaves like OpenAI, for at most one extra call per
server (issue 39)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.llm import compat
from cycle.store import Store
from cycle.testing import LoopbackServer
from cycle.testing.offline.served import offline_world

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def server():
    with LoopbackServer(responder=offline_world) as srv:
        yield srv


def play(server: LoopbackServer, example: str, mode: str | None, root: Path) -> dict:
    """Run then improve ``example`` with every model an ``openai:`` one on the server in
    ``mode``: the run's score and calls, the cycle's versions and scores."""
    compat.forget()
    server.compat = mode
    server.reset()
    project = root / f"{example}-{mode}"
    shutil.copytree(EXAMPLES / example, project, ignore=shutil.ignore_patterns(".cycle", "reports"))
    config = project / "cycle.yaml"
    config.write_text(config.read_text().replace("offline:default", "openai:local-model")
                      + f"\nproviders:\n  openai: {{base_url: '{server.openai_base_url}'}}\n")
    store = ["--store", str(project / "s.db")]
    run = CliRunner().invoke(cli, [*store, "run", str(config), "--no-cache", "--json"])
    assert run.exit_code in (0, 1), run.output
    calls = server.request_count
    improve = CliRunner().invoke(cli, [*store, "improve", str(config), "--no-cache", "--headless",
                                       "--yes", "-q"])
    assert improve.exit_code == 0, improve.output
    with Store.open(project / "s.db") as s:
        cycle = s.cycles.recent(limit=1)[0]
        rounds = [(r.round, r.version, r.score, r.accepted) for r in s.cycles.get_rounds(cycle.id)]
    data = json.loads(run.output)
    assert data["offline"] is False  # through the SDK: the reports do not say offline
    return {"score": data["summary"]["score"], "run calls": calls,
            "cycle calls": server.request_count - calls, "rounds": rounds,
            "final": cycle.final_version}


@pytest.mark.parametrize("example", ["quickstart", "agent-tools"])
def test_every_compatible_server_gives_the_same_results(server, example, tmp_path):
    like_openai = play(server, example, None, tmp_path)
    assert like_openai["score"] is not None and len(like_openai["rounds"]) >= 2
    for mode in ("llamacpp", "text-only", "no-tool-role"):
        got = play(server, example, mode, tmp_path)
        extra = got["run calls"] - like_openai["run calls"]
        # one refused (or ignored) call where the server differs, learned for the process
        needed = 0 if (mode == "no-tool-role" and example == "quickstart") else 1
        assert extra == needed, (mode, got, like_openai)
        assert got["cycle calls"] == like_openai["cycle calls"], mode
        assert (got["score"], got["rounds"], got["final"]) == (
            like_openai["score"], like_openai["rounds"], like_openai["final"]), mode


def test_a_timeout_on_a_slow_server_names_the_latency_and_a_timeout_that_fits(tmp_path):
    """A slow local model: the case's timeout names the calls' measured latency and the
    run.timeout that would fit, instead of blaming the case."""
    project = tmp_path / "slow"
    shutil.copytree(EXAMPLES / "quickstart", project, ignore=shutil.ignore_patterns(".cycle", "reports"))
    config = project / "cycle.yaml"
    with LoopbackServer(responder=offline_world, latency=1.0) as srv:
        config.write_text(config.read_text().replace("offline:default", "openai:local-model")
                          .replace("timeout: 60", "timeout: 1.5").replace("concurrency: 8", "concurrency: 1")
                          + f"\nproviders:\n  openai: {{base_url: '{srv.openai_base_url}'}}\n")
        r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", str(config),
                                     "--no-cache", "--json", "-n", "1", "--case", "late-delivery"])
    report = json.loads(next((project / "reports").glob("*.json")).read_text())
    errors = [x["error"] for c in report["cases"] for x in c["results"] if x["error"]]
    assert errors, r.output
    assert re.match(r"timeout: the case took longer than 1.5 s \(judge\); a model call of "
                    r"this run takes agent 1\.\d s on average: the server is slower than the "
                    r"timeout allows; set run.timeout: 10 ", errors[0]), errors[0]


def test_a_form_learned_by_one_run_is_used_by_the_next_with_the_cache_off(server, tmp_path):
    """llama.cpp's server refuses json_schema: the first run (response cache on) pays one
    refused request to learn the form; the next, a new process with --no-cache, asks in the
    form the store kept and is refused nothing."""
    server.compat = "llamacpp"
    server.reset()
    project = tmp_path / "quickstart"
    shutil.copytree(EXAMPLES / "quickstart", project,
                    ignore=shutil.ignore_patterns(".cycle", "reports"))
    config = project / "cycle.yaml"
    config.write_text(config.read_text().replace("offline:default", "openai:local-model")
                      + f"\nproviders:\n  openai: {{base_url: '{server.openai_base_url}'}}\n")
    store = ["--store", str(project / "s.db")]

    def refused() -> int:
        return sum(1 for r in server.requests
                   if r.body and (r.body.get("response_format") or {}).get("type") == "json_schema")

    for flags, expected in (([], 1), (["--no-cache"], 0)):
        compat.forget()  # a new process: nothing learned in memory
        server.reset()
        run = CliRunner().invoke(cli, [*store, "run", str(config), *flags, "--json"])
        assert run.exit_code in (0, 1), run.output
        assert server.request_count > 0 and refused() == expected, flags
    assert not (project / ".cycle" / "cache.db").exists() or _no_servers(project)


def _no_servers(project: Path) -> bool:
    """The response cache keeps no copy of what the server accepts."""
    import sqlite3

    with sqlite3.connect(project / ".cycle" / "cache.db") as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    return "servers" not in tables
