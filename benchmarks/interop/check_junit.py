"""cycle's JUnit report against what CI tools read (not part of the test suite: it needs
xmlschema and junitparser, which cycle does not depend on, and the Jenkins xunit schema).

The schema is junit-10.xsd (Jenkins xunit plugin's, MIT), shipped in pytest's sdist as
testing/example_scripts/junit-10.xsd, where pytest validates its own --junitxml with it:
  pip download pytest --no-binary :all: --no-deps -d /tmp/junit
  tar xzf /tmp/junit/pytest-*.tar.gz -C /tmp/junit --wildcards '*junit-10.xsd'
  python -m venv /tmp/junit/venv && /tmp/junit/venv/bin/pip install xmlschema junitparser
  PYTHONPATH=. python benchmarks/interop/check_junit.py /tmp/junit/out   # writes the reports
  /tmp/junit/venv/bin/python benchmarks/interop/check_junit.py /tmp/junit/out \
      /tmp/junit/pytest-*/testing/example_scripts/junit-10.xsd        # validates and reads them
Checked with pytest 9.2.0's junit-10.xsd, xmlschema 4.3.2 and junitparser 5.0.3: a run with
passed, failed, errored and terminated cases, one whose output holds control characters,
and an empty run are valid, and junitparser's counts match the testcases' results."""

import sys
from pathlib import Path


def write(out: Path) -> None:
    from cycle.evals.results import build_run_result
    from cycle.records import IterationResult
    from cycle.report import render_junit
    from tests.report.test_reports import _hostile_run, run

    out.mkdir(parents=True, exist_ok=True)
    mixed = run("r1", {"good": [80], "bad": [40], "down": [None], "half": [None, 90]})
    ended = IterationResult(case_id="loops", iteration=0, status="terminated", score=None,
                            passed=None, error="terminated: the step limit was reached")
    limit = build_run_result(run_id="r2", status="finished", threshold=70, results=[ended],
                             offline=True, usage={}, case_info={"loops": {}}, prompt_id="p")
    for name, result in (("mixed", mixed), ("hostile", _hostile_run()), ("empty", run("r0", {})),
                         ("terminated", limit)):
        (out / f"{name}.junit.xml").write_text(render_junit(result), encoding="utf-8")


def check(out: Path, xsd: Path) -> None:
    import junitparser
    import xmlschema

    schema = xmlschema.XMLSchema(str(xsd))
    for path in sorted(out.glob("*.junit.xml")):
        errors = [str(e).splitlines()[0] for e in schema.iter_errors(str(path))]
        print(path.name, "valid" if not errors else errors)
        for suite in junitparser.JUnitXml.fromfile(str(path)):
            results = [type(r).__name__ for case in suite for r in case.result]
            assert suite.failures == results.count("Failure"), (suite.failures, results)
            assert suite.errors == results.count("Error"), (suite.errors, results)
            assert suite.tests == len(list(suite))
            print(f"  {suite.name}: tests {suite.tests}, failures {suite.failures}, errors "
                  f"{suite.errors}, skipped {suite.skipped}, time {suite.time}")


if __name__ == "__main__":
    if len(sys.argv) > 2:
        check(Path(sys.argv[1]), Path(sys.argv[2]))
    else:
        write(Path(sys.argv[1]))
