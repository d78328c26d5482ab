"""JUnit XML for CI: one testcase per case; failed cases fail, errored cases error, and a
case every iteration of which a limit ended (terminated: not judged, but the run exits 1)
fails with ``type="terminated"``. Valid against the Jenkins xunit JUnit schema (junit-10.xsd,
benchmarks/interop/check_junit.py).

Written as it goes, a case at a time (``junit_parts``): the report of a run of any size
needs the memory of one case."""

from __future__ import annotations

import html
import re

from cycle.records import CaseStats, RunResult
from cycle.report.parts import Parts, Plain, pieces
from cycle.words import pct

#: what XML 1.0 forbids even as a character reference (controls, lone surrogates, U+FFFE/F),
#: and what it allows but a CI log or page acts on (DEL and the C1 controls, U+009B a
#: one-byte CSI; the bidirectional overrides, which reorder the text after them)
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
                        "\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _allowed(text: str) -> str:
    """``text`` with each character XML cannot hold (or a CI log would act on) shown as a
    visible escape (``\\x1b``): one control character in a model's output made the whole
    file unreadable to CI."""
    return _FORBIDDEN.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                          else f"\\u{ord(m.group()):04x}", text)


def escape(text: str) -> str:
    """Text for an element (xml.sax.saxutils would import urllib.request and http.client:
    30 ms of every run's start-up)."""
    return html.escape(_allowed(text), quote=False)


def quoteattr(value: str) -> str:
    """An attribute's value, quoted: newlines and tabs kept as character references."""
    return '"' + html.escape(_allowed(value)).replace("\n", "&#10;").replace(
        "\r", "&#13;").replace("\t", "&#9;") + '"'


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def _element(tag: str, attrs: dict[str, str], text: str | None = None, indent: int = 0) -> str:
    pad = "  " * indent
    head = f"{pad}<{tag}" + "".join(f" {k}={quoteattr(v)}" for k, v in attrs.items())
    if text is None:
        return head + " />\n"
    return f"{head}>{escape(text)}</{tag}>\n"


def _case(c: CaseStats, result: RunResult) -> str:
    runs = result.results_of(c.case_id)
    out = [(f'    <testcase classname={quoteattr(result.prompt_id or "cycle")} '
           f'name={quoteattr(c.case_id)} time="{sum(r.latency for r in runs):.3f}">\n')]
    detail = (f"mean {_fmt(c.stats.mean)} (threshold {result.threshold:g}), pass rate "
              f"{'n/a' if c.pass_rate is None else pct(c.pass_rate)}, "
              f"{c.errors} errored of {c.iterations} iterations")
    if c.status == "error":
        out.append(_element("error", {"message": "every iteration errored"}, "\n".join(
            f"iteration {r.iteration}: {r.error}" for r in runs if r.error), 3))
    elif c.status == "terminated":
        # not judged, but not a pass: the run exits 1 for it, and a CI that read no
        # failure showed it green
        out.append(_element("failure", {"message": "every iteration ended by a limit before "
                                        "an answer (not judged)", "type": "terminated"},
                            "\n".join(f"iteration {r.iteration}: {r.error or 'terminated'}"
                                       for r in runs if r.status == "terminated"), 3))
    elif c.status == "failed":
        rep = c.representative
        lines = [detail]
        if rep is not None:
            lines += [f"{v.criterion_id}: {v.score:.0f}{' (required)' if v.required else ''}"
                      f"{'' if v.passed else ' FAILED'} - {v.reasoning}" for v in rep.verdicts]
        out.append(_element("failure", {"message": detail}, "\n".join(lines), 3))
    out.append(_element("system-out", {}, detail + ("\n[offline model]" if result.offline
                                                    else ""), 3))
    out.append("    </testcase>\n")
    return "".join(out)


def junit_head(result: RunResult) -> str:
    """The report up to its first case."""
    s = result.suite
    total = f"{s.latency_total:.3f}"
    name = f"cycle {result.prompt_id or ''}@{result.version or ''}".strip("@ ") or "cycle"
    # a case a limit ended is a failure to CI (the run exits 1 for it), as its testcase says
    counts = {"tests": str(s.cases), "failures": str(s.failed + s.terminated_cases),
              "errors": str(s.errored), "time": total}
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n',
           "<testsuites" + "".join(f" {k}={quoteattr(v)}" for k, v in
                                   {"name": "cycle", **counts}.items()) + ">\n",
           "  <testsuite" + "".join(f" {k}={quoteattr(v)}" for k, v in
                                    {"name": name, **counts}.items()) + ">\n",
           "    <properties>\n"]
    for key, value in (("run_id", result.run_id), ("agent_model", result.agent_model),
                       ("judge_model", result.judge_model), ("score", _fmt(result.score)),
                       ("offline", "true" if result.offline else "false")):
        out.append(_element("property", {"name": key, "value": str(value or "")}, indent=3))
    out.append("    </properties>\n")
    return "".join(out)


def junit_case(n: int, c: CaseStats, result: RunResult) -> str:
    """The ``n``-th case (from 0): its testcase element."""
    return _case(c, result)


def junit_tail(result: RunResult) -> str:
    return "  </testsuite>\n</testsuites>\n"


def junit_parts() -> Parts:
    return Plain(junit_head, junit_case, junit_tail)


def render_junit(result: RunResult) -> str:
    return "".join(pieces(junit_parts(), result))
