"""The Markdown report: a summary table, failed cases expanded, passed cases collapsed."""

from __future__ import annotations

from collections.abc import Iterable

from cycle.records import CaseStats, IterationResult, RunResult
from cycle.records.transcript import has_behaviour, transcript_lines
from cycle.report import format as f
from cycle.report.json import OFFLINE_NOTE
from cycle.report.parts import Parts, pieces
from cycle.words import plural


def _cell(text: str) -> str:
    return f.md_inline(text)


def _verdicts(r: IterationResult) -> list[str]:
    lines = ["| criterion | kind | score | weight | result | reasoning |",
             "| --- | --- | ---: | ---: | --- | --- |"]
    for v in r.verdicts:
        mark = "pass" if v.passed else ("**FAIL (required)**" if v.required else "fail")
        lines.append(f"| {_cell(v.criterion_id)}{' (required)' if v.required else ''} | {v.kind} | "
                     f"{v.score:.0f} | {v.weight:g} | {mark} | {_cell(v.reasoning)} |")
    return lines


def _case_body(c: CaseStats, result: RunResult) -> list[str]:
    info = result.case_info.get(c.case_id, {})
    runs = result.results_of(c.case_id)
    out: list[str] = []
    if info.get("description"):
        out += [info["description"], ""]
    out.append(f"Mean {f.score_ci(c.stats)} (sd {f.score(c.stats.sd)}, min {f.score(c.stats.min)}, "
               f"max {f.score(c.stats.max)}), pass rate {f.pct(c.pass_rate)}, "
               f"{c.errors} errored of {c.iterations} iterations"
               + (f", {c.terminated} ended by a limit" if c.terminated else "")
               + (f"; turns {c.turns.mean:.1f} (min {c.turns.min:g}, max {c.turns.max:g})"
                  if c.turns and c.turns.mean is not None else "") + ".")
    out.append("")
    if runs and runs[0].input is not None:
        out += ["**Input**", "", *f.fenced(_input_text(runs[0].input)), ""]
    rep = c.representative
    if rep is not None:
        out += [(f"**Output** (iteration {rep.iteration}, the one closest to the mean: "
                f"{f.score(rep.score)})"), "", *f.fenced(rep.output.strip()), ""]
        if info.get("expected") is not None:
            out += ["**Expected**", "", *f.fenced(str(info["expected"]).strip()), ""]
        out += _verdicts(rep) + [""]
    if rep is not None and has_behaviour(rep.trace):
        turns = sum(1 for e in rep.trace if e.kind == "model")
        tools = sum(1 for e in rep.trace if e.kind in ("tool_result", "tool_error"))
        summary = (f"<summary>Transcript (iteration {rep.iteration}: "
                   f"{plural(turns, 'model turn')}, {plural(tools, 'tool call')})</summary>")
        out += ["<details>", summary, "",
                *f.fenced("\n".join(transcript_lines(rep.trace, for_people=True))), "",
                "</details>", ""]
    errors = [r for r in runs if r.status in ("error", "terminated")]
    if errors:
        out += ["**Errors and limits**", ""] + [
            f"- iteration {r.iteration}: {_cell(r.error or '')}" for r in errors] + [""]
    return out


def _panel(result: RunResult) -> list[str]:
    """The judge panel's section: its members' agreement and means, then (with labels) each
    member's and the panel's agreement with people; nothing for a single judge."""
    if not result.panel:
        return []
    members = [m.model for m in result.panel[0].members]
    out = ["## Judge panel", "", f.PANEL_TITLE + ".", "",
           "| criterion | outputs | members' alpha (95% CI) | "
           + " | ".join(f"{_cell(m)} mean" for m in members) + " |",
           "| --- | ---: | --- | " + " | ".join("---:" for _ in members) + " |"]
    for p in result.panel:
        out.append(f"| {_cell(p.criterion)} | {p.outputs} | {f.figure(p.alpha, p.alpha_ci)} | "
                   + " | ".join(f.score(m.mean) for m in p.members) + " |")
    out.append("")
    labelled = [p for p in result.panel if p.people is not None]
    if labelled:
        out += ["Agreement with people's labels (of every run this panel judged):", "",
                "| criterion | judge | labels | kappa (95% CI) | bias, points |",
                "| --- | --- | ---: | --- | ---: |"]
        for p in labelled:
            for who, w in (("panel", p.people), *((m.model, m.people) for m in p.members)):
                out.append(f"| {_cell(p.criterion)} | {_cell(who)} | "
                           f"{w.labels if w else 0} | {f.figure(w.kappa, w.kappa_ci) if w else '—'} "
                           f"| {f.signed(w.bias) if w else '—'} |")
        out.append("")
    return out


def _input_text(value: object) -> str:
    if isinstance(value, dict):
        return "\n".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


