"""A run's ``EvalSuiteResult`` JSON, field for field, the baseline diff and the console
summary."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cycle.cases import TestCase
from cycle.errors import ConfigError
from cycle.formats.toolforge.cases import Loaded
from cycle.formats.toolforge.staleness import Staleness
from cycle.judge.toolforge import (
    assess,
    calls_of,
    latency_ms,
)
from cycle.records import IterationResult
from cycle.yamlload import parse_json_text


def contract_run_id() -> str:
    """The contract's ``{{uuid}}`` run id (also the cycle run's id)."""
    return str(uuid.uuid4())


def _ms(start: str, end: str) -> float:
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds() * 1000
    except ValueError:
        return 0.0


def case_result(loaded: Loaded, case: TestCase, results: Sequence[IterationResult]
                ) -> dict[str, Any]:
    """One case of the result file. With several iterations the case passes only when every
    one did; the details are the first failed (or errored) iteration's, else the first's."""
    check = loaded.check_of(case)
    ordered = sorted(results, key=lambda r: r.iteration)
    shown = next((r for r in ordered if r.status != "passed"), ordered[0]) if ordered else None
    out: dict[str, Any] = {"id": case.id, "description": case.description}
    if shown is None:
        return {**out, "passed": False, "durationMs": 0, "assertionsRun": 0,
                "assertionsSkipped": check.skipped, "error": "not run",
                "details": {"toolsCalled": [], "responseLength": 0,
                            "skippedTokens": check.skipped_tokens}}
    details = {"toolsCalled": [c.name for c in calls_of(shown.trace)],
               "responseLength": len(shown.output), "skippedTokens": check.skipped_tokens}
    if shown.status in ("error", "terminated"):
        error = shown.error or shown.status
        return {**out, "passed": False,
                "durationMs": round(_ms(shown.started_at, shown.finished_at)),
                "assertionsRun": 0, "assertionsSkipped": check.skipped,
                "error": error, "details": details}
    ms = latency_ms(shown.trace, shown.latency)
    a = assess(check.expect, response=shown.output, calls=calls_of(shown.trace),
               duration_ms=ms, stubs=check.stubs, skipped=check.skipped)
    passed = all(r.status == "passed" for r in ordered)
    row = {**out, "passed": passed, "durationMs": round(ms), "assertionsRun": a.run,
           "assertionsSkipped": a.skipped}
    if a.error:
        row["error"] = a.error
    elif not passed:
        row["error"] = "failed: " + "; ".join(v.reasoning for v in shown.verdicts if not v.passed)
    row["details"] = details
    return row


def suite_result(loaded: Loaded, results: Sequence[IterationResult], *, run_id: str,
                 started: datetime, duration_ms: float, endpoint: str, cost: float | None,
                 stale: Staleness, baseline: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``EvalSuiteResult`` of a run, field for field (plus ``stale``, the contract's
    "mark the result as stale")."""
    by_case: dict[str, list[IterationResult]] = {}
    for r in results:
        by_case.setdefault(r.case_id, []).append(r)
    cases = [case_result(loaded, c, by_case.get(c.id, ())) for c in loaded.cases]
    passed = sum(c["passed"] for c in cases)
    regressions, new_passes = diff_baseline(baseline, cases)
    return {
        "runId": run_id,
        "timestamp": started.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "tier": loaded.file.tier,
        "toolName": loaded.file.tool_name,
        "agentEndpoint": endpoint,
        "metadata": stale.current,
        "stalenessWarnings": stale.warnings,
        "stale": stale.stale,
        "cases": cases,
        "summary": {
            "totalCases": len(cases), "passed": passed, "failed": len(cases) - passed,
            "skippedAssertions": sum(c["assertionsSkipped"] for c in cases),
            "totalDurationMs": round(duration_ms),
            "estimatedCostUsd": None if cost is None else round(cost, 6),
        },
        "baselineRunId": baseline["runId"] if baseline else None,
        "regressions": regressions,
        "newPasses": new_passes,
    }


