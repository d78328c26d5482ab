"""The cycle report as one self-contained HTML file: no script, no font, no request.

Charts are SVG drawn here from the report's figures (the same dictionary the
Markdown and JSON reports are written from), so the page opens anywhere, from
a CI artifact or an e-mail, and prints. It shows the score per round with its
95% band and the head line, a population's lineage as a tree, a heatmap of every case across rounds, the cost
per round split by role, every suggestion with its decision and its edit as a
diff, the diff from the first prompt to the final one, and the final version's
transcripts where cases have them (tools, conversations).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from cycle.report import format as f
from cycle.report.page import BASE_CSS, Frame, axes, escape, points
from cycle.safetext import printable

TEMPLATES = Path(__file__).parent / "templates"

#: colours of the cost roles (the rest cycle through OTHER)
ROLE_COLOURS = {"agent": "#4e79a7", "judge": "#f28e2b", "improver": "#59a14f", "user_sim": "#b07aa1"}
OTHER = ("#76b7b2", "#edc948", "#ff9da7", "#9c755f")


def score_chart(rounds: list[dict[str, Any]]) -> Markup:
    """Each round's evaluated score with its 95% band, head's score after the round, and
    (when it differs) the score of the candidate kept to explore from."""
    shown = [r for r in rounds if r["score"] is not None]
    if not shown:
        return Markup("")
    lows = [r["ci_low"] if r["ci_low"] is not None else r["score"] for r in shown]
    highs = [r["ci_high"] if r["ci_high"] is not None else r["score"] for r in shown]
    heads = [r[k] for r in shown for k in ("incumbent_score_after", "head_score_after")
             if r.get(k) is not None]
    floor = max(0.0, (min([*lows, *heads]) // 10) * 10 - 10)
    frame = Frame(y_min=floor, y_max=100.0)
    n = len(shown)
    band = ([(frame.x(i, n), frame.y(h)) for i, h in enumerate(highs)]
            + [(frame.x(i, n), frame.y(lo)) for i, lo in reversed(list(enumerate(lows)))])
    out = [(f'<svg class="chart" id="score-chart" viewBox="0 0 {frame.width} {frame.height}" '
           f'role="img" aria-label="Score by round">'),
           *axes(frame, [f"round {r['round']}" for r in shown],
                  [t for t in range(int(floor), 101, 10 if 100 - floor <= 60 else 20)])]
    out.append(f'<polygon class="band" points="{points(band)}"><title>95% interval of each '
               f'evaluation</title></polygon>')
    def line(key: str) -> list[tuple[float, float]]:
        return [(frame.x(i, n), frame.y(r[key])) for i, r in enumerate(shown)
                if r.get(key) is not None]

    head_line, kept_line = line("head_score_after"), line("incumbent_score_after")
    if kept_line and kept_line != head_line:  # a candidate kept to explore from, head stayed
        out.append(f'<polyline class="explored" points="{points(kept_line)}"><title>the '
                   'candidate kept to explore from (head not moved yet)</title></polyline>')
    if head_line:
        out.append(f'<polyline class="head" points="{points(head_line)}"><title>head after '
                   'the round</title></polyline>')
    for i, r in enumerate(shown):
        x, y = frame.x(i, n), frame.y(r["score"])
        kind = "baseline" if r["round"] == 0 else ("accepted" if r["accepted"] else "rejected")
        tip = (f"round {r['round']}: {r['version']} scored {r['score']:.1f} "
               f"[{lows[i]:.1f}, {highs[i]:.1f}] ({kind})")
        out.append(f'<circle class="point {kind}" cx="{x:.1f}" cy="{y:.1f}" r="5">'
                   f'<title>{escape(tip)}</title></circle>')
    out.append("</svg>")
    return Markup("\n".join(out))


def _heat(value: float | None) -> str:
    """A cell colour from red (0) through amber (50) to green (100); grey for errors."""
    if value is None:
        return "#d0d0d0"
    v = min(max(value, 0.0), 100.0) / 100.0
    hue = 120 * v  # 0 red, 60 yellow, 120 green
    return f"hsl({hue:.0f}, 65%, {78 - 18 * abs(v - 0.5):.0f}%)"


def heatmap(cases: dict[str, dict[Any, float | None]], rounds: list[dict[str, Any]]) -> Markup:
    """Rows: cases; columns: rounds; each cell the case's mean in that round's evaluation."""
    columns = [r["round"] for r in rounds]
    if not cases or not columns:
        return Markup("")
    rows = []
    for case_id in sorted(cases):
        by_round = {int(k): v for k, v in cases[case_id].items()}
        cells = []
        for rnd in columns:
            if rnd not in by_round:
                cells.append('<td class="cell none" title="not evaluated">·</td>')
                continue
            value = by_round[rnd]
            text = "err" if value is None else f"{value:.0f}"
            tip = (f"{case_id}, round {rnd}: "
                   + ("every iteration errored" if value is None else f"{value:.1f}"))
            cells.append(f'<td class="cell" style="background:{_heat(value)}" '
                         f'title="{escape(tip)}">{text}</td>')
        rows.append(f'<tr><th scope="row">{escape(case_id)}</th>{"".join(cells)}</tr>')
    head = "".join(f'<th scope="col">r{rnd}</th>' for rnd in columns)
    return Markup(f'<table class="heatmap" id="heatmap"><thead><tr><th>case</th>{head}</tr></thead>'
                  f'<tbody>{"".join(rows)}</tbody></table>')


def role_colour(role: str, roles: list[str]) -> str:
    if role in ROLE_COLOURS:
        return ROLE_COLOURS[role]
    others = [r for r in roles if r not in ROLE_COLOURS]
    return OTHER[others.index(role) % len(OTHER)]


def cost_chart(rounds: list[dict[str, Any]]) -> Markup:
    """Stacked bars: each round's cost by role."""
    roles = sorted({role for r in rounds for role in r["cost_by_role"]})
    total = max((r["cost"] or 0.0 for r in rounds), default=0.0)
    if not roles or total <= 0:
        return Markup('<p class="muted" id="cost-chart">No money was spent'
                      ' (the offline model, or every answer came from the cache).</p>')
    frame = Frame(height=200, left=64, y_min=0.0, y_max=total * 1.1)
    n = len(rounds)
    slot = (frame.width - frame.left - frame.right) / max(n, 1)
    width = min(48.0, slot * 0.6)
    ticks = [total * 1.1 * k / 4 for k in range(5)]
    out = [(f'<svg class="chart" id="cost-chart" viewBox="0 0 {frame.width} {frame.height}" '
           f'role="img" aria-label="Cost per round by role">')]
    out += axes(frame, [], ticks, tick_label=f.money)
    for i, r in enumerate(rounds):
        x = frame.left + slot * (i + 0.5) - width / 2
        base = 0.0
        for role in roles:
            usd = r["cost_by_role"].get(role, 0.0)
            if usd <= 0:
                continue
            top, bottom = frame.y(base + usd), frame.y(base)
            out.append(f'<rect class="bar" x="{x:.1f}" y="{top:.1f}" width="{width:.1f}" '
                       f'height="{max(bottom - top, 0.5):.1f}" fill="{role_colour(role, roles)}">'
                       f'<title>round {r["round"]}, {escape(role)}: {escape(f.money(usd))}</title></rect>')
            base += usd
        out.append(f'<text class="tick" x="{x + width / 2:.1f}" y="{frame.height - 10}" '
                   f'text-anchor="middle">round {r["round"]}</text>')
    out.append("</svg>")
    legend = "".join(f'<span class="key"><i style="background:{role_colour(role, roles)}"></i>'
                     f'{escape(role)}</span>' for role in roles)
    return Markup("\n".join(out) + f'<div class="legend">{legend}</div>')


