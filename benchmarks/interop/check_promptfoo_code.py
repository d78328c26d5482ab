"""python and javascript assertions: promptfoo's verdicts against cycle's (not part of the
test suite: it needs npm). A config of tests/formats/test_promptfoo_code.py's assertions
(and more outputs) is run by promptfoo with its echo provider (the output is the prompt,
`{{text}}`); each assertion's pass is compared with the verdict of the check cycle import
made of it, on the same output.
    python benchmarks/interop/check_promptfoo_code.py [PROMPTFOO_DIR]   (default /tmp/pf)
Checked with promptfoo 0.121.20 (npm install promptfoo), node 20: every verdict agrees."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.formats import test_promptfoo_code as t

OUTPUTS = ["Hi Ann, you are welcome!", "HELLO, REFUND DENIED", "Sorry Bo, no refund?",
           "You are welcome, BO!", "😀" * 60, "1234 5678 !!", "", "Straße ẞ Bo"]


def main() -> int:
    pf = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/pf")
    base = yaml.safe_load(t.CONFIG)
    asserts = [*base["defaultTest"]["assert"], *(a for test in base["tests"] for a in test["assert"])]
    config = {"prompts": ["{{text}}"], "providers": ["echo"],
              "tests": [{"description": f"output {i + 1}", "vars": {"text": o, "name": "Ann"},
                         "assert": asserts} for i, o in enumerate(OUTPUTS)]}
    work = Path(tempfile.mkdtemp())
    (work / "promptfooconfig.yaml").write_text(yaml.safe_dump(config, allow_unicode=True))
    (work / "checks").mkdir()
    (work / "checks" / "tone.py").write_text(t.TONE)
    env = {**os.environ, "PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1"}
    subprocess.run([str(pf / "node_modules/.bin/promptfoo"), "eval", "-c",
                    str(work / "promptfooconfig.yaml"), "-o", str(work / "out.json"),
                    "--no-cache", "--no-write", "--no-table"], cwd=work, env=env, check=False)
    results = json.loads((work / "out.json").read_text())["results"]["results"]
    subprocess.run([sys.executable, "-m", "cycle", "import", "promptfoo",
                    str(work / "promptfooconfig.yaml"), "--out", str(work / "p"), "--name", "p",
                    "--model", "offline:default"], cwd=ROOT, check=True,
                   env={**env, "PYTHONPATH": str(ROOT)})
    from pydantic import TypeAdapter

    from cycle.judge.criteria import CheckSpec
    from cycle.testing.checks import check_context

    spec = importlib.util.spec_from_file_location("pcheck", work / "p" / "promptfoo_checks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases = {c["input"]["text"]: c for c in yaml.safe_load((work / "p" / "cases" / "p.yaml").read_text())}
    disagree = 0
    for r in results:
        text = r["vars"]["text"]
        case = cases[text]
        for n, graded in enumerate(r["gradingResult"]["componentResults"]):
            check = case["criteria"][n]["check"]
            ctx = check_context(r["response"]["output"], input=case["input"])
            if check["type"] == "python":
                score = getattr(module, check["function"].split(":")[1])(ctx)[0]
            else:
                score = TypeAdapter(CheckSpec).validate_python(check).evaluate(ctx).score
            same = (score >= 100) == graded["pass"]
            disagree += not same
            print("ok  " if same else "DIFF", repr(text[:24]), asserts[n]["type"],
                  str(asserts[n]["value"])[:40].replace("\n", " "), graded["pass"], score)
    print(f"{disagree} verdicts differ")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
