"""What a user gets from `pip install .` (a wheel, not the editable checkout the other
tests import): every file the package reads at run time is in the wheel, its entry points
and version are the ones the CLI reports, and a build in a clone leaves nothing `git
status` shows. The wheel is built once per session from a copy of the sources (setuptools
builds in the tree: building the checkout itself would leave build/ and *.egg-info in it)."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import cycle

ROOT = Path(__file__).resolve().parents[2]


def _backend_missing(output: str) -> bool:
    """pip could not get the build backend (no index, no network): the machine's limit,
    not the package's."""
    return bool(re.search(r"No matching distribution found for (setuptools|wheel)|"
                          r"Could not find a version that satisfies the requirement "
                          r"(setuptools|wheel)", output))


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for licence in ROOT.glob("LICEN[CS]E*"):
        shutil.copy(licence, src / licence.name)
    shutil.copytree(ROOT / "cycle", src / "cycle",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)]
    try:
        import setuptools
        if int(setuptools.__version__.split(".")[0]) >= 77:
            # the backend is here already: no isolated environment to fetch (fast, offline)
            cmd.insert(4, "--no-build-isolation")
    except ImportError:
        pass
    # an isolated build fetches setuptools from pip's configured index: on a machine with
    # no network, one short try per source rather than pip's retries
    env = {**os.environ, "PIP_RETRIES": "0", "PIP_TIMEOUT": "5",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300,
                          env=env)
    if done.returncode != 0:
        if _backend_missing(done.stdout + done.stderr):
            pytest.skip("pip could not fetch setuptools>=77 to build the wheel here")
        pytest.fail(f"pip wheel failed:\n{done.stdout}\n{done.stderr}")
    (built,) = out.glob("cycle-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_holds_every_file_of_the_package(wheel):
    # the TUI's stylesheet and the HTML report's template are read beside their modules:
    # a glob in [tool.setuptools.package-data] that missed one breaks only installed copies
    source = {p.relative_to(ROOT).as_posix() for p in (ROOT / "cycle").rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    shipped = {n for n in wheel.namelist() if n.startswith("cycle/")}
    assert source - shipped == set(), "in the sources, not in the wheel"
    assert {"cycle/tui/app.tcss", "cycle/report/templates/cycle.html.j2"} <= shipped


def test_the_wheel_names_the_version_and_entry_points_the_cli_uses(wheel):
    (info,) = {n.split("/")[0] for n in wheel.namelist() if n.endswith(".dist-info/METADATA")}
    metadata = wheel.read(f"{info}/METADATA").decode()
    assert re.search(rf"^Version: {re.escape(cycle.__version__)}$", metadata, re.MULTILINE), \
        "cycle --version and pip show cycle disagree"
    points = configparser.ConfigParser()
    points.read_string(wheel.read(f"{info}/entry_points.txt").decode())
    assert points["console_scripts"]["cycle"] == "cycle.cli:main"
    assert set(points["cycle.providers"]) == {"offline", "scripted"}
    assert points["pytest11"]["cycle"] == "cycle.pytest_plugin"
    # nothing of the repository's own (tests, benchmarks, examples) is installed
    assert {n.split("/")[0] for n in wheel.namelist()} == {"cycle", info}


def test_the_wheel_carries_the_licence_its_metadata_names(wheel):
    # pyproject said MIT with no licence text in the repository: the wheel carried none
    (info,) = {n.split("/")[0] for n in wheel.namelist() if n.endswith(".dist-info/METADATA")}
    metadata = wheel.read(f"{info}/METADATA").decode()
    assert re.search(r"^License-Expression: MIT$", metadata, re.MULTILINE)
    text = wheel.read(f"{info}/licenses/LICENSE").decode()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text


def test_a_build_in_a_clone_leaves_nothing_git_shows():
    # `pip install .` in a clone wrote build/ (untracked, shown by git status) and, once,
    # a downloaded wheel was committed at the root by `git add -A`
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = ["build/lib/cycle/__init__.py", "dist/cycle-0.1.0-py3-none-any.whl",
             "cycle.egg-info/PKG-INFO", "fastjsonschema-2.22.3-py3-none-any.whl"]
    done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", *paths],
                          check=False, capture_output=True, text=True)
    assert set(done.stdout.split()) == set(paths)
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "*.whl"],
                             check=True, capture_output=True, text=True).stdout.split()
    assert tracked == []
