"""`cycle run` and `cycle compare` through the real CLI: reports, exit codes, the openai SDK."""

import json
import os
import textwrap
from pathlib import Path

import pytest
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
    # checks only: no judge was called, and the header says so (it said "judge None")
    assert "(agent offline:default, no judge: checks only)" in r.output
    reports = sorted(p.suffixes[-1] for p in (tmp_path / "reports").iterdir())
    assert reports == [".html", ".json", ".md", ".xml"]
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
        """, f"providers:\n  openai: {{base_url: '{srv.openai_base_url}', "
            "structured: json_schema}\n")
        r = invoke(tmp_path, "run", cfg, "-n", "1", "--json")
        # one agent call and two judge calls (answer + repair) per case (a server known to
        # take json_schema: in auto mode a text answer would first be asked again with the
        # schema in the prompt, cycle.llm.compat)
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


# -- bad input: one message naming file:line (field) and the fix, exit 2, nothing stored --------

CHECK = "criteria:\n  - id: cites\n    check: {type: contains, values: ['{{ order }}']}\n"


def _mutate(tmp_path, name: str) -> None:
    cfg = tmp_path / "cycle.yaml"
    text = cfg.read_text()
    if name == "yaml_syntax":
        cfg.write_text(text + "run: {iterations: [3}\n")
    elif name == "yaml_control_character":
        cfg.write_text(text + "run: {iterations: 1}\n\x00\n")
    elif name == "case_control_character":
        (tmp_path / "cases" / "all.yaml").write_text(CASES.replace("Where is", "Where\x01 is"))
    elif name == "unknown_key":
        cfg.write_text(text + "pass_treshold: 80\n")
    elif name == "wrong_type":
        cfg.write_text(text + "run:\n  iterations: three\n")
    elif name == "duplicate_case":
        (tmp_path / "cases" / "more.yaml").write_text("- {id: late, input: {order: X}}\n")
    elif name == "glob_matches_nothing":
        cfg.write_text(text + "cases: [cases/*.yaml, extra/*.yml]\n")
    elif name == "bad_regex":
        cfg.write_text(text.replace("{type: contains, values: ['{{ order }}']}",
                                    "{type: regex, pattern: 'A-[0-9'}"))
    elif name == "unknown_check":
        cfg.write_text(text.replace("type: contains", "type: containz"))
    elif name == "missing_prompt":
        cfg.write_text(text.replace("prompts/support.yaml", "prompts/nope.yaml"))
    elif name == "python_check_import":
        cfg.write_text(text.replace("{type: contains, values: ['{{ order }}']}",
                                    "{type: python, function: 'nope_pkg.checks:ok'}"))
    elif name == "agent_function_import":
        cfg.write_text(text + "agent: {function: 'nope_pkg.agents:answer'}\n")
    elif name == "agent_function_syntax":
        (tmp_path / "broken_agent_syntax.py").write_text("def answer(case)\n    return 'hi'\n")
        cfg.write_text(text + "agent: {function: 'broken_agent_syntax:answer'}\n")
    elif name == "python_check_raises_on_import":
        (tmp_path / "broken_check_import.py").write_text("x = 1\nraise KeyError('API_URL')\n")
        cfg.write_text(text.replace("{type: contains, values: ['{{ order }}']}",
                                    "{type: python, function: 'broken_check_import:ok'}"))
    elif name == "weight_overflow":
        cfg.write_text(text.replace("  - id: cites\n", "  - id: cites\n    weight: 1.0e+308\n"))
    elif name == "unknown_provider":
        cfg.write_text(text + "agent: foo:bar\n")
    elif name == "agent_http_not_a_url":
        cfg.write_text(text + "agent: {http: 'localhost/chat'}\n")
    elif name == "agent_two_kinds":
        cfg.write_text(text + "agent: {function: 'agents:answer', http: 'http://localhost/chat'}\n")
    elif name == "provider_base_url":
        cfg.write_text(text + "agent: openai:gpt-4o-mini\nproviders: {openai: {base_url: 'localhost:11434'}}\n")
    elif name == "agent_header_variable_unset":
        cfg.write_text(text + "agent:\n  http: 'http://localhost/chat'\n  headers:\n"
                       "    Authorization: 'Bearer ${CYCLE_TEST_UNSET_TOKEN}'\n")
    elif name == "undefined_variable":
        cfg.write_text(text.replace("{type: contains, values: ['{{ order }}']}",
                                    "{type: regex, pattern: '.'}"))
        (tmp_path / "cases" / "all.yaml").write_text(CASES + "- {id: bare, input: {customer: Cy}}\n")
    elif name == "undefined_check_variable":
        (tmp_path / "cases" / "all.yaml").write_text(CASES + "- {id: bare, input: {customer: Cy}}\n")
    elif name == "case_unknown_key":
        (tmp_path / "cases" / "all.yaml").write_text(CASES.replace("  tags: [shipping]", "  tag: [shipping]"))


BAD_INPUTS = {
    # mutation: (file:line (field) in the message, a word of the fix)
    "yaml_syntax": ("cycle.yaml:5", "not valid YAML"),
    # a NUL or a control character was said at "position 1715" of "<unicode string>"
    "yaml_control_character": ("cycle.yaml:6", "control characters are not allowed (U+0000)"),
    "case_control_character": ("all.yaml:4", "control characters are not allowed (U+0001)"),
    "unknown_key": ("cycle.yaml:5 (pass_treshold)", "Did you mean 'pass_threshold'"),
    "wrong_type": ("cycle.yaml:6 (run.iterations)", "Times each case is run"),
    "duplicate_case": ("more.yaml:1 (id)", "duplicate case id 'late'"),
    "glob_matches_nothing": ("cycle.yaml:5 (cases[1])", "no case file matches 'extra/*.yml'"),
    "bad_regex": ("cycle.yaml:4 (criteria[0].check)", "invalid regular expression"),
    "unknown_check": ("cycle.yaml:4 (criteria[0].check)", "Use one of: 'exact'"),
    "missing_prompt": ("cycle.yaml:1 (prompt)", "relative to cycle.yaml"),
    "python_check_import": ("cycle.yaml:4 (criteria[0].check.function)", "nope_pkg"),
    "agent_function_import": ("cycle.yaml:5 (agent.function)", "nope_pkg"),
    # user code that does not compile, or raises as it loads, was an internal error (exit 4)
    "agent_function_syntax": ("cycle.yaml:5 (agent.function)", "broken_agent_syntax.py, line 1)"),
    "python_check_raises_on_import": ("cycle.yaml:4 (criteria[0].check.function)",
                                      "raised KeyError: 'API_URL' ("),
    "unknown_provider": ("cycle.yaml:5 (agent)", "unknown model provider 'foo'"),
    # overflowed the weighted mean to nan: a run of nan scores, then an internal error
    "weight_overflow": ("cycle.yaml:4 (criteria[0].weight)", "less than or equal to 1000000"),
    # an agent section's own error was hidden behind "Input should be a valid string"
    # (agent: str | a section): its str member's error came first
    "agent_two_kinds": ("cycle.yaml:5 (agent)", "give one of model, function, http and adk"),
    # an address that is no URL failed every case (a provider's: retried 5 times a call)
    "agent_http_not_a_url": ("cycle.yaml:5 (agent.http)", "is not an http(s) URL"),
    "provider_base_url": ("cycle.yaml:6 (providers.openai.base_url)", "http://localhost:11434/v1"),
    # an unset ${NAME} was sent as an empty string, and every case failed on the 401
    "agent_header_variable_unset": ("cycle.yaml:8 (agent.headers.Authorization)",
                                    "Set CYCLE_TEST_UNSET_TOKEN in the environment"),
    "undefined_variable": ("all.yaml:7 (input)", "'order' is undefined"),
    "undefined_check_variable": ("cycle.yaml:4 (criteria[0].check.values)", "case 'bare'"),
    "case_unknown_key": ("all.yaml:3 (cases[0].tag)", "Did you mean 'tags'"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_one_located_message_exit_2_and_nothing_stored(tmp_path, name):
    cfg = project(tmp_path, CHECK)
    _mutate(tmp_path, name)
    r = invoke(tmp_path, "run", cfg)
    where, fix = BAD_INPUTS[name]
    assert r.exit_code == 2, r.output
    assert where in r.output and fix in r.output, r.output
    assert "Traceback" not in r.output and r.output.startswith("error: ")
    # validated before the store (or the cache) was opened: nothing was written
    assert not (tmp_path / "store.db").exists()
    assert not (tmp_path / ".cycle").exists() and not (tmp_path / "reports").exists()


@pytest.mark.parametrize("content", [b"not a cache\n" * 200, b"SQLite format 3\x00" + b"\x00" * 90],
                         ids=["text", "damaged"])
def test_a_cache_file_that_is_not_a_cache_is_an_input_error_and_left_alone(tmp_path, content):
    """A damaged .cycle/cache.db was an internal error ("DatabaseError: file is not a
    database", exit 4) naming neither the file nor the fix."""
    cfg = project(tmp_path, CHECK)
    cache = tmp_path / ".cycle" / "cache.db"
    cache.parent.mkdir()
    cache.write_bytes(content)
    r = invoke(tmp_path, "run", cfg)
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {cache}: cannot use the response cache")
    assert "--no-cache" in r.output and "Traceback" not in r.output
    assert cache.read_bytes() == content  # said, never rewritten
    assert invoke(tmp_path, "runs").output.startswith("No runs")  # and no run was begun
    assert invoke(tmp_path, "run", cfg, "--no-cache", "-q").exit_code in (0, 1)  # the fix given


def test_a_store_that_is_a_folder_names_the_setting_that_named_it(tmp_path, monkeypatch):
    """The message blamed --store / CYCLE_STORE for a store named by cycle.yaml's store:,
    or left at its default, though neither was given."""
    monkeypatch.delenv("CYCLE_STORE", raising=False)
    cfg = project(tmp_path, CHECK)
    (tmp_path / ".cycle" / "cycle.db").mkdir(parents=True)
    r = CliRunner().invoke(cli, ["run", cfg])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {cfg} (store (the default)): the store ")
    (tmp_path / "cycle.yaml").write_text(Path(cfg).read_text() + "store: data\n")
    (tmp_path / "data").mkdir()
    r = CliRunner().invoke(cli, ["run", cfg])
    assert r.exit_code == 2 and r.output.startswith(f"error: {cfg}:5 (store): the store "), r.output
    monkeypatch.setenv("CYCLE_STORE", str(tmp_path / "data"))
    r = CliRunner().invoke(cli, ["run", cfg])
    assert r.exit_code == 2 and r.output.startswith("error: --store / CYCLE_STORE: "), r.output


def test_ctrl_c_says_the_run_is_saved_and_the_command_that_resumes_it(tmp_path):
    """Ctrl-C during cycle run printed click's bare "Aborted.": nothing said that what had
    finished was stored, nor how to resume (cycle improve said both). The second case's
    agent call is interrupted here, as a Ctrl-C does."""
    (tmp_path / "ctrl_c_agent.py").write_text(
        "def answer(case):\n"
        "    if case['order'] == 'B-2210':\n"
        "        raise KeyboardInterrupt\n"
        "    return 'Your order ' + case['order'] + ' is on its way.'\n")
    cfg = project(tmp_path, CHECK, "agent: {function: 'ctrl_c_agent:answer'}\n"
                  "run: {iterations: 1, concurrency: 1}\n")
    r = invoke(tmp_path, "run", cfg, "--no-reports")
    assert r.exit_code == 130, r.output
    [line] = [x for x in r.output.splitlines() if x.startswith("Interrupted")]
    run_id = line.rsplit(" ", 1)[-1]
    assert line == f"Interrupted; the run is saved. Resume with: cycle run {cfg} --resume {run_id}"
    shown = invoke(tmp_path, "runs", "show", run_id)
    assert f"Run interrupted: resume with: cycle run {cfg} --resume {run_id}" in shown.output


def test_a_run_resumes_only_on_the_prompt_version_and_judging_it_started_with(tmp_path):
    """Interrupted, then resumed after the prompt file was edited, a run went on with the
    new version: one run held the answers of two versions (stored as the first, shown as
    the second); and after a pass_threshold edit, it judged its cases two ways."""
    (tmp_path / "stop_agent.py").write_text(
        "import os\n"
        "def answer(case):\n"
        f"    if case['order'] == 'B-2210' and os.path.exists({str(tmp_path / 'stop-here')!r}):\n"
        "        raise KeyboardInterrupt\n"
        "    return 'Your order ' + case['order'] + ' is on its way.'\n")
    cfg = project(tmp_path, CHECK, "agent: {function: 'stop_agent:answer'}\n"
                  "run: {iterations: 1, concurrency: 1}\n")
    (tmp_path / "stop-here").touch()
    first = invoke(tmp_path, "run", cfg, "--no-reports", "--json")
    assert first.exit_code == 130, first.output
    run_id = first.output.rsplit(" ", 1)[-1].strip()
    (tmp_path / "stop-here").unlink()
    prompt = tmp_path / "prompts" / "support.yaml"
    original = prompt.read_text()
    prompt.write_text(original.replace("Answer the customer's question.", "Be brief."))
    refused = invoke(tmp_path, "run", cfg, "--resume", run_id, "--no-reports")
    assert refused.exit_code == 2, refused.output
    assert (f"run {run_id} was started on support@1.0.0, but prompts/support.yaml now gives "
            "support@1.0.1: resuming it would mix two versions in one run") in refused.output
    assert "cycle prompt export support@1.0.0 --write prompts/support.yaml" in refused.output
    prompt.write_text(original)  # the fix it gives
    # so with the judging: a pass_threshold edited in between judged the run two ways
    config = Path(cfg).read_text()
    Path(cfg).write_text(config + "pass_threshold: 10\n")
    refused = invoke(tmp_path, "run", cfg, "--resume", run_id, "--no-reports")
    assert refused.exit_code == 2, refused.output
    assert (f"run {run_id} was judged with other pass_threshold than {cfg} gives now"
            in refused.output)
    Path(cfg).write_text(config)
    # and with the cases: a judged case edited in between would be two cases in one run
    cases = tmp_path / "cases" / "all.yaml"
    cases.write_text(CASES.replace("Where is my parcel?", "Where is my order?"))
    refused = invoke(tmp_path, "run", cfg, "--resume", run_id, "--no-reports")
    assert refused.exit_code == 2, refused.output
    assert (f"case 'late' of run {run_id} has another input than when the run judged it"
            in refused.output)
    cases.write_text(CASES)
    resumed = invoke(tmp_path, "run", cfg, "--resume", run_id, "--no-reports", "--json")
    assert resumed.exit_code in (0, 1), resumed.output
    assert json.loads(resumed.output)["version"] == "1.0.0"


def test_a_stored_prompt_the_store_does_not_hold_is_named_at_its_line(tmp_path):
    """prompt: store:ID@label naming no stored prompt (or no such label) said only
    "unknown prompt 'support'": neither the line of cycle.yaml nor the store looked in."""
    cfg = project(tmp_path, CHECK)
    Path(cfg).write_text(Path(cfg).read_text().replace("prompts/support.yaml",
                                                       "store:support@staging"))
    store = tmp_path / "store.db"
    r = invoke(tmp_path, "run", cfg)
    # no store at all: said, and none made (an empty one was, then the prompt refused)
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {cfg}:1 (prompt): the prompt is store:support@staging, "
                               f"but there is no store at {store}"), r.output
    assert not store.exists()
    from cycle.store import Store

    Store.open(store).close()
    r = invoke(tmp_path, "run", cfg)
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {cfg}:1 (prompt): unknown prompt 'support' in the "
                               f"store {store}"), r.output
    assert "cycle prompt import" in r.output
    assert invoke(tmp_path, "prompt", "import", str(tmp_path / "prompts" / "support.yaml")
                  ).exit_code == 0
    r = invoke(tmp_path, "run", cfg)
    assert r.exit_code == 2 and "no version or label 'staging' in the store" in r.output