def diff_baseline(baseline: dict[str, Any] | None, cases: Sequence[dict[str, Any]]
                  ) -> tuple[list[str], list[str]]:
    """(regressions, new passes): cases that passed in the baseline and fail now, and the
    reverse. A case the baseline does not have is neither."""
    if not baseline:
        return [], []
    before = {c.get("id"): c.get("passed") for c in baseline.get("cases", [])
              if isinstance(c, dict)}
    regressions = [c["id"] for c in cases if before.get(c["id"]) is True and not c["passed"]]
    new_passes = [c["id"] for c in cases if before.get(c["id"]) is False and c["passed"]]
    return regressions, new_passes


def result_path(output_dir: Path, run_id: str) -> Path:
    return output_dir / f"{run_id}.json"


def load_baseline(output_dir: Path, run_id: str) -> dict[str, Any]:
    """An earlier run's result file from the output folder; unknown ids list the known."""
    path = result_path(output_dir, run_id)
    if path.exists():
        try:
            data = parse_json_text(path.read_text(encoding="utf-8"), str(path))
        except (OSError, ValueError) as e:
            raise ConfigError(f"baseline result '{path}' cannot be read: {e}",
                              file=str(path)) from None
        if isinstance(data, dict) and isinstance(data.get("cases"), list):
            return data
        raise ConfigError("baseline result is not an EvalSuiteResult", file=str(path))
    known = sorted(p.stem for p in output_dir.glob("*.json")) if output_dir.is_dir() else []
    raise ConfigError(
        f"baseline run '{run_id}' is not in {output_dir}",
        hint=("Known runs: " + ", ".join(known[-10:]) + ".") if known
        else "No results are there yet: run once without --baseline.")


def write_result(output_dir: Path, result: dict[str, Any]) -> Path:
    """Write the result file whole or not at all (a temporary file, then a rename)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    path = result_path(output_dir, result["runId"])
    fd, tmp = tempfile.mkstemp(dir=output_dir, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


# -- the console summary -------------------------------------------------------------------

WIDTH = 67


def render_summary(result: dict[str, Any], *, warnings: Sequence[str] = ()) -> str:
    """The contract's human-readable summary; regressions stand out at the end."""
    title = f"═══ {result['toolName']} — {result['tier']} evals "
    lines = [title + "═" * max(3, WIDTH - len(title))]
    cases = result["cases"]
    id_w = max((len(c["id"]) for c in cases), default=0)
    desc_w = min(48, max((len(c["description"]) for c in cases), default=0))
    for c in cases:
        mark = "✓" if c["passed"] else "✗"
        desc = c["description"] if len(c["description"]) <= desc_w \
            else c["description"][:desc_w - 1] + "…"
        lines.append(f"  {mark} {c['id']:<{id_w}}  {desc:<{desc_w}}  {c['durationMs']:>6}ms")
        if not c["passed"]:
            lines.append(f"    → {c.get('error') or 'failed'}")
    s = result["summary"]
    lines.append("─" * WIDTH)
    cost = s.get("estimatedCostUsd")
    lines.append(f"  {s['passed']}/{s['totalCases']} passed | {s['failed']} failed | "
                 f"{s['skippedAssertions']} skipped assertions | {s['totalDurationMs']}ms total"
                 + (f" | ${cost:.4f}" if cost else ""))
    for w in [*result["stalenessWarnings"], *warnings]:
        lines.append(f"  ⚠ {w}")
    if result.get("baselineRunId"):
        regressions, new = result["regressions"], result["newPasses"]
        if regressions:
            lines.append(f"  ✗ {len(regressions)} REGRESSION{'S' if len(regressions) != 1 else ''}"
                         f" since {result['baselineRunId']}:")
            lines += [f"      ✗ {r}" for r in regressions]
        else:
            lines.append(f"  no regressions since {result['baselineRunId']}")
        if new:
            lines.append(f"  ✓ {len(new)} new pass{'es' if len(new) != 1 else ''}: "
                         + ", ".join(new))
    return "\n".join(lines)
