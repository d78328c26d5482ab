"""JUnit XML for CI: one testcase per case; failed cases fail, errored cases error."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from cycle.records import RunResult


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def render_junit(result: RunResult) -> str:
    s = result.suite
    total_time = sum(r.latency for r in result.results)
    name = f"cycle {result.prompt_id or ''}@{result.version or ''}".strip("@ ")
    suites = ET.Element("testsuites", name="cycle", tests=str(s.cases), failures=str(s.failed),
                        errors=str(s.errored), time=f"{total_time:.3f}")
    suite = ET.SubElement(suites, "testsuite", name=name or "cycle", tests=str(s.cases),
                          failures=str(s.failed), errors=str(s.errored), time=f"{total_time:.3f}")
    props = ET.SubElement(suite, "properties")
    for key, value in (("run_id", result.run_id), ("agent_model", result.agent_model),
                       ("judge_model", result.judge_model), ("score", _fmt(result.score)),
                       ("offline", "true" if result.offline else "false")):
        ET.SubElement(props, "property", name=key, value=str(value or ""))
    for c in result.cases.values():
        runs = result.results_of(c.case_id)
        tc = ET.SubElement(suite, "testcase", classname=result.prompt_id or "cycle",
                           name=c.case_id, time=f"{sum(r.latency for r in runs):.3f}")
        detail = (f"mean {_fmt(c.stats.mean)} (threshold {result.threshold:g}), pass rate "
                  f"{'n/a' if c.pass_rate is None else f'{c.pass_rate:.0%}'}, "
                  f"{c.errors} errored of {c.iterations} iterations")
        if c.status == "error":
            err = ET.SubElement(tc, "error", message="every iteration errored")
            err.text = "\n".join(f"iteration {r.iteration}: {r.error}" for r in runs if r.error)
        elif c.status == "failed":
            rep = c.representative
            lines = [detail]
            if rep is not None:
                lines += [f"{v.criterion_id}: {v.score:.0f}{' (required)' if v.required else ''}"
                          f"{'' if v.passed else ' FAILED'} - {v.reasoning}" for v in rep.verdicts]
            fail = ET.SubElement(tc, "failure", message=detail)
            fail.text = "\n".join(lines)
        out = ET.SubElement(tc, "system-out")
        out.text = detail + ("\n[offline model]" if result.offline else "")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