def test_quiet_prints_nothing_and_json_prints_only_json(tmp_path):
    cfg = project(tmp_path, "criteria:\n  - {id: polite, check: {type: not_contains, values: [stupid]}}\n")
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", cfg, "-q", "-n", "1"])
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == ""
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", cfg, "--json", "-n", "2"])
    assert r.exit_code == 0 and r.stderr == ""  # no progress bar in the way of a script
    data = json.loads(r.stdout)
    assert data["summary"]["cases"] == 2 and data["summary"]["iterations"] == 4
    assert set(data["reports"]) == {"markdown", "json", "junit", "html"}


# -- the HTTP agent, against a loopback server made here ------------------------------------------

def test_http_agent_posts_the_message_and_reads_response_and_tool_calls(tmp_path):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # http.server's name for the handler
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"body": body, "auth": self.headers.get("Authorization")})
            if body["input"]["order"] == "B-2210":
                self.send_response(500)
                self.end_headers()
                self.wfile.write(b"agent crashed")
                return
            answer = {"response": f"Order {body['input']['order']} is on its way.",
                      "toolCalls": [{"name": "track", "arguments": {"order": body["input"]["order"]}}]}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # keep the test output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/chat"
        cfg = project(tmp_path, CHECK, f"agent:\n  http: {url}\n  headers: {{Authorization: 'Bearer ${{AGENT_TOKEN}}'}}\n")
        os.environ["AGENT_TOKEN"] = "t0ken"
        try:
            r = invoke(tmp_path, "run", cfg, "-n", "1", "--json")
        finally:
            del os.environ["AGENT_TOKEN"]
    finally:
        server.shutdown()
        server.server_close()
    # the case that got a 500 is an error (exit 3), never a zero score
    assert r.exit_code == 3, r.output
    data = json.loads(r.stdout)
    cases = {c["id"]: c for c in data["cases"]}
    assert cases["late"]["status"] == "passed" and cases["late"]["mean"] == 100
    assert cases["refund"]["status"] == "error" and cases["refund"]["mean"] is None
    # the message is the prompt's user template rendered with the case's input
    late = next(s for s in seen if s["body"]["input"]["order"] == "A-1042")
    assert "Order: A-1042" in late["body"]["message"] and late["auth"] == "Bearer t0ken"
    report = json.loads(next((tmp_path / "reports").glob("*.json")).read_text())
    rep_late = next(c for c in report["cases"] if c["id"] == "late")
    assert rep_late["results"][0]["tool_calls"][0]["name"] == "track"
    assert rep_late["results"][0]["output"] == "Order A-1042 is on its way."
    rep_refund = next(c for c in report["cases"] if c["id"] == "refund")
    assert "HTTP 500" in rep_refund["results"][0]["error"]
    assert report["models"]["agent"] == url and report["offline"] is False


