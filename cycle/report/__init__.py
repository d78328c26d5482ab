"""Reports of a run: console summary, Markdown, JSON, JUnit XML, and run comparison."""

from __future__ import annotations

from pathlib import Path

from cycle.records import RunResult
from cycle.report.console import render_console
from cycle.report.json import iter_json, render_json
from cycle.report.junit import iter_junit, render_junit
from cycle.report.markdown import iter_markdown, render_markdown

__all__ = ["render_console", "render_json", "render_junit", "render_markdown", "write_reports"]


def write_reports(result: RunResult, directory: str | Path) -> dict[str, Path]:
    """Write the Markdown, JSON and JUnit reports of a run; returns format -> path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": d / f"{result.run_id}.md", "json": d / f"{result.run_id}.json",
             "junit": d / f"{result.run_id}.junit.xml"}
    for kind, pieces in (("markdown", iter_markdown), ("json", iter_json),
                         ("junit", iter_junit)):
        # streamed: a report of 100,000 cases is never one string in memory
        with open(paths[kind], "w", encoding="utf-8") as out:
            out.writelines(pieces(result))
    return paths
