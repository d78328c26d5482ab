"""Few-shot examples in prompt files, through the real CLI on a real store file: imported,
shown, exported byte for byte, diffed per example, rolled back; a malformed entry is one
clear error naming the file, the line and the field; a prompt without examples keeps the
hash and cache keys it always had."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.agents.agent import prompt_messages
from cycle.cases import TestCase
from cycle.cli import cli
from cycle.llm.base import GenerateConfig
from cycle.llm.cache import cache_key
from cycle.prompts.files import load_prompt_file
from cycle.store import Store

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART_PROMPT = ROOT / "examples" / "quickstart" / "prompts" / "support-reply.yaml"

WITH_EXAMPLES = """\
id: support-reply
system: |
  You are a support agent. Answer the customer's question.
user_template: |
  Customer: {{ customer }}
  Question: {{ question }}
examples:
- input:
    customer: Ann
    question: Where is my parcel?
  output: |
    Hi Ann,
    your parcel arrives tomorrow.
  source: late-delivery
- input:
    customer: Bo
    question: Can I get a refund?
  output: Hi Bo, your refund is on its way.
"""


@pytest.fixture
def run(tmp_path: Path):
    store = tmp_path / "s" / "cycle.db"

    def invoke(*args: str, code: int = 0):
        result = CliRunner().invoke(cli, ["--store", str(store), *args])
        assert result.exit_code == code, result.output
        return result

    invoke.store = store  # type: ignore[attr-defined]
    return invoke


def test_examples_are_stored_shown_exported_exactly_and_diffed(run, tmp_path: Path) -> None:
    path = tmp_path / "support-reply.yaml"
    path.write_text(WITH_EXAMPLES)
    run("prompt", "import", str(path))
    exported = WITH_EXAMPLES.replace("\nsystem:", "\nversion: 1.0.0\nsystem:", 1)
    assert run("prompt", "export", "support-reply").stdout == exported
    shown = run("show", "support-reply").stdout
    assert "source: late-delivery" in shown and "Hi Bo, your refund is on its way." in shown

    # one example changed, one removed, one added: each is its own lines in the diff
    path.write_text(WITH_EXAMPLES.replace("your parcel arrives tomorrow.", "it arrives Monday.")
                    .replace("- input:\n    customer: Bo\n    question: Can I get a refund?\n"
                             "  output: Hi Bo, your refund is on its way.\n",
                             "- input: {customer: Eli, question: My password does not work.}\n"
                             "  output: Use the 'Forgot password' link.\n  source: password-reset\n"))
    run("prompt", "import", str(path))
    diff = run("diff", "support-reply", "1.0.0", "1.0.1", "--lines").stdout
    assert "--- 1.0.0/examples" in diff and "+++ 1.0.1/examples" in diff
    assert "-    your parcel arrives tomorrow." in diff and "+    it arrives Monday." in diff
    assert "-  output: Hi Bo, your refund is on its way." in diff
    assert "+example 2  (from case password-reset)" in diff
    assert '+      "question": "My password does not work."' in diff
    data = json.loads(run("diff", "support-reply", "1.0.0", "1.0.1", "--json").stdout)
    assert data["fields"]["examples"]["changed"] and not data["fields"]["system"]["changed"]

    # rollback returns head to the first examples
    run("rollback", "support-reply", "--to", "1.0.0")
    assert run("prompt", "export", "support-reply").stdout == exported


def test_removing_every_example_is_a_version_whose_diff_shows_them_gone(run, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(WITH_EXAMPLES)
    run("prompt", "import", str(path))
    path.write_text(WITH_EXAMPLES.split("examples:")[0])
    run("prompt", "import", str(path))
    diff = run("diff", "support-reply", "1.0.0", "1.0.1", "--lines").stdout
    assert "-example 1  (from case late-delivery)" in diff and "-example 2" in diff
    assert "examples" not in run("prompt", "export", "support-reply").stdout


def test_a_prompt_without_examples_keeps_its_hash_and_cache_keys() -> None:
    prompt = load_prompt_file(QUICKSTART_PROMPT).prompt
    assert "examples" not in prompt.canonical()
    # the values main computed before examples existed
    assert prompt.content_hash == "6f369bc4bc3d4de330a704661d65b7e8a62f29a4dfe62dedca7de7b81d07cecc"
    case = TestCase(id="late-delivery", input={
        "customer": "Ann", "order": "A-1042",
        "question": "My parcel was due on Monday and still has not arrived. Where is it?"})
    key = cache_key("offline:default", prompt_messages(prompt, case), [],
                    GenerateConfig(temperature=0.2), 0)
    assert key == "021fb0618772409415116bc3aff7bc64274764c7452868a781a722e589f2aab0"


#: the hint of a malformed entry: how an example is written
SHAPE = "- input: Where is my parcel?"


@pytest.mark.parametrize("entry, where, says, hint", [
    ("examples: hello", ":3 (examples)", "valid list", SHAPE),
    ("examples:\n- input: hi", ":4 (examples[0].output)", "required key 'output' is missing",
     SHAPE),
    ("examples:\n- input: hi\n  ouput: hello", ":5 (examples[0].ouput)", "unknown key 'ouput'",
     SHAPE),
    ("examples:\n- {input: hi, output: 3}", ":4 (examples[0].output)", "valid string", SHAPE),
    ("examples:\n- output: hello", ":4 (examples[0].input)", "required key 'input' is missing",
     SHAPE),
    ("examples:\n- {input: {order: A-1}, output: ok}", ":4 (examples[0].input)",
     "'customer' is undefined", "Give the example's input the variables the user template reads"),
])
def test_a_malformed_example_is_one_error_naming_file_line_and_field(
        run, tmp_path: Path, entry: str, where: str, says: str, hint: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"id: bad\nuser_template: 'Customer {{{{ customer }}}}: {{{{ input }}}}'\n{entry}\n")
    out = run("prompt", "import", str(path), code=2).output
    assert f"{path}{where}" in out and says in out and hint in out
    assert "Traceback" not in out
    with Store.open(run.store) as store:
        assert store.list_prompts() == []  # nothing was stored


def test_an_example_input_that_is_text_fills_input_like_a_case(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("id: p\nuser_template: 'Q: {{ input }}'\nexamples:\n"
                    "- {input: Where is it?, output: Here.}\n")
    prompt = load_prompt_file(path).prompt
    messages = prompt_messages(prompt, TestCase(id="c", input="Hello?"))
    assert [(m.role, m.content) for m in messages] == [
        ("user", "Q: Where is it?"), ("assistant", "Here."), ("user", "Q: Hello?")]