def _head_lines(result: RunResult) -> list[str]:
    s = result.suite
    title = f"{result.prompt_id}@{result.version}" if result.prompt_id else result.run_id
    lines = [f"# Evaluation: {title}", ""]
    if result.offline:
        lines += [(f"> **Offline model.** {OFFLINE_NOTE[len('offline model: '):].capitalize()}; "
                  "they show how cycle works, not how good the prompt is."), ""]
    if result.status != "finished":
        lines += [f"> **Run {result.status}.** {result.stop_reason or ''}".rstrip(), ""]
    usage_rows = []
    for role in sorted(s.usage):
        u = s.usage[role]
        # a charged attempt asked again is paid (in the cost) but not a call: said apart
        calls = (f"{u.calls} (+{plural(u.retried_charged, 'retried attempt')} charged)"
                 if u.retried_charged else str(u.calls))
        usage_rows.append(f"| {role} | {calls} | {f.tokens(u.input_tokens)} | "
                          f"{f.tokens(u.output_tokens)} | {f.money(u.cost, u.cost_estimated)} |")
    lines += [
        "| | |", "| --- | --- |",
        f"| Run | `{result.run_id}` ({result.status}) |",
        f"| Agent | {result.agent_model or '—'} |",
        f"| Judge | {result.judge_model or '—'} (judge prompt {result.judge_version or '—'}) |",
        *([f"| Judge's agreement | {result.judge_note} |"] if result.judge_note else []),
        f"| Score | **{f.score(s.score.mean)}** (95% CI {f.interval(s.score)}) |",
        f"| Pass threshold | {result.threshold:g} |",
        f"| Cases | {s.cases_line} |",
        f"| Pass rate | {f.pct(s.pass_rate)} |",
        f"| Iterations | {s.iterations} ({s.errors} errored"
        + (f", {s.terminated} ended by a limit" if s.terminated else "") + ") |",
        (f"| Latency p50 / p90 / p99 | {f.seconds(s.latency_p50)} / {f.seconds(s.latency_p90)} / "
        f"{f.seconds(s.latency_p99)} |"),
        f"| Cost | {f.money(s.cost, s.cost_estimated)} |",
        f"| Response cache | {plural(s.cache_hits, 'call')} served from cache |",
        "",
    ]
    if usage_rows:
        lines += ["| role | calls | input tokens | output tokens | cost |",
                  "| --- | ---: | ---: | ---: | ---: |", *usage_rows, ""]
    lines += _panel(result)
    lines += ["## Cases", "", "| case | status | mean ± 95% CI | sd | pass rate | errors |",
              "| --- | --- | ---: | ---: | ---: | ---: |"]
    return lines


class Lines:
    """Markdown lines as text: a run of blank lines is written only once a line follows
    it (the report ends on its last line). Lines written in parts, each part carrying on
    from the one before (``blanks``), give the text of the same lines written at once."""

    def __init__(self, blanks: int = 0) -> None:
        #: blank lines seen and not written yet
        self.blanks = blanks

    def text(self, lines: Iterable[str]) -> str:
        out = []
        for line in lines:
            if not line.strip():
                self.blanks += 1
                continue
            out.append("\n" * self.blanks + line + "\n")
            self.blanks = 0
        return "".join(out)


#: the report's streams: the cases table's rows, the failed (errored, ended) cases, the
#: passed ones; each case is in the first and in one of the others
ROWS, FAILED, PASSED = range(3)
#: the titles of the sections of the failed and passed cases (each followed by a blank line)
_TITLES = {FAILED: "## Failed and errored cases", PASSED: "## Passed cases"}


class MarkdownParts(Parts):
    """The Markdown report's parts: a summary table, the cases' table, failed cases
    expanded, passed cases collapsed."""

    streams = 3

    def __init__(self) -> None:
        # a section's title (before()) is followed by a blank line
        self._lines = {ROWS: Lines(), FAILED: Lines(1), PASSED: Lines(1)}
        self._head_blanks = 0
        self._last: int | None = None  # the stream written last
        # written whole, the first pass notes which cases passed, so that each later
        # one builds only its own cases' statistics
        self._noted: dict[int, list[str]] = {FAILED: [], PASSED: []}

    def head(self, result: RunResult) -> str:
        lines = Lines()
        text = lines.text(_head_lines(result))
        self._head_blanks = lines.blanks
        return text

    def case(self, stream: int, n: int, c: CaseStats, result: RunResult) -> str:
        lines = self._lines[stream]
        if stream == ROWS:
            row = (f"| {_cell(c.name)} ({f.md_code(c.case_id, cell=True)}) | {c.status} | {f.score_ci(c.stats)} | "
                   f"{f.score(c.stats.sd)} | {f.pct(c.pass_rate)} | {c.errors} |")
            return lines.text([row])
        if (stream == PASSED) != (c.status == "passed"):
            return ""
        if stream == FAILED:
            body = [f"### {c.status.upper()}: {_cell(c.name)} ({f.md_code(c.case_id)})", "",
                    *_case_body(c, result)]
        else:
            body = ["<details>", (f"<summary>{f.html_inline(c.name)} (<code>{f.html_inline(c.case_id)}</code>): "
                    f"{f.score_ci(c.stats)}</summary>"), "", *_case_body(c, result),
                    "</details>", ""]
        return lines.text(body)

    def before(self, stream: int) -> str:
        # the blank lines the stream before left (the cases' table ends with one), then
        # the section's title
        last = self._last
        blanks = self._head_blanks if last is None else \
            self._lines[last].blanks + (last == ROWS)
        self._last = stream
        return "\n" * blanks + (_TITLES[stream] + "\n" if stream in _TITLES else "")

    def tail(self, result: RunResult) -> str:
        return ""

    def cases(self, stream: int, result: RunResult) -> Iterable[tuple[int, CaseStats]]:
        if stream == ROWS:
            for n, c in enumerate(result.cases.values()):
                self._noted[PASSED if c.status == "passed" else FAILED].append(c.case_id)
                yield n, c
        else:
            for case_id in self._noted[stream]:
                yield 0, result.cases[case_id]


def markdown_parts() -> Parts:
    """The Markdown report's parts (a case at a time; no blank lines at the end). Written
    whole, the cases are read three times rather than held: a run of any size is written
    in the memory of one case (CaseStats are built from the run's figures as they are
    read)."""
    return MarkdownParts()


def render_markdown(result: RunResult) -> str:
    return "".join(pieces(markdown_parts(), result))
