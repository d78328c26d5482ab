"""The HTML report of a run: one file with nothing to fetch, beside the Markdown, JSON
and JUnit ones. Per case the iteration closest to its mean (its output, or the
conversation when the agent did more than answer), each criterion's score and the
judge's reasoning, and what went wrong; a histogram of the case scores on top.

Written with f-strings and ``markupsafe.escape``, not Jinja2: a run loads no template
engine (a quarter of its start-up, tests/cli/test_startup.py), and the page is
streamed a case at a time like the other reports."""

from __future__ import annotations

import json

from markupsafe import Markup

from cycle.records import CaseStats, RunResult
from cycle.records.transcript import has_behaviour, transcript_lines
from cycle.report import format as f
from cycle.report.console import ROLE_NAMES
from cycle.report.json import OFFLINE_NOTE
from cycle.report.page import BASE_CSS, Frame, axes, escape
from cycle.report.parts import Parts, Plain

CSS = Markup("""\
  .chart rect { fill: #4e79a7; } .chart rect.low { fill: #cf222e; }
  details.case { border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px; margin: 8px 0; }
  details.case > summary { cursor: pointer; font-weight: 600; }
  .status { display: inline-block; padding: 0 6px; border-radius: 10px; font-size: 12px;
            border: 1px solid; margin-right: 6px; font-weight: 500; }
  .status.passed { color: #1a7f37; border-color: #1a7f37; }
  .status.failed, .status.error { color: #cf222e; border-color: #cf222e; }
  .status.terminated { color: #9a6700; border-color: #9a6700; }
  td.pass { color: #1a7f37; } td.fail { color: #cf222e; }
  h4 { margin: 12px 0 4px; }
  pre { background: var(--soft); padding: 8px; border-radius: 4px; overflow-x: auto;
        white-space: pre-wrap; word-break: break-word; }
""")


