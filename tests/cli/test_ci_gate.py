"""`cycle compare --markdown FILE --fail-on ...`: the CI gate (issue 37). Two stored runs of
the quickstart, offline: the base's prompt asks for everything the criteria check, the
head's forgets it; the gate fails naming the cases, and passes the other way round."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
ASKS = ("Greet the customer by name. Apologise for the trouble the customer has had. Cite "
        "the customer's order number. End with one concrete next step, starting with "
        "'Next step:'. Sign off with '— The Support Team'.")


def test_the_gate_fails_a_credible_regression_and_writes_the_comment(tmp_path):
    project = tmp_path / "qs"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".cycle", "reports"))
    prompt = project / "prompts" / "support-reply.yaml"
    plain = prompt.read_text()
    store = ["--store", str(tmp_path / "s.db")]

    def run() -> str:
        r = CliRunner().invoke(cli, [*store, "run", str(project / "cycle.yaml"), "-n", "2",
                                     "--json", "--no-reports"])
        assert r.exit_code in (0, 1), r.output
        return json.loads(r.output)["run_id"]

    prompt.write_text(plain.replace("Answer the customer's question.",
                                    f"Answer the customer's question. {ASKS}"))
    base = run()
    prompt.write_text(plain)
    head = run()
    comment = tmp_path / "out" / "comment.md"
    r = CliRunner().invoke(cli, [*store, "compare", base, head, "--markdown", str(comment),
                                 "--fail-on", "regression"])
    assert r.exit_code == 1, r.output
    assert "gate: a credible regression: the score changed by -" in r.output
    text = comment.read_text()
    assert text.startswith(f"### cycle: `{head}` against `{base}`")
    assert "**Fails the gate**: a credible regression" in text and "| Score |" in text
    assert "Regressed (passed in A, fail in B): `" in text and "| Cost |" in text
    # the other way round it is an improvement: the gate passes
    r = CliRunner().invoke(cli, [*store, "compare", head, base, "--markdown", str(comment),
                                 "--fail-on", "case"])
    assert r.exit_code == 0, r.output
    assert "**Passes the gate**: no credible regression and no case regressed." in comment.read_text()
    # never: the same regression reported, exit 0
    r = CliRunner().invoke(cli, [*store, "compare", base, head, "--fail-on", "never"])
    assert r.exit_code == 0 and "Regressed" in r.output


def test_the_same_scores_reached_by_other_sums_are_no_regression(tmp_path):
    # found walking docs/pytest.md: a run of 1 iteration compared with one of 3 of the same
    # prompt (offline: every iteration scores alike) failed the gate, "-0.0 points, 95% CI
    # [-0.0, -0.0]": a case's mean of three 96.4s is 96.40000000000002
    project = tmp_path / "qs"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".cycle", "reports"))
    prompt = project / "prompts" / "support-reply.yaml"
    # the quickstart's head after `make demo`: its cases score 96.4 and 97.0
    prompt.write_text(prompt.read_text().replace(
        "Answer the customer's question.", "Answer the customer's question. Apologise for "
        "the trouble the customer has had. Greet the customer by name. End with one concrete "
        "next step, starting with 'Next step:'. Cite the customer's order number."))
    store = ["--store", str(tmp_path / "s.db")]
    ids = []
    for n in ("3", "1"):
        r = CliRunner().invoke(cli, [*store, "run", str(project / "cycle.yaml"), "-n", n,
                                     "--json", "--no-reports"])
        assert r.exit_code == 0, r.output
        ids.append(json.loads(r.output)["run_id"])
    for fail_on in ("regression", "case"):
        r = CliRunner().invoke(cli, [*store, "compare", *ids, "--fail-on", fail_on, "--json"])
        assert r.exit_code == 0, r.output
        delta = json.loads(r.output)["score"]["delta"]
        assert delta["mean"] == 0 and delta["ci_high"] == 0, delta