def diff_lines(text: str) -> Markup:
    """A unified diff, each line marked added, removed or context."""
    from cycle.prompts.diff import lines_of

    out = []
    for line in (ln.removesuffix("\n") for ln in lines_of(text)):
        kind = ("add" if line.startswith("+") and not line.startswith("+++") else
                "del" if line.startswith("-") and not line.startswith("---") else
                "hunk" if line.startswith(("@@", "---", "+++")) else "ctx")
        out.append(f'<span class="{kind}">{escape(line) or " "}</span>')
    return Markup('<pre class="diff">' + "".join(out) + "</pre>")  # each line is a block


def word_diff(before: str, after: str) -> Markup:
    """What a suggestion changes, word by word: removed words struck, added ones marked."""
    a, b = printable(before).split(" "), printable(after).split(" ")
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(escape(" ".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(Markup("<del>{}</del>").format(" ".join(a[i1:i2])))
        if j2 > j1:
            out.append(Markup("<ins>{}</ins>").format(" ".join(b[j1:j2])))
    return Markup('<p class="worddiff">' + " ".join(str(x) for x in out) + "</p>")


def _shown(value: Any) -> Any:
    """What a ``{{ }}`` of the template shows: text with its control characters and
    bidirectional overrides as visible escapes (page.escape), then autoescaped."""
    return printable(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["j2", "html"]),
                      trim_blocks=True, lstrip_blocks=True, finalize=_shown)
    env.filters.update(score=f.score, money=f.money, signed=f.signed, split_gain=f.split_gain,
                       pct=f.pct)
    env.globals.update(word_diff=word_diff, diff_lines=diff_lines)
    return env


def render_cycle_html(data: dict[str, Any]) -> str:
    """The HTML cycle report from ``cycle_report_dict``."""
    from cycle.report import costs, lineage

    template = _environment().get_template("cycle.html.j2")
    return template.render(
        d=data, base_css=BASE_CSS, score_chart=score_chart(data["rounds"]),
        heatmap=heatmap(data.get("cases", {}), data["rounds"]),
        cost_chart=cost_chart(data["rounds"]),
        lineage_tree=lineage.html(data["lineage"]) if data.get("lineage") else Markup(""),
        lineage_key=lineage.KEY, pairwise=f.pairwise_rows(data["rounds"]),
        pairwise_title=f.PAIRWISE_TITLE,
        costs_table=costs.html(data["costs"]) if data.get("costs") else Markup(""))
