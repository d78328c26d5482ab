"""User code of two projects in one process: a module beside each cycle.yaml with the
same name (``checks.py``, a package ``rules/``) is each project's own, never the first
one imported under that name."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.imports import import_object, module_at


def _project(folder: Path, passes: bool) -> Path:
    """A project whose python checks (one of cycle.yaml, one of a case) say ``passes``,
    from ``checks.py`` and the package ``rules`` beside its cycle.yaml."""
    folder.mkdir()
    (folder / "checks.py").write_text(f"def verdict(ctx):\n    return {passes}\n")
    (folder / "rules").mkdir()
    (folder / "rules" / "__init__.py").write_text("")
    (folder / "rules" / "case.py").write_text("from .say import said\n\ndef verdict(ctx):\n"
                                              "    return said()\n")
    (folder / "rules" / "say.py").write_text(f"def said():\n    return {passes}\n")
    return _checked_project(folder, textwrap.dedent("""\
        - id: one
          input: {q: hi}
          criteria: [{id: own, check: {type: python, function: 'rules.case:verdict'}}]
        """))


def _checked_project(folder: Path, cases: str) -> Path:
    """The rest of a project judged by its checks.py's ``verdict``: its cycle.yaml."""
    (folder / "p.yaml").write_text("id: p\nsystem: Answer.\nuser_template: '{{ q }}'\n")
    (folder / "cases.yaml").write_text(cases)
    (folder / "cycle.yaml").write_text(textwrap.dedent("""\
        prompt: p.yaml
        agent: offline:default
        criteria: [{id: suite, check: {type: python, function: 'checks:verdict'}}]
        cases: [cases.yaml]
        """))
    return folder / "cycle.yaml"


def test_two_projects_checks_modules_of_one_name_give_each_its_own_verdicts(tmp_path):
    configs = [_project(tmp_path / name, passes)
               for name, passes in (("a", True), ("b", False), ("c", True))]
    # the mean of both checks': 50 when one is another project's
    assert means_of_runs(configs) == [100, 0, 100]


def test_a_file_is_one_module_a_process_and_another_of_its_name_another(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "checks.py").write_text(f"WHO = {name!r}\n")
    a, b = (module_at(tmp_path / n / "checks.py") for n in ("a", "b"))
    assert (a.WHO, b.WHO) == ("a", "b") and a.__name__ != b.__name__
    assert module_at(tmp_path / "a" / "checks.py") is a
    assert import_object("checks:WHO", what="x", project=(tmp_path / "b").resolve()) == "b"


def test_a_projects_module_imported_by_its_name_is_the_one_its_checks_use(tmp_path,
                                                                          monkeypatch):
    """The project's agent imports ``app`` by its name, its check ``app:judge``: one
    module (its state, its setup run once), not a second copy made for the check."""
    (tmp_path / "app.py").write_text("RUNS = []\nRUNS.append(1)\n")
    monkeypatch.syspath_prepend(str(tmp_path.resolve()))
    try:
        plain = import_object("app:RUNS", what="agent.function")
        assert import_object("app:RUNS", what="check.function",
                             project=tmp_path.resolve()) is plain
        assert plain == [1]
    finally:
        sys.modules.pop("app", None)


def _neighbours(folder: Path, says: bool) -> Path:
    """A project whose ``checks.py`` imports a file beside it by its plain name, at load
    and inside the check (called later, at every case), as a package too."""
    folder.mkdir()
    (folder / "helpers.py").write_text(f"import json\n\ndef said():\n    return {says}\n")
    (folder / "later.py").write_text(f"SAYS = {says}\n")
    (folder / "kit").mkdir()
    (folder / "kit" / "__init__.py").write_text("")
    (folder / "kit" / "tool.py").write_text(f"import later\n\nSAYS = later.SAYS and {says}\n")
    (folder / "checks.py").write_text(textwrap.dedent("""\
        import helpers
        import kit.tool
        from helpers import said


        def verdict(ctx):
            import later
            return said() and helpers.said() and later.SAYS and kit.tool.SAYS
        """))
    return _checked_project(folder, "- id: one\n  input: {q: hi}\n")


def means_of_runs(configs: list[Path]) -> list[float]:
    """``cycle run`` of each project in turn, in this one process (a store beside each):
    its one case's mean score."""
    means = []
    for cfg in configs:
        r = CliRunner().invoke(cli, ["--store", str(cfg.parent / "s.db"), "run", str(cfg),
                                     "-n", "1", "--json", "--no-reports"])
        assert r.exit_code in (0, 1), r.output
        (case,) = json.loads(r.output)["cases"]
        means.append(case["mean"])
    return means


def test_two_projects_checks_importing_a_neighbour_by_its_name_each_get_their_own(tmp_path):
    """``import helpers`` in a project's checks.py went through ``sys.path`` and
    ``sys.modules``: the second project's checks used the first one's ``helpers``."""
    configs = [_neighbours(tmp_path / name, says)
               for name, says in (("a", True), ("b", False), ("c", True))]
    assert means_of_runs(configs) == [100, 0, 100]
    assert "helpers" not in sys.modules and "later" not in sys.modules


def test_a_neighbour_is_one_module_a_folder_and_installed_modules_import_as_always(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "helpers.py").write_text(f"WHO = {name!r}\n")
        (tmp_path / name / "checks.py").write_text(
            "import helpers\nimport json\nimport click\nfrom . import helpers as same\n"
            "WHO = helpers.WHO\nJSON = json\nCLICK = click\nSAME = same is helpers\n")
    a, b = (module_at(tmp_path / n / "checks.py") for n in ("a", "b"))
    assert (a.WHO, b.WHO) == ("a", "b") and a.SAME and b.SAME
    assert a.JSON is json and b.CLICK is sys.modules["click"]
    assert import_object("helpers:WHO", what="x", project=(tmp_path / "b").resolve()) == "b"
    assert import_object("checks:helpers", what="x",
                         project=(tmp_path / "a").resolve()) is a.helpers


def test_a_missing_file_is_named_with_the_fix(tmp_path):
    with pytest.raises(ImportError, match=r"no file .*gone\.py: write it"):
        module_at(tmp_path / "gone.py")


def test_two_projects_mock_functions_of_one_name_each_answer_their_own(tmp_path):
    """A mock's ``function: 'mocks:lookup'`` read for a project (its cycle.yaml or case
    files) imports that project's ``mocks.py``, not another project's of the name."""
    from cycle.agents.tools import import_callable
    from cycle.mocks import MockSpec

    answers = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "mocks.py").write_text(f"def lookup(args, ctx):\n    return {name!r}\n")
        spec = MockSpec.model_validate({"function": "mocks:lookup"},
                                       context={"project": (tmp_path / name).resolve()})
        answers.append(import_callable(spec.function or "", what="m", project=spec.project)({}, None))
    assert answers == ["a", "b"] and "mocks" not in sys.modules
