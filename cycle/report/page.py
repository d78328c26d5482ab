"""What the HTML reports share: their base style, and the plot frame and axes their
charts are drawn in (SVG)."""

from __future__ import annotations

from collections.abc import Callable

from markupsafe import Markup
from markupsafe import escape as _escape
from msgspec import Struct

from cycle.safetext import printable


def escape(value: object) -> Markup:
    """``value`` as HTML text: markupsafe's escape, with control characters and the
    bidirectional overrides shown as visible escapes (``\\u202e``, ``\\x1b``) as cycle
    shows them in a terminal: an override in a model's answer or an improver's words
    reordered the report's own text after it (``applied`` read ``deilppa``)."""
    if isinstance(value, Markup):
        return value
    return _escape(printable(value if isinstance(value, str) else str(value)))

#: the style both reports start from (one file each: nothing is fetched)
BASE_CSS = Markup("""\
  :root { --fg: #1f2328; --muted: #656d76; --line: #d0d7de; --bg: #ffffff; --soft: #f6f8fa; }
  body { font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
         background: var(--bg); margin: 0 auto; max-width: 980px; padding: 24px; }
  h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 32px 0 8px;
  border-bottom: 1px solid var(--line); padding-bottom: 4px; } h3 { font-size: 15px; margin: 20px 0 6px; }
  .muted { color: var(--muted); }
  .offline { background: #fff8c5; border: 1px solid #d4a72c; padding: 8px 12px; border-radius: 6px; }
  table { border-collapse: collapse; margin: 6px 0; }
  th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
  th { background: var(--soft); font-weight: 600; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  .summary th { width: 150px; }
""")


class Frame(Struct, frozen=True):
    """A chart's plot area inside its SVG, and the scale of its y axis."""

    width: int = 640
    height: int = 240
    left: int = 44
    right: int = 32
    top: int = 14
    bottom: int = 32
    y_min: float = 0.0
    y_max: float = 100.0

    def x(self, i: int, n: int) -> float:
        span = self.width - self.left - self.right
        return self.left + (span / 2 if n <= 1 else span * i / (n - 1))

    def y(self, value: float) -> float:
        span = self.height - self.top - self.bottom
        share = (value - self.y_min) / ((self.y_max - self.y_min) or 1.0)
        return self.top + span * (1 - min(max(share, 0.0), 1.0))


def points(pairs: list[tuple[float, float]]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in pairs)


def axes(frame: Frame, labels: list[str], ticks: list[float],
          tick_label: Callable[[float], str] = "{:g}".format) -> list[str]:
    out = [(f'<line class="axis" x1="{frame.left}" y1="{frame.y(frame.y_min):.1f}" '
           f'x2="{frame.width - frame.right}" y2="{frame.y(frame.y_min):.1f}"/>')]
    for t in ticks:
        y = frame.y(t)
        out.append(f'<line class="grid" x1="{frame.left}" y1="{y:.1f}" x2="{frame.width - frame.right}" '
                   f'y2="{y:.1f}"/><text class="tick" x="{frame.left - 6}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{escape(tick_label(t))}</text>')
    for i, label in enumerate(labels):
        out.append(f'<text class="tick" x="{frame.x(i, len(labels)):.1f}" y="{frame.height - 10}" '
                   f'text-anchor="middle">{escape(label)}</text>')
    return out
