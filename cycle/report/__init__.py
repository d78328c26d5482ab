"""Reports of a run: console summary, Markdown, JSON, JUnit XML, and run comparison."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from cycle.errors import ReportError
from cycle.records import RunResult
from cycle.report.console import render_console
from cycle.report.json import iter_json, render_json
from cycle.report.junit import iter_junit, render_junit
from cycle.report.markdown import iter_markdown, render_markdown

__all__ = ["render_console", "render_json", "render_junit", "render_markdown", "write_reports"]


def write_files(directory: Path, files: dict[Path, Callable[[], Iterable[str]]], *,
                what: str, again: str) -> None:
    """Write each file from its pieces beside its name, renamed into place when whole: a
    disk that fills up meanwhile never leaves a file cut short. A failure raises a
    ``ReportError`` naming ``what`` and the command that writes them ``again``."""
    part: Path | None = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for path, pieces in files.items():
            part = path.with_name(path.name + ".part")
            # streamed: a report of 100,000 cases is never one string in memory
            with open(part, "w", encoding="utf-8") as out:
                out.writelines(pieces())
            os.replace(part, path)
            part = None
    except OSError as e:
        if part is not None:
            part.unlink(missing_ok=True)
        flag = "" if directory == Path("reports") else f" --report-dir {directory}"
        raise ReportError(
            f"the reports of {what} could not be written in {directory}: "
            f"{e.strerror or e}; the {what.split()[0]} itself is stored",
            hint=f"Free some space (or fix the folder), then: {again}{flag}") from None


def write_reports(result: RunResult, directory: str | Path) -> dict[str, Path]:
    """Write the Markdown, JSON, JUnit and HTML reports of a run; returns format -> path."""
    d = Path(directory)
    from cycle.report.run_html import iter_run_html

    paths = {"markdown": d / f"{result.run_id}.md", "json": d / f"{result.run_id}.json",
             "junit": d / f"{result.run_id}.junit.xml", "html": d / f"{result.run_id}.html"}
    write_files(d, {paths["markdown"]: lambda: iter_markdown(result),
                    paths["json"]: lambda: iter_json(result),
                    paths["junit"]: lambda: iter_junit(result),
                    paths["html"]: lambda: iter_run_html(result)},
                what=f"run {result.run_id}", again=f"cycle report {result.run_id}")
    return paths
