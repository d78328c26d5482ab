"""`cycle run` and `cycle compare` through the real CLI: reports, exit codes, the openai SDK."""

import json
import textwrap

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import LoopbackServer, Reply

PROMPT = """
id: support
system: You are a support agent. Answer the customer's question.
user_template: |
  Customer: {{ customer }}
  Order: {{ order }}
  Question: {{ question }}
params:
  model: offline:default
"""
CASES = """
- id: late
  tags: [shipping]
  input: {customer: Ann, order: A-1042, question: Where is my parcel?}
- id: refund
  input: {customer: Bo, order: B-2210, question: When do I get my refund?}
"""


def project(tmp_path, criteria: str, extra: str = "") -> str:
    (tmp_path / "prompts").mkdir(exist_ok=True)
    (tmp_path / "cases").mkdir(exist_ok=True)
    (tmp_path / "prompts" / "support.yaml").write_text(PROMPT)
    (tmp_path / "cases" / "all.yaml").write_text(CASES)
    cfg = tmp_path / "cycle.yaml"
    cfg.write_text("prompt: prompts/support.yaml\n" + textwrap.dedent(criteria) + extra)
    return str(cfg)


def invoke(tmp_path, *args):
    return CliRunner().invoke(cli, ["--store", str(tmp_path / "store.db"), *args])


def test_exit_0_all_passed_and_four_reports(tmp_path):
    cfg = project(tmp_path, """
        criteria:
          - id: no_guarantees
            check: {type: not_contains, values: [guarantee]}
        run: {iterations: 2}
    """)
    r = invoke(tmp_path, "run", cfg)
    assert r.exit_code == 0, r.output
    assert "[offline model]" in r.output and "2 passed" in r.output
    reports = sorted(p.suffixes[-1] for p in (tmp_path / "reports").iterdir())
    assert reports == [".json", ".md", ".xml"]
    md = next((tmp_path / "reports").glob("*.md")).read_text()
    assert "Offline model" in md and "<details>" in md


def test_exit_1_some_failed_with_failed_case_expanded(tmp_path):
    cfg = project(tmp_path, """
        criteria:
          - id: cites_order
            check: {type: contains, values: ["{{ order }}"]}
            required: true
          - id: tone
            rubric: Greets the customer by name and signs off.
        judge: offline:default
    """)
    r = invoke(tmp_path, "run", cfg, "-n", "1", "--report-dir", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output
    md = next((tmp_path / "out").glob("*.md")).read_text()
    assert "## Failed and errored cases" in md and "missing: 'A-1042'" in md
    xml = next((tmp_path / "out").glob("*.xml")).read_text()
    assert xml.count("<failure") == 2


def test_exit_2_input_errors_name_file_and_line(tmp_path):
    cfg = project(tmp_path, """
        criteria:
          - id: accuracy
            wieght: 2
    """)
    r = invoke(tmp_path, "run", cfg)
    assert r.exit_code == 2
    assert "cycle.yaml:5 (criteria[0].wieght)" in r.output and "unknown key 'wieght'" in r.output
    assert "Did you mean 'weight'" in r.output
    assert "Traceback" not in r.output
    r = invoke(tmp_path, "run", str(tmp_path / "missing.yaml"))
    assert r.exit_code == 2 and "not found" in r.output


def test_exit_3_when_the_judge_answers_garbage_through_the_openai_sdk(tmp_path):
    def responder(request):
        if request.schema_name == "cycle_judge":
            return "this is not JSON"
        return "Your order A-1042 is on its way."

    with LoopbackServer(responder=responder) as srv:
        cfg = project(tmp_path, """
            criteria:
              - id: accuracy
            agent: openai:gpt-4o-mini
        """, f"providers:\n  openai: {{base_url: '{srv.openai_base_url}'}}\n")
        r = invoke(tmp_path, "run", cfg, "-n", "1", "--json")
        # one agent call and two judge calls (answer + repair) per case
        assert srv.request_count == 6
    assert r.exit_code == 3, r.output
    data = json.loads(r.output)
    assert data["summary"]["errors"] == 2 and data["summary"]["score"] is None
    assert data["offline"] is False


def test_real_openai_sdk_run_against_loopback_and_compare(tmp_path):
    def responder(request):
        if request.schema_name == "cycle_judge":
            block = json.loads(request.last_user.rsplit("```json", 1)[1].rsplit("```", 1)[0])
            score = 90 if "A-1042" in block["output"] else 50
            return Reply(json={"verdicts": {c["id"]: {"reasoning": "ok", "score": score}
                                            for c in block["criteria"]}}, input_tokens=200,
                         output_tokens=30)
        order = request.last_user.split("Order: ")[1].split()[0]
        return Reply(text=f"Hi, your order {order} ships today.", input_tokens=50, output_tokens=10)

    with LoopbackServer(responder=responder) as srv:
        cfg = project(tmp_path, """
            criteria:
              - id: accuracy
              - id: tone
                rubric: Polite.
            agent: openai:gpt-4o-mini
        """, f"providers:\n  openai: {{base_url: '{srv.openai_base_url}'}}\n")
        first = json.loads(invoke(tmp_path, "run", cfg, "-n", "2", "--json").output)
        second = json.loads(invoke(tmp_path, "run", cfg, "-n", "2", "--json").output)
    assert first["exit_code"] == 1  # "refund" scored 50
    usage = first["summary"]["usage"]
    assert usage["agent"]["calls"] == 4 and usage["judge"]["calls"] == 4
    assert usage["judge"]["input_tokens"] == 800 and usage["agent"]["output_tokens"] == 40
    assert first["summary"]["cost"] > 0
    cases = {c["id"]: c for c in first["cases"]}
    assert cases["late"]["mean"] == 90 and cases["refund"]["mean"] == 50
    r = invoke(tmp_path, "compare", first["run_id"], second["run_id"], "--json")
    assert r.exit_code == 0, r.output
    cmp = json.loads(r.output)
    assert cmp["score"]["delta"]["mean"] == 0 and cmp["regressed"] == []
    text = invoke(tmp_path, "compare", first["run_id"], second["run_id"]).output
    assert "No case changed" in text


def test_unknown_run_in_compare_is_an_input_error(tmp_path):
    cfg = project(tmp_path, "criteria:\n  - {id: x, check: {type: regex, pattern: .}}\n")
    invoke(tmp_path, "run", cfg, "-q")
    r = invoke(tmp_path, "compare", "run-nope", "run-nope2")
    assert r.exit_code == 2 and "no run 'run-nope'" in r.output
