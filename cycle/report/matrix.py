"""A matrix of runs side by side: each cell's figures, and its paired difference from
the first cell (the baseline), in the console, Markdown and JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cycle.records import RunResult
from cycle.report import format as f
from cycle.report.compare import compare_runs
from cycle.report.json import OFFLINE_NOTE


def matrix_dict(matrix_id: str, labels: list[str], results: list[RunResult]) -> dict[str, Any]:
    """Everything the matrix report shows, JSON-ready."""
    base = results[0] if results else None
    cells = []
    for n, (label, r) in enumerate(zip(labels, results, strict=False)):
        s = r.suite
        vs: dict[str, Any] | None = None
        if base is not None and n > 0:
            c = compare_runs(base, r)
            d = c.score_delta
            vs = {"delta": d.mean, "ci_low": d.ci_low, "ci_high": d.ci_high, "pairs": d.n,
                  "significant": d.ci_low is not None and d.ci_high is not None
                  and (d.ci_low > 0 or d.ci_high < 0),
                  "regressed": c.regressed, "newly_passing": c.newly_passing}
        cells.append({
            "cell": n, "label": label, "run_id": r.run_id, "version": r.version,
            "agent_model": r.agent_model, "score": s.score.mean, "ci_low": s.score.ci_low,
            "ci_high": s.score.ci_high, "pass_rate": s.pass_rate, "errors": s.errors,
            "cost": s.cost, "cost_estimated": s.cost_estimated, "latency_p50": s.latency_p50,
            "vs_first": vs,
        })
    case_ids = list(dict.fromkeys(k for r in results for k in r.cases))
    return {
        "kind": "matrix", "matrix_id": matrix_id,
        "prompt_id": base.prompt_id if base else None,
        "offline": any(r.offline for r in results),
        "note": OFFLINE_NOTE if any(r.offline for r in results) else None,
        "planned": len(labels), "ran": len(results),
        "cells": cells,
        "cases": {k: [r.cases[k].stats.mean if k in r.cases else None for r in results]
                  for k in case_ids},
    }


def _delta(vs: dict[str, Any] | None) -> str:
    if vs is None:
        return "baseline"
    if vs["delta"] is None:
        return "—"
    ci = f.bounds(vs["ci_low"], vs["ci_high"], sign=True)
    return f"{vs['delta']:+.1f}" + (f" {ci}" if ci != "—" else "") + (" *" if vs["significant"] else "")


def _rows(data: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = ["#", "cell", "score [95% CI]", "pass", "errors", "cost", "p50", "vs #1 [95% CI]",
            "regressed"]
    rows = []
    for c in data["cells"]:
        ci = f.bounds(c["ci_low"], c["ci_high"])
        vs = c["vs_first"]
        rows.append([str(c["cell"] + 1), c["label"],
                     f.score(c["score"]) + (f" {ci}" if ci != "—" else ""),
                     "—" if c["pass_rate"] is None else f.pct(c['pass_rate']), str(c["errors"]),
                     f.money(c["cost"], c["cost_estimated"]), f.seconds(c["latency_p50"]),
                     _delta(vs), "—" if vs is None else str(len(vs["regressed"]))])
    return head, rows


def render_matrix_console(data: dict[str, Any]) -> str:
    head, rows = _rows(data)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = [(f"Matrix {data['matrix_id']}: {data['prompt_id']}, "
             f"{data['ran']} of {data['planned']} cells run")]
    if data["offline"]:
        lines.append("[offline model] these results do not come from a real model.")
    lines.append("")
    for r in [head, *rows]:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    lines += ["", ("vs #1: the paired difference per case from the first cell; "
              "* its 95% interval excludes 0.")]
    return "\n".join(lines)


def render_matrix_markdown(data: dict[str, Any]) -> str:
    head, rows = _rows(data)
    out = [f"# Matrix {data['matrix_id']}: {data['prompt_id']}", ""]
    if data["offline"]:
        out += [f"> **Offline model**: {OFFLINE_NOTE.split(': ', 1)[-1]}.", ""]
    out += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    out += ["", ("*vs #1*: the paired difference per case from the first cell "
            "(\\* its 95% interval excludes 0)."), "", "## Cases", ""]
    labels = [c["label"] for c in data["cells"]]
    out += ["| case | " + " | ".join(labels) + " |", "| --- |" + " ---: |" * len(labels)]
    for case_id, means in data["cases"].items():
        out.append(f"| {case_id} | " + " | ".join(f.score(m) for m in means) + " |")
    for c in data["cells"][1:]:
        if c["vs_first"] and c["vs_first"]["regressed"]:
            out += ["", f"Regressed in {c['label']} (passed in {labels[0]}): "
                    + ", ".join(c["vs_first"]["regressed"])]
    return "\n".join(out) + "\n"


def write_matrix_reports(data: dict[str, Any], directory: str | Path) -> dict[str, Path]:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": d / f"{data['matrix_id']}.md", "json": d / f"{data['matrix_id']}.json"}
    paths["markdown"].write_text(render_matrix_markdown(data), encoding="utf-8")
    paths["json"].write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    return paths
