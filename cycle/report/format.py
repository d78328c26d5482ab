"""Small formatting helpers shared by the reports."""

from __future__ import annotations

import re
from typing import Any

from cycle.judge.agreement import MIN_OUTPUTS
from cycle.records import PanelFigure, Stats, WithPeople
from cycle.words import pct  # f.pct, as cycle prints a share anywhere (cycle.words)


def score(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def score_ci(s: Stats) -> str:
    """"72.4 ± 3.1" (the 95% interval's half width), or just the mean for n < 2."""
    if s.mean is None:
        return "—"
    if s.clipped:  # cut to the scale: no longer a symmetric "±"
        return f"{s.mean:.1f} {bounds(s.ci_low, s.ci_high)}"
    half = s.half_width
    return f"{s.mean:.1f}" if half is None else f"{s.mean:.1f} ± {half:.1f}"


def interval(s: Stats) -> str:
    return bounds(s.ci_low, s.ci_high)


def bounds(low: float | None, high: float | None, *, sign: bool = False) -> str:
    """``[68.1, 76.7]`` (``[+3.1, +12.3]`` with ``sign``), or — when either is missing."""
    if low is None or high is None:
        return "—"
    spec = "+.1f" if sign else ".1f"
    return f"[{low:{spec}}, {high:{spec}}]"


def signed(x: float | None) -> str:
    return "—" if x is None else f"{x:+.1f}"


def money(x: float, estimated: bool = False) -> str:
    text = f"${x:.4f}" if x < 1 else f"${x:.2f}"
    return text + (" (est.)" if estimated else "")


def seconds(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def tokens(n: int) -> str:
    return f"{n:,}"


def one_line(text: str, limit: int = 100) -> str:
    """``text`` on one line (white space folded), cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def split_gain(r: dict[str, Any]) -> str:
    """The gain on the cases the improver saw and on the held-out ones, and the gap
    between them (overfitting when large): "+6.0 / -2.0 (gap 8.0)"."""
    seen, held = r.get("seen_delta"), r.get("held_out_delta")
    if seen is None or held is None:
        return "—"
    return f"{signed(seen)} / {signed(held)} (gap {seen - held:.1f})"


#: what the pairwise figures are, in a line
PAIRWISE_TITLE = ("Pairwise comparisons: the judge's preference of the candidate's outputs "
                  "over the incumbent's, per pairwise criterion; each pair judged in both "
                  "orders, a verdict that follows the position is an order flip and counts as "
                  "a tie; cases preferring the candidate (wins), the incumbent (losses) or "
                  "neither (ties), and the one-sided sign test's p")


def pairwise_rows(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every round's pairwise comparisons, each with its round's name ("1", "2 (confirm)")."""
    return [{"round": f"{r['round']} (confirm)" if r.get("stage") == "confirm" else str(r["round"]),
             **t} for r in rounds for t in r.get("pairwise") or []]


def pairwise_lines(rounds: list[dict[str, Any]]) -> list[str]:
    """The pairwise figures as plain lines (the console's); [] when scores alone decided."""
    rows = pairwise_rows(rounds)
    if not rows:
        return []
    return [PAIRWISE_TITLE + ":"] + [
        f"  round {t['round']} {t['criterion']}: {t['wins']} wins, {t['losses']} losses, "
        f"{t['ties']} ties; {pct(t['order_flips'])} order flips over {t['pairs']} pairs; "
        f"p {t['p_value']:.3g}" for t in rows]


_BACKTICKS = re.compile(r"`{3,}")


def fenced(text: str, info: str = "") -> list[str]:
    """``text`` in a Markdown code fence longer than any run of backticks inside it: an
    output holding its own fence cannot close ours (and the rest render as HTML). Its
    control and escape characters are shown as visible escapes (``\\x1b``): a report
    read with ``cat`` acts on none of a model's (cycle.safetext)."""
    from cycle.safetext import printable

    text = printable(text.replace("\r\n", "\n"))
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=2)
    fence = "`" * max(3, longest + 1)
    return [fence + info, text, fence]


#: what Markdown (and the HTML it lets through) would read in a line of text, escaped
_INLINE = str.maketrans({"\\": "\\\\", "|": "\\|", "<": "&lt;", ">": "&gt;", "&": "&amp;"})


def md_inline(text: Any) -> str:
    """Text from outside (a judge's reasoning, an improver's, an error) as one line of
    Markdown that shows it as text, in a table cell or a list item: its newlines do not
    end the row (or start a heading), ``|`` no column, its HTML is no markup (``<img
    onerror=...>``, ``</details>`` closing the report's own), ``[x](javascript:...)`` no
    link; control and escape characters are visible escapes (cycle.safetext)."""
    from cycle.safetext import printable

    one = re.sub(r"\r?\n", " ", str(text))
    # "](" escaped is no inline link or image, and brackets stay readable as they are
    return printable(one).translate(_INLINE).replace("](", "]\\(")


def md_code(text: Any, *, cell: bool = False) -> str:
    """An id (a case's, a run's) as a Markdown code span, whatever it holds: fenced by one
    backtick more than its longest run of them (padded when it begins or ends with one);
    in a table ``cell`` its ``|`` escaped, which GFM reads as a pipe of the text, in a
    code span too (a case id ``a|b`` split its row into one cell more)."""
    from cycle.safetext import printable

    code = printable(str(text), oneline=True)
    fence = "`" * (max(map(len, re.findall("`+", code)), default=0) + 1)
    pad = " " if code.startswith("`") or code.endswith("`") else ""
    return f"{fence}{pad}{code.replace('|', chr(92) + '|') if cell else code}{pad}{fence}"


def html_inline(text: Any) -> str:
    """Text from outside on one line inside the HTML a Markdown report holds (a
    ``<summary>``): no markup, no Markdown escapes (HTML shows them as they are)."""
    from cycle.safetext import printable

    return printable(str(text), oneline=True).replace("&", "&amp;").replace(
        "<", "&lt;").replace(">", "&gt;")


def figure(x: float | None, ci: tuple[float, float] | None = None, digits: int = 2) -> str:
    """"0.43 [0.12, 0.70]", the figure alone without an interval, or — when undefined."""
    if x is None:
        return "—"
    return f"{x:.{digits}f}" + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")


def with_people(w: WithPeople | None) -> str:
    """A judge's agreement with people: "kappa 0.50 [0.10, 0.80], bias +3.0 (n 8)"."""
    if w is None:
        return "no labels"
    return f"kappa {figure(w.kappa, w.kappa_ci)}, bias {signed(w.bias)} (n {w.labels})"


#: what the panel figures are, in a line
PANEL_TITLE = ("Judge panel: the members' agreement with each other per LLM criterion "
               "(Krippendorff's alpha on their 0-100 scores, 95% CI; 1 agree, 0 no better "
               "than chance, below 0 systematic disagreement; — when every score was alike) "
               "and each member's mean score")


def panel_lines(panel: tuple[PanelFigure, ...]) -> list[str]:
    """The panel figures as plain lines (the console's); [] for a single judge."""
    if not panel:
        return []
    out = [PANEL_TITLE + ":"]
    for p in panel:
        means = ", ".join(f"{m.model} {score(m.mean)}" for m in p.members)
        few = ("" if p.alpha is None or p.alpha_ci is not None else
               f" (no interval under {MIN_OUTPUTS} outputs)" if p.outputs < MIN_OUTPUTS else
               " (no interval: the members scored every output alike)" if p.alpha == 1 else "")
        out.append(f"  {p.criterion}: alpha {figure(p.alpha, p.alpha_ci)}{few} over "
                   f"{p.outputs} outputs; {means}")
    labelled = [p for p in panel if p.people is not None]
    if labelled:
        out.append("With people's labels (every run of this panel):")
        for p in labelled:
            members = "; ".join(f"{m.model} {with_people(m.people)}" for m in p.members)
            out.append(f"  {p.criterion}: panel {with_people(p.people)}; {members}")
    return out
