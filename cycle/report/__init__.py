"""Reports of a run: console summary, Markdown, JSON, JUnit XML, and run comparison."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from cycle.errors import ConfigError, ReportError
from cycle.records import RunResult
from cycle.report.console import render_console
from cycle.report.json import iter_json, render_json
from cycle.report.junit import iter_junit, render_junit
from cycle.report.markdown import iter_markdown, render_markdown

__all__ = ["RUN_REPORTS", "ReportFormat", "render_console", "render_json", "render_junit",
           "render_markdown", "report_formats", "write_reports"]


class ReportFormat(NamedTuple):
    """A report a run writes: its file's suffix (after the run id) and its text, in pieces."""

    suffix: str
    pieces: Callable[[RunResult], Iterable[str]]


def _html(result: RunResult) -> Iterable[str]:
    from cycle.report.run_html import iter_run_html  # its page helpers load only when asked

    return iter_run_html(result)


#: the reports of a run, by the name ``reports.formats`` gives them: a new format is one
#: entry here (``RUN_REPORTS["csv"] = ReportFormat(".csv", iter_csv)``)
RUN_REPORTS: dict[str, ReportFormat] = {
    "markdown": ReportFormat(".md", iter_markdown),
    "json": ReportFormat(".json", iter_json),
    "junit": ReportFormat(".junit.xml", iter_junit),
    "html": ReportFormat(".html", _html),
}


def report_formats(names: Sequence[str] | None, *, file: str | None = None,
                   line: int | None = None) -> list[str]:
    """The formats to write, in the registry's order: all of them when ``names`` is None;
    an unknown name is a ConfigError naming ``reports.formats`` (in ``file`` at ``line``)
    and the known ones."""
    every = list(RUN_REPORTS)
    if names is None:
        return every
    unknown = [n for n in names if n not in every]
    if unknown:
        raise ConfigError(f"unknown report format {unknown[0]!r}", file=file, line=line,
                          field="reports.formats", hint=f"Known formats: {', '.join(every)}.")
    return [n for n in every if n in names]


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


def write_reports(result: RunResult, directory: str | Path,
                  formats: Sequence[str] | None = None) -> dict[str, Path]:
    """Write a run's reports (``formats``: names of ``RUN_REPORTS``; all by default);
    returns format -> path."""
    d = Path(directory)
    chosen = {name: RUN_REPORTS[name] for name in report_formats(formats)}
    paths = {name: d / f"{result.run_id}{f.suffix}" for name, f in chosen.items()}
    write_files(d, {paths[name]: (lambda f=f: f.pieces(result)) for name, f in chosen.items()},
                what=f"run {result.run_id}", again=f"cycle report {result.run_id}")
    return paths