def test_the_command_tunes_its_own_collector_but_never_a_callers(tmp_path):
    import gc
    import subprocess
    import sys

    cfg = project(tmp_path, """
        criteria:
          - id: no_guarantees
            check: {type: not_contains, values: [guarantee]}
    """)
    before = (gc.get_threshold(), gc.get_freeze_count())
    assert invoke(tmp_path, "run", cfg, "-q").exit_code == 0
    assert (gc.get_threshold(), gc.get_freeze_count()) == before  # in a caller's process: untouched
    gc.disable()  # a caller that turned its collector off keeps it off
    try:
        assert invoke(tmp_path, "runs").exit_code == 0
        assert not gc.isenabled()
    finally:
        gc.enable()

    # the `cycle` command owns its process: what loading left alive is frozen, young
    # collections are rarer (cycle.heap.settle)
    probe = ("import atexit, gc, sys\n"
             "atexit.register(lambda: print('GC', gc.get_threshold()[0], gc.get_freeze_count() > 10000,"
             " file=sys.stderr))\n"
             f"sys.argv = ['cycle', '--store', {str(tmp_path / 's.db')!r}, 'run', {cfg!r}, '-q']\n"
             "from cycle.cli import main\nmain()\n")
    done = subprocess.run([sys.executable, "-c", probe], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "GC 10000 True" in done.stderr


@pytest.mark.parametrize("flag", [["--budget", "nan"], ["--budget", "inf"], ["--budget", "-1"],
                                  ["--timeout", "nan"], ["--timeout", "inf"]])
def test_a_number_that_is_not_finite_is_refused_before_anything_runs(tmp_path, flag):
    config = project(tmp_path, "criteria: [{id: x, check: {type: contains, values: [a]}}]\n"
                               "cases: [cases/*.yaml]\n")
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", config, *flag])
    assert r.exit_code == 2 and flag[0] in r.output, r.output
    assert not (tmp_path / "s.db").exists()  # nothing was written, nothing was paid


def test_a_check_key_or_type_typo_gets_the_right_did_you_mean(quickstart):
    """Issue 33: ``type: contain`` got no did-you-mean, and ``value:`` on a contains check
    said "Did you mean 'value'?" and listed every check type's keys."""
    config = quickstart / "cycle.yaml"
    good = config.read_text()
    assert 'check: {type: contains, values: ["{{ order }}"]}' in good
    config.write_text(good.replace('{type: contains, values: ["{{ order }}"]}',
                                   '{type: contains, value: "{{ order }}"}'))
    key = CliRunner().invoke(cli, ["run", "cycle.yaml"])
    assert key.exit_code == 2 and "Did you mean 'values'?" in key.output
    assert "Allowed here: values, case_sensitive, type." in key.output
    config.write_text(good.replace("type: contains,", "type: contain,"))
    tag = CliRunner().invoke(cli, ["run", "cycle.yaml"])
    assert tag.exit_code == 2 and "Did you mean 'contains'?" in tag.output


def test_reports_formats_choose_the_reports_written(tmp_path):
    """`reports: {dir, formats}`: a CI job that wants only JUnit gets only JUnit, in the
    folder it names; a cycle writes those of them it has."""
    cfg = project(tmp_path, """
        criteria:
          - id: no_guarantees
            check: {type: not_contains, values: [guarantee]}
        reports: {dir: out/ci, formats: [junit]}
        improve: {stop: {max_rounds: 1}}
    """)
    r = invoke(tmp_path, "run", cfg)
    assert r.exit_code == 0, r.output
    assert [p.name.split(".", 1)[1] for p in (tmp_path / "out" / "ci").iterdir()] == ["junit.xml"]
    assert not (tmp_path / "reports").exists()

    Path(cfg).write_text(Path(cfg).read_text().replace("[junit]", "[json, markdown]"))
    r = invoke(tmp_path, "improve", cfg, "--headless", "--yes")
    assert r.exit_code == 0, r.output
    cycle_files = {p.suffix for p in (tmp_path / "out" / "ci").glob("c-*")}
    assert cycle_files == {".json", ".md"}


def test_an_unknown_report_format_is_refused_before_any_call(tmp_path):
    cfg = project(tmp_path, """
        criteria:
          - id: no_guarantees
            check: {type: not_contains, values: [guarantee]}
        reports:
          formats: [junit, pdf]
    """)
    for command in (["run", cfg], ["improve", cfg, "--headless", "--yes"]):
        r = invoke(tmp_path, *command)
        assert r.exit_code == 2, r.output
        assert "cycle.yaml:7 (reports.formats): unknown report format 'pdf'" in r.output
        assert "Known formats: markdown, json, junit, html" in r.output
    assert not (tmp_path / "store.db").exists()


def test_run_writes_its_reports_while_it_runs_and_they_are_the_stored_runs(tmp_path,
                                                                          monkeypatch):
    """`cycle run` writes each case's text in its reports as the case is stored
    (cycle.report.ahead): at the end only the heads are left, and the files are those
    `cycle report` writes of the stored run (the Markdown and JUnit ones carry no time of
    the end, which the run knows to the microsecond and its stored row a moment later)."""
    from cycle.report.ahead import ReportsAhead

    finished = []
    pieces = ReportsAhead.pieces

    def spied(self, name, result):
        finished.append((name, self.written))
        yield from pieces(self, name, result)

    monkeypatch.setattr(ReportsAhead, "pieces", spied)
    cfg = project(tmp_path, """
        criteria:
          - id: no_parcel
            check: {type: not_contains, values: [parcel]}
        run: {iterations: 2}
    """)
    r = invoke(tmp_path, "run", cfg)
    assert r.exit_code in (0, 1), r.output
    # every case was written before the end: the end wrote the four reports from them
    assert finished == [("markdown", 2), ("json", 2), ("junit", 2), ("html", 2)]
    run_id = next((tmp_path / "reports").glob("*.md")).stem
    again = invoke(tmp_path, "report", run_id, "--report-dir", str(tmp_path / "again"))
    assert again.exit_code == 0, again.output
    for suffix in (".md", ".junit.xml"):
        assert (tmp_path / "reports" / f"{run_id}{suffix}").read_bytes() == \
            (tmp_path / "again" / f"{run_id}{suffix}").read_bytes(), suffix


def test_an_http_agent_header_reading_an_unset_variable_is_refused_before_any_call(tmp_path,
                                                                                  monkeypatch):
    # found walking docs/agents-and-tools.md: ${NAME} unset went out as "Bearer " on every
    # POST, each case then failing on the endpoint's 401
    monkeypatch.delenv("AGENT_TOKEN", raising=False)
    cfg = project(tmp_path, CHECK, "agent:\n  http: http://127.0.0.1:9/chat\n"
                  "  headers: {Authorization: 'Bearer ${AGENT_TOKEN}'}\n")
    r = invoke(tmp_path, "run", cfg, "-n", "1")
    assert r.exit_code == 2, r.output
    assert "cycle.yaml:7 (agent.headers.Authorization)" in r.output
    assert "reads ${AGENT_TOKEN}, which is not set" in r.output and "Set AGENT_TOKEN" in r.output
    assert not (tmp_path / "reports").exists()


def test_a_misspelt_provider_is_refused_not_ignored(tmp_path):
    # providers: {opnai: {base_url: ...}} was ignored with its base_url: the calls meant
    # for a local server would have gone to OpenAI's own, paid
    cfg = project(tmp_path, CHECK, "providers:\n  opnai: {base_url: 'http://localhost:8080/v1'}\n")
    r = invoke(tmp_path, "run", cfg)
    assert r.exit_code == 2, r.output
    assert "cycle.yaml:5 (providers): providers.opnai: there is no provider 'opnai'; did you " \
           "mean 'openai'?" in r.output
    assert not (tmp_path / "store.db").exists()
