"""A population's lineage as the cycle reports show it (cycle.loop.lineage gives the data):
each candidate under the version it was built from, with the round that built it, its
screen's gain, its full evaluation's score and gain, what became of it, a merge's two
parents, where the cycle left head and which versions are on the frontier.

Drawn from the JSON report's ``lineage`` (its candidates in the tree's order, each with
its depth), so that Markdown, HTML and the console say the same thing.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from cycle.words import plural

#: what the marks mean, as the reports say it
KEY = ("head: where the cycle left head; frontier: best on that many cases among the "
       "versions evaluated in full (the parents a next round would be built from)")

#: the facts the HTML report shows as marks beside the others
MARKS = ("head", "frontier")


def parts(c: dict[str, Any], *, compact: bool = False) -> list[tuple[str, str]]:
    """A candidate's facts, each (kind, text), in the order they are said."""
    out = [("version", c["version"])]
    if c["round"] == 0:
        out.append(("where", "start"))
    else:
        slot = c.get("slot")
        if compact:
            out.append(("where", f"r{c['round']}" + (f".{slot + 1}" if slot is not None else "")))
        else:
            out.append(("where", f"round {c['round']}"
                        + (f", candidate {slot + 1}" if slot is not None else "")))
    if c.get("second_parent"):
        out.append(("merge", f"merge of {c['parent']} and {c['second_parent']}"))
    if c.get("screened"):
        gain = c.get("screen_gain")
        shown = "no case judged" if gain is None else f"{gain:+.1f}"
        out.append(("screen", f"screen {shown}" if compact else
                    f"screen {shown} on {plural(c.get('screen_cases') or 0, 'case')}"))
    if c.get("evaluated") and c.get("score") is not None:
        delta = c.get("delta")
        out.append(("full", f"{'baseline' if c['round'] == 0 else 'full'} {c['score']:.1f}"
                    + (f" ({delta:+.1f})" if delta is not None else "")))
    if c["round"] != 0:
        confirmed = c.get("confirmed")
        then = "" if confirmed is None else ", confirmed" if confirmed else ", not confirmed"
        out.append(("decision", f"{c['decision']}{then}"))
    if c.get("head"):
        out.append(("head", "head"))
    if c.get("frontier"):
        out.append(("frontier", f"frontier {c['frontier']}" if compact else
                    f"frontier: best on {plural(c['frontier'], 'case')}"))
    return out


def markdown(lineage: dict[str, Any]) -> list[str]:
    """The lineage section of the Markdown report: a nested list, a child under its parent."""
    said = (f"Each candidate under the version it was built from (a population of "
            f"{lineage['population']}): the round that built it, its screen (mean gain over "
            "its parent on the minibatch), its full evaluation (score, and the paired gain "
            f"over the incumbent it was judged on) and what became of it. {KEY}.")
    out = ["## Lineage", "", said, ""]
    for c in lineage["candidates"]:
        text = " · ".join(f"**{t}**" if kind in ("version", "head") else t
                          for kind, t in parts(c))
        out.append(f"{'  ' * c['depth']}- {text}")
    return out


def console(lineage: dict[str, Any]) -> list[str]:
    """The lineage as a compact tree for the terminal."""
    nodes = lineage["candidates"]
    out = [f"lineage (a population of {lineage['population']}; rN.K: round N's candidate K):"]
    for i, c in enumerate(nodes):
        depth = c["depth"]
        # a branch continues at a depth while a later sibling (or an aunt's) is still to come
        prefix = "".join("│  " if _more_at(nodes, i, d) else "   " for d in range(1, depth))
        if depth:
            prefix += "├─ " if _more_at(nodes, i, depth) else "└─ "
        out.append("  " + prefix + "  ".join(t for _, t in parts(c, compact=True)))
    return out


def _more_at(nodes: list[dict[str, Any]], i: int, depth: int) -> bool:
    """Whether a node at ``depth`` comes after node ``i`` before the tree climbs above it."""
    for later in nodes[i + 1:]:
        if later["depth"] < depth:
            return False
        if later["depth"] == depth:
            return True
    return False


def html(lineage: dict[str, Any]) -> Markup:
    """The lineage as nested lists, each fact in a span of its kind (the page styles them)."""
    nodes = lineage["candidates"]

    def siblings(i: int, depth: int) -> tuple[str, int]:
        out = []
        while i < len(nodes) and nodes[i]["depth"] == depth:
            c = nodes[i]
            marks = [k for k, on in (("head", c.get("head")), ("merge", c.get("second_parent")),
                                     ("frontier", c.get("frontier")),
                                     ("ended", c.get("decision") == "ended at its screen")) if on]
            facts = parts(c)
            spans = " · ".join(f'<span class="{kind}">{escape(text)}</span>'
                               for kind, text in facts if kind not in MARKS)
            spans += "".join(f' <span class="mark {kind}">{escape(text)}</span>'
                             for kind, text in facts if kind in MARKS)
            item = f'<li class="{" ".join(marks)}" data-version="{escape(c["version"])}">{spans}'
            i += 1
            if i < len(nodes) and nodes[i]["depth"] > depth:
                inner, i = siblings(i, depth + 1)
                item += f"<ul>{inner}</ul>"
            out.append(item + "</li>")
        return "".join(out), i

    tree, _ = siblings(0, 0)
    return Markup(f'<ul class="lineage" id="lineage-tree">{tree}</ul>')
