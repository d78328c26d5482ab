"""Stored runs for tests that read them back (the judge, imports, exports): a project
copied from ``examples/`` and ``cycle run`` through the real CLI."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from cycle.store import Store

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def copied(example: str, folder: Path) -> Path:
    """``examples/<example>`` copied into ``folder`` (no store, no reports): the project."""
    project = folder / example
    shutil.copytree(EXAMPLES / example, project, ignore=shutil.ignore_patterns(".cycle", "reports"))
    return project


def run(store: Path, config: Path, *args: str) -> str:
    """``cycle run CONFIG ARGS`` into ``store`` (no reports, quiet); the new run's id."""
    r = CliRunner().invoke(cli, ["--store", str(store), "run", str(config), "--no-reports",
                                 "-q", *args])
    assert r.exit_code in (0, 1), r.output  # 1: some case failed, as it may
    with Store.open(store) as s:
        return s.runs.recent(limit=1)[0].id


def loopback_project(folder: Path, base_url: str, *, criteria: str, cases: str,
                     concurrency: int = 1, judge: str = "openai:gpt-4o-mini",
                     extra: str = "") -> Path:
    """A project whose agent and judge are ``openai:gpt-4o-mini`` on the loopback server
    at ``base_url``: the prompt ``p`` (system "Help.", the case's ``q`` as the message),
    one case per letter of ``cases`` (``q`` is its id), ``criteria`` as YAML; the config.
    ``judge``: another judge (YAML: a judge panel is a list); ``extra``: more settings."""
    (folder / "prompts").mkdir(parents=True)
    (folder / "cases").mkdir()
    (folder / "prompts" / "p.yaml").write_text("id: p\nsystem: Help.\nuser_template: '{{ q }}'\n")
    (folder / "cases" / "c.yaml").write_text("".join(f"- {{id: {c}, input: {{q: {c}}}}}\n"
                                                     for c in cases))
    config = folder / "cycle.yaml"
    config.write_text(
        f"prompt: prompts/p.yaml\nagent: openai:gpt-4o-mini\njudge: {judge}\n"
        f"criteria: {criteria}\ncases: [cases/*.yaml]\nrun: {{concurrency: {concurrency}}}\n"
        f"providers:\n  openai: {{base_url: '{base_url}'}}\n{extra}")
    return config
