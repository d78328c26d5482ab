"""Reports of a run: console summary, Markdown, JSON, JUnit XML, and run comparison."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple, TextIO

from msgspec.structs import replace

from cycle.errors import ConfigError, ReportError
from cycle.evals.results import CaseTable
from cycle.records import RunResult
from cycle.report.ahead import ReportsAhead
from cycle.report.console import render_console
from cycle.report.json import json_parts, render_json
from cycle.report.junit import junit_parts, render_junit
from cycle.report.markdown import markdown_parts, render_markdown
from cycle.report.parts import Parts, pieces
from cycle.store.runs import SharedReader, StoredResults

__all__ = ["RUN_REPORTS", "ReportFormat", "render_console", "render_json", "render_junit",
           "render_markdown", "report_formats", "reports_ahead", "write_reports"]


class ReportFormat(NamedTuple):
    """A report a run writes: its file's suffix (after the run id) and its parts (a new
    one for each file written)."""

    suffix: str
    parts: Callable[[], Parts]

    def pieces(self, result: RunResult) -> Iterable[str]:
        """The whole report's text, in pieces."""
        return pieces(self.parts(), result)


def _html() -> Parts:
    from cycle.report.run_html import html_parts  # its page helpers load only when asked

    return html_parts()


#: the reports of a run, by the name ``reports.formats`` gives them: a new format is one
#: entry here (``RUN_REPORTS["csv"] = ReportFormat(".csv", csv_parts)``)
RUN_REPORTS: dict[str, ReportFormat] = {
    "markdown": ReportFormat(".md", markdown_parts),
    "json": ReportFormat(".json", json_parts),
    "junit": ReportFormat(".junit.xml", junit_parts),
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
                what: str, again: str,
                side_by_side: dict[Path, SharedReader] | None = None) -> None:
    """Write each file from its pieces beside its name, renamed into place when whole: a
    disk that fills up meanwhile never leaves a file cut short. A failure raises a
    ``ReportError`` naming ``what`` and the command that writes them ``again``. With
    ``side_by_side`` (each file's reader of one ``SharedReads``) the files are written
    together, in turns (``_side_by_side``)."""
    parts: list[Path] = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if side_by_side is not None:
            parts = [path.with_name(path.name + ".part") for path in files]
            with contextlib.ExitStack() as stack:
                outs = [stack.enter_context(open(part, "w", encoding="utf-8"))
                        for part in parts]
                _side_by_side([
                    (out, iter(pieces()), side_by_side[path])
                    for out, (path, pieces) in zip(outs, files.items(), strict=True)])
            for part, path in zip(parts, files, strict=True):
                os.replace(part, path)
            parts = []
            return
        for path, pieces in files.items():
            parts = [path.with_name(path.name + ".part")]
            # streamed: a report of 100,000 cases is never one string in memory
            with open(parts[0], "w", encoding="utf-8") as out:
                out.writelines(pieces())
            os.replace(parts[0], path)
            parts = []
    except OSError as e:
        for part in parts:
            part.unlink(missing_ok=True)
        flag = "" if directory == Path("reports") else f" --report-dir {directory}"
        raise ReportError(
            f"the reports of {what} could not be written in {directory}: "
            f"{e.strerror or e}; the {what.split()[0]} itself is stored",
            hint=f"Free some space (or fix the folder), then: {again}{flag}") from None


def _side_by_side(files: list[tuple[TextIO, Iterator[str], SharedReader]]) -> None:
    """Write the files in turns: each as far as its reader stays within the read the
    slowest has reached (the frontier) and one past it; then the frontier moves on (the
    reads behind it are let go as the next is read). Every read serves every file, and at
    most a few reads are held whatever the run's size."""
    frontier = 0
    going = list(files)
    while going:
        for entry in list(going):
            out, pieces, reader = entry
            while reader.read <= frontier:
                piece = next(pieces, None)
                if piece is None:
                    reader.done = True
                    going.remove(entry)
                    break
                out.write(piece)
        if going:
            frontier = min(reader.read for _, _, reader in going)


def reports_ahead(directory: str | Path, formats: Sequence[str] | None = None) -> ReportsAhead:
    """The reports ``formats`` of a run to write while it runs (``Runner.run``'s
    ``ahead``), then with ``write_reports``."""
    return ReportsAhead(Path(directory), report_formats(formats),
                        {name: f.parts for name, f in RUN_REPORTS.items()})


def write_reports(result: RunResult, directory: str | Path,
                  formats: Sequence[str] | None = None, *,
                  ahead: ReportsAhead | None = None) -> dict[str, Path]:
    """Write a run's reports (``formats``: names of ``RUN_REPORTS``; all by default);
    returns format -> path. Written ``ahead`` while the run ran, they are finished from
    that; else a stored run's reports are written together, its results read once for
    all of them."""
    d = Path(directory)
    chosen = {name: RUN_REPORTS[name] for name in report_formats(formats)}
    paths = {name: d / f"{result.run_id}{f.suffix}" for name, f in chosen.items()}
    if ahead is not None and ahead.ready(result, d, list(chosen)):
        try:
            write_files(d, {paths[name]: (lambda name=name: ahead.pieces(name, result))
                            for name in chosen},
                        what=f"run {result.run_id}", again=f"cycle report {result.run_id}")
        finally:
            ahead.close()
        return paths
    readers: dict[Path, SharedReader] | None = None
    runs = {name: result for name in chosen}
    if len(chosen) > 1 and isinstance(result.source, StoredResults) \
            and isinstance(result.cases, CaseTable):
        shared, readers = result.source.shared(), {}
        for name in chosen:
            reader = readers[paths[name]] = shared.reader()
            runs[name] = replace(result, source=reader, cases=result.cases.reading(reader))
    write_files(d, {paths[name]: (lambda f=f, r=runs[name]: f.pieces(r))
                    for name, f in chosen.items()},
                what=f"run {result.run_id}", again=f"cycle report {result.run_id}",
                side_by_side=readers)
    return paths
