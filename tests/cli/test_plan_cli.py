"""`cycle plan`: from a stored run of the suite, the cases and iterations a gain needs
and what the budget buys; nothing is called."""

import json

from tests.cli.test_run_cli import invoke, project

CRITERIA = """
    criteria:
      - id: no_guarantees
        check: {type: not_contains, values: [guarantee]}
    run: {iterations: 3}
    improve: {stop: {any: [{max_rounds: 3}, {max_cost: 0.5}]}}
"""


def test_plan_reads_the_stored_run_and_prices_the_cycle(tmp_path):
    cfg = project(tmp_path, CRITERIA)
    missing = invoke(tmp_path, "plan", cfg, "--gain", "3")
    assert missing.exit_code == 2 and "cycle run" in missing.output and "-n 3" in missing.output
    once = invoke(tmp_path, "run", cfg, "-n", "1", "--no-reports")
    assert once.exit_code == 0, once.output
    refused = invoke(tmp_path, "plan", cfg, "--gain", "3")
    assert refused.exit_code == 2 and "judged a case twice" in refused.output
    assert invoke(tmp_path, "run", cfg, "--no-reports").exit_code == 0
    shown = invoke(tmp_path, "plan", cfg, "--gain", "3")
    assert shown.exit_code == 0, shown.output
    out = shown.output
    # the offline model is deterministic: no spread, the acceptance's floor is planned on
    assert "offline model" in out and "floor of 1 point is planned on" in out
    assert "<- set" in out and "costs nothing here" in out
    data = json.loads(invoke(tmp_path, "plan", cfg, "--gain", "3", "--json").output)
    assert data["suite_cases"] == 2 and data["iterations"] == 3 and data["budget"] == 0.5
    row = next(r for r in data["rows"] if r["iterations"] == 3)
    assert row["detectable"] is None  # 2 cases are too few to test: said, not a number
    assert row["cases_needed"] >= 3
    bad = invoke(tmp_path, "plan", cfg, "--gain", "0")
    assert bad.exit_code == 2 and "--gain" in bad.output
