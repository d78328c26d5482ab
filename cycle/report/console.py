"""The console summary printed at the end of ``cycle run``."""

from __future__ import annotations

from cycle.records import RunResult, SuiteStats
from cycle.report import format as f
from cycle.words import plural

_COLORS = {"passed": "32", "failed": "31", "error": "33"}


def _paint(text: str, status: str, color: bool) -> str:
    return f"\x1b[{_COLORS.get(status, '33')}m{text}\x1b[0m" if color else text


def render_console(result: RunResult, *, color: bool = False, max_cases: int = 50) -> str:
    s = result.suite
    title = f"{result.prompt_id}@{result.version}" if result.prompt_id else result.run_id
    # a suite of checks only calls no judge (it printed "judge None")
    judge = f"judge {result.judge_model}" if result.judge_model else "no judge: checks only"
    lines = [f"Run {result.run_id}: {title}  (agent {result.agent_model}, {judge})"]
    if result.offline:
        lines.append("[offline model] these results do not come from a real model.")
    if result.status != "finished":
        lines.append(f"Run {result.status}: {result.stop_reason or ''}".rstrip(": "))
    lines.append("")
    width = min(40, max((len(k) for k in result.cases), default=4))
    # failed and errored first: they are what a person looks for (ranked by id, then
    # only the shown cases are built: a run may have 100,000)
    rank = {"error": 0, "failed": 1, "passed": 2}
    order = sorted(result.cases, key=lambda k: rank.get(result.cases[k].status, 1))
    for c in (result.cases[k] for k in order[:max_cases]):
        status = _paint(f"{c.status.upper():6}", c.status, color)
        extra = f"  {c.errors} errored" if c.errors else ""
        reason = ""
        rep = c.representative
        if c.status == "failed" and rep is not None:
            failing = [v.criterion_id + ("*" if v.required else "") for v in rep.verdicts if not v.passed]
            reason = "  fails: " + ", ".join(failing) if failing else ""
        elif c.status == "error":
            first = next((r.error for r in result.results_of(c.case_id) if r.error), "")
            reason = f"  {f.one_line(first)}"
        lines.append(f"  {status} {c.case_id[:width]:<{width}}  {f.score_ci(c.stats):>13}  "
                     f"pass {f.pct(c.pass_rate):>4}{extra}{reason}")
    if len(order) > max_cases:
        lines.append(f"  ... and {len(order) - max_cases} more (see the reports)")
    lines.append("")
    # every role that made calls (the simulated user's and the end conditions' too), the
    # agent and the judge always: the split adds up to the total
    roles = ["agent", "judge", *(r for r in s.usage if r not in ("agent", "judge"))]
    said = {r: ROLE_NAMES.get(r, r) for r in roles}
    lines += [
        f"Score {f.score(s.score.mean)}  95% CI {f.interval(s.score)}  threshold {result.threshold:g}",
        (f"Cases {s.cases_line}   "
        f"pass rate {f.pct(s.pass_rate)}{_of_judged(s)}   iterations {s.iterations} ({s.errors} errored)"),
        (f"Latency p50 {f.seconds(s.latency_p50)}  p90 {f.seconds(s.latency_p90)}  "
        f"p99 {f.seconds(s.latency_p99)}"),
        "Tokens " + ", ".join(
            f"{said[r]} {f.tokens(s.role(r).input_tokens)} in / "
            f"{f.tokens(s.role(r).output_tokens)} out" for r in roles),
        f"Cost {f.money(s.cost, s.cost_estimated)} ("
        + ", ".join(f"{said[r]} {f.money(s.role(r).cost, s.role(r).cost_estimated)}"
                    for r in roles) + ")"
        + (f"   {plural(s.cache_hits, 'call')} served from the response cache" if s.cache_hits else "")
        + (f"   {plural(s.retried_charged, 'retried attempt')} charged"
           if s.retried_charged else ""),
        *f.panel_lines(result.panel),
    ]
    return "\n".join(lines)


#: a call role as a person reads it
ROLE_NAMES = {"user_sim": "simulated user", "condition": "end conditions"}


def _of_judged(s: SuiteStats) -> str:
    """" of 1 judged case" beside a pass rate when errored cases are left out of it (1 of 4
    cases judged read "pass rate 100%")."""
    judged = s.passed + s.failed
    return f" of {judged} judged case{'s' if judged != 1 else ''}" if judged and s.errored else ""