def histogram(means: list[float], threshold: float) -> Markup:
    """How many cases scored in each band of ten (0-9, ... 90-100); the bands below
    ``threshold`` in red."""
    counts = [0] * 10
    for m in means:
        counts[min(int(m // 10), 9)] += 1
    top = max(counts) or 1
    frame = Frame(y_min=0.0, y_max=float(top))
    span = (frame.width - frame.left - frame.right) / 10
    out = [(f'<svg class="chart" id="score-histogram" viewBox="0 0 {frame.width} '
            f'{frame.height}" role="img" aria-label="Cases by score">'),
           *axes(frame, [], sorted({0, top}))]
    for i, n in enumerate(counts):
        x, y = frame.left + i * span, frame.y(n)
        low = " low" if (i + 1) * 10 <= threshold else ""
        out.append(f'<rect class="bar{low}" x="{x + 2:.1f}" y="{y:.1f}" width="{span - 4:.1f}" '
                   f'height="{frame.y(0) - y:.1f}"><title>{n} case(s) scored {i * 10}-'
                   f'{i * 10 + 9 if i < 9 else 100}</title></rect>')
        out.append(f'<text class="tick" x="{x + span / 2:.1f}" y="{frame.height - 10}" '
                   f'text-anchor="middle">{i * 10}</text>')
    out.append("</svg>")
    return Markup("\n".join(out))


def _pre(text: str, cls: str = "") -> str:
    attribute = f' class="{cls}"' if cls else ""
    return f"<pre{attribute}>{escape(text)}</pre>"


def _case(n: int, c: CaseStats, result: RunResult) -> str:
    info = result.case_info.get(c.case_id, {})
    runs = result.results_of(c.case_id)
    rep = c.representative
    name = escape(c.name) + (Markup(f" <code>{escape(c.case_id)}</code>")
                             if c.name != c.case_id else "")
    out = [f'<details class="case" id="case-{n}"{"" if c.status == "passed" else " open"}>',
           (f'<summary><span class="status {escape(c.status)}">{escape(c.status)}</span>{name}'
           f" · {escape(f.score_ci(c.stats))} · pass {f.pct(c.pass_rate)}</summary>")]
    if info.get("description"):
        out.append(f"<p>{escape(info['description'])}</p>")
    first = runs[0].input if runs else None
    if first is not None:
        shown = first if isinstance(first, str) else json.dumps(
            first, indent=2, ensure_ascii=False, default=str)
        out += ["<h4>Input</h4>", _pre(shown)]
    if rep is not None:
        out += [(f'<h4>Output <span class="muted">(iteration {rep.iteration}: '
                f"{escape(f.score(rep.score))})</span></h4>"), _pre(rep.output, "output")]
        if info.get("expected") is not None:
            out += ["<h4>Expected</h4>", _pre(str(info["expected"]))]
        if has_behaviour(rep.trace):
            out += ["<h4>Conversation</h4>",
                    _pre("\n".join(transcript_lines(rep.trace, for_people=True)), "transcript")]
        if rep.verdicts:
            out.append('<table class="verdicts"><thead><tr><th>criterion</th><th>score</th>'
                       "<th>result</th><th>reasoning</th></tr></thead>")
            for v in rep.verdicts:
                ok = "pass" if v.passed else "fail"
                out.append(f"<tr><td>{escape(v.criterion_id)}"
                           f"{' (required)' if v.required else ''}</td>"
                           f'<td class="num">{v.score:.0f}</td><td class="{ok}">{ok}</td>'
                           f"<td>{escape(v.reasoning)}</td></tr>")
            out.append("</table>")
    errors = [r for r in runs if r.status in ("error", "terminated")]
    if errors:
        out.append("<h4>Errors and limits</h4><ul>" + "".join(
            f"<li>iteration {r.iteration}: {escape(r.error or '')}</li>" for r in errors)
            + "</ul>")
    out.append("</details>")
    return "\n".join(out) + "\n"


def _panel(result: RunResult) -> list[str]:
    """The judge panel's tables: its members' agreement and means, then (with labels)
    each member's and the panel's agreement with people; nothing for a single judge."""
    if not result.panel:
        return []
    members = [m.model for m in result.panel[0].members]
    out = ['<h2>Judge panel</h2>', f'<p class="muted">{escape(f.PANEL_TITLE)}.</p>',
           '<table class="panel"><thead><tr><th>criterion</th><th>outputs</th>'
           "<th>members' alpha (95% CI)</th>"
           + "".join(f"<th>{escape(m)} mean</th>" for m in members) + "</tr></thead>"]
    for p in result.panel:
        out.append(f"<tr><td>{escape(p.criterion)}</td><td class=\"num\">{p.outputs}</td>"
                   f"<td>{escape(f.figure(p.alpha, p.alpha_ci))}</td>"
                   + "".join(f'<td class="num">{escape(f.score(m.mean))}</td>'
                             for m in p.members) + "</tr>")
    out.append("</table>")
    labelled = [p for p in result.panel if p.people is not None]
    if labelled:
        out += [('<p class="muted">Agreement with people\'s labels (of every run this panel '
                "judged):</p>"),
                ('<table class="panel-people"><thead><tr><th>criterion</th><th>judge</th>'
                "<th>labels</th><th>kappa (95% CI)</th><th>bias, points</th></tr></thead>")]
        for p in labelled:
            for who, w in (("panel", p.people), *((m.model, m.people) for m in p.members)):
                out.append(f"<tr><td>{escape(p.criterion)}</td><td>{escape(who)}</td>"
                           f'<td class="num">{w.labels if w else 0}</td>'
                           f"<td>{escape(f.figure(w.kappa, w.kappa_ci)) if w else '—'}</td>"
                           f'<td class="num">{escape(f.signed(w.bias)) if w else "—"}</td></tr>')
        out.append("</table>")
    return out


def html_head(result: RunResult) -> str:
    """The page up to its first case: its head, summary and histogram."""
    s = result.suite
    title = f"{result.prompt_id}@{result.version}" if result.prompt_id else "an eval file"
    started, finished = (result.started_at or "")[:19], (result.finished_at or "")[:19]
    when = started.replace("T", " ") + (f" to {finished[11:]}" if finished else "") + (
        " UTC" if started else "")
    roles = ", ".join(f"{escape(ROLE_NAMES.get(k, k))} {f.money(u.cost, u.cost_estimated)}"
                      for k, u in sorted(s.usage.items()))
    judge = escape(result.judge_model or "—") + (
        f" (judge prompt {escape(result.judge_version)})" if result.judge_version else "")
    head = [
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Run {escape(result.run_id)}: {escape(title)}</title>",
        f"<style>\n{BASE_CSS}{CSS}</style>\n</head>\n<body>",
        f"<h1>Run {escape(result.run_id)}</h1>",
        (f'<p class="muted">{escape(title)} · agent {escape(result.agent_model or "—")} · '
        f"judge {judge}{' · ' + escape(when) if when else ''}</p>"),
    ]
    if result.offline:
        head.append(f'<p class="offline"><strong>Offline model:</strong> '
                    f'{escape(OFFLINE_NOTE.split(": ", 1)[-1])}</p>')
    if result.judge_note:
        head.append(f'<p class="muted">{escape(result.judge_note)}</p>')
    if result.status != "finished":
        head.append(f'<p class="offline"><strong>Run {escape(result.status)}.</strong> '
                    f"{escape(result.stop_reason or '')}</p>")
    limits = f", {s.terminated} ended by a limit" if s.terminated else ""
    head += [
        '<h2>Summary</h2>\n<table class="summary">',
        (f"<tr><th>score</th><td><strong>{escape(f.score(s.score.mean))}</strong> "
        f"(95% interval {escape(f.interval(s.score))})</td></tr>"),
        f"<tr><th>pass threshold</th><td>{result.threshold:g}</td></tr>",
        f"<tr><th>cases</th><td>{escape(s.cases_line)}</td></tr>",
        f"<tr><th>pass rate</th><td>{f.pct(s.pass_rate)}</td></tr>",
        f"<tr><th>iterations</th><td>{s.iterations} ({s.errors} errored{limits})</td></tr>",
        (f"<tr><th>cost</th><td>{f.money(s.cost, s.cost_estimated)}"
        f"{f' ({roles})' if roles else ''}</td></tr>"),
        "</table>",
        *_panel(result),
        "<h2>Case scores</h2>",
        ('<p class="muted">How many cases scored in each band of ten (red: below the pass '
        "threshold).</p>"),
        # the judged cases' means, in the cases' order: the run's figures hold them, so
        # no pass builds every case's statistics for them (2,000 cases: about 30 ms)
        histogram(list(result.case_means.values()), result.threshold),
        "<h2>Cases</h2>",
        ('<p class="muted">Every case: the iteration closest to its mean (its output, or the '
        "conversation when the agent did more than answer), each criterion's score and "
        "reasoning, and what went wrong. Failed and errored cases are open.</p>"),
    ]
    return "\n".join(head) + "\n"


def html_case(n: int, c: CaseStats, result: RunResult) -> str:
    """The ``n``-th case (from 0) of the page."""
    return _case(n + 1, c, result)


def html_tail(result: RunResult) -> str:
    return "</body>\n</html>\n"


def html_parts() -> Parts:
    """The page's parts: its head and summary, then a case at a time (a run of any size
    is written in the memory of one case)."""
    return Plain(html_head, html_case, html_tail)
