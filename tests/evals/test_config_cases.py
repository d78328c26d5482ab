"""cycle.yaml and case files: defaults, and errors that name file:line (field)."""

import textwrap

import pytest

from cycle.assemble.config import load_config
from cycle.cases import load_cases, select
from cycle.errors import ConfigError


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_minimal_config_gets_expected_defaults(tmp_path):
    cfg = write(tmp_path / "cycle.yaml", """
        prompt: prompts/p.yaml
        criteria:
          - id: accuracy
    """)
    loaded = load_config(cfg)
    c = loaded.config
    assert (c.pass_threshold, c.cases, c.run.iterations, c.run.concurrency, c.run.timeout) == (
        70, ["cases/*.yaml"], 3, 8, 120)
    assert c.judge is None and c.agent is None and loaded.base_dir == tmp_path


def test_unknown_key_names_key_file_and_line(tmp_path):
    cfg = write(tmp_path / "cycle.yaml", """
        prompt: p.yaml
        criteria:
          - id: accuracy
        run:
          iterations: 2
          concurency: 4
    """)
    with pytest.raises(ConfigError) as e:
        load_config(cfg)
    msg = str(e.value)
    assert f"{cfg}:6" in msg and "run.concurency" in msg and "unknown key 'concurency'" in msg
    assert "Did you mean 'concurrency'" in msg


def test_bad_value_in_a_check_names_its_line(tmp_path):
    cfg = write(tmp_path / "cycle.yaml", """
        prompt: p.yaml
        criteria:
          - id: fast
            check: {type: max_latency, seconds: -1}
    """)
    with pytest.raises(ConfigError) as e:
        load_config(cfg)
    assert f"{cfg}:4" in str(e.value) and "criteria[0].check.seconds" in str(e.value)


def test_incomplete_and_duplicate_criteria(tmp_path):
    cfg = write(tmp_path / "cycle.yaml", """
        prompt: p.yaml
        criteria:
          - id: accuracy
          - id: vibes
    """)
    with pytest.raises(ConfigError, match=r"cycle.yaml:4 .*neither a check nor an LLM"):
        load_config(cfg)
    write(cfg, """
        prompt: p.yaml
        criteria:
          - id: accuracy
          - id: accuracy
    """)
    with pytest.raises(ConfigError, match="used twice"):
        load_config(cfg)


def test_case_files_list_or_mapping_and_string_input(tmp_path):
    write(tmp_path / "cases" / "a.yaml", """
        - id: one
          input: {order: A-1}
          tags: [x]
        - id: two
          input: plain message
    """)
    write(tmp_path / "cases" / "b.yaml", """
        cases:
          - id: three
            input: {order: B}
            expected: ok
    """)
    cases = load_cases(["cases/*.yaml"], tmp_path)
    assert [c.id for c in cases] == ["one", "two", "three"]
    assert cases[1].variables["input"] == "plain message"
    assert cases[0].variables["order"] == "A-1"
    assert [c.id for c in select(cases, tags=["x"])] == ["one"]
    with pytest.raises(ConfigError, match="no case with id 'nope'"):
        select(cases, ids=["nope"])


def test_case_errors_name_file_line_field(tmp_path):
    f = write(tmp_path / "cases" / "a.yaml", """
        - id: one
          input: {order: A-1}
        - id: two
          inputs: {order: B}
    """)
    with pytest.raises(ConfigError) as e:
        load_cases(["cases/*.yaml"], tmp_path)
    assert f"{f}:4" in str(e.value) and "cases[1].inputs" in str(e.value)


def test_duplicate_case_ids_across_files(tmp_path):
    write(tmp_path / "cases" / "a.yaml", "- {id: same, input: x}\n")
    write(tmp_path / "cases" / "b.yaml", "- {id: same, input: y}\n")
    with pytest.raises(ConfigError, match="duplicate case id 'same'"):
        load_cases(["cases/*.yaml"], tmp_path)


def test_yaml_syntax_error_has_a_line(tmp_path):
    f = write(tmp_path / "cases" / "a.yaml", "- id: one\n  input: [unclosed\n")
    with pytest.raises(ConfigError) as e:
        load_cases([str(f)], tmp_path)
    assert e.value.line is not None and "not valid YAML" in str(e.value)


def test_no_matching_case_files(tmp_path):
    with pytest.raises(ConfigError, match="no case files match"):
        load_cases(["cases/*.yaml"], tmp_path)
