"""A full disk, on a real (tmpfs) filesystem: refused before paying when the space is
not there; when the disk fills during the run, no report is left cut short, the run
is stored, and `cycle report` writes its reports once there is room again."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli


@pytest.fixture
def disk(tmp_path, monkeypatch):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {done.stderr.strip()}")
    monkeypatch.setenv("CYCLE_TEST_DISK", str(mount))
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "p.yaml").write_text("id: p\nuser_template: '{{ q }}'\n"
                                     "params: {model: 'offline:default'}\n")
    (tmp_path / "cases.yaml").write_text("- {id: c, input: {q: hi}}\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _config(project: Path, agent: str = "") -> None:
    (project / "cycle.yaml").write_text(textwrap.dedent(f"""\
        prompt: p.yaml
        cases: [cases.yaml]
        run: {{iterations: 1}}
        {agent}
        criteria: [{{id: said, check: {{type: contains, values: [a]}}}}]
        """))


def test_too_little_room_for_the_reports_is_refused_before_any_call(project, disk):
    (disk / "filler").write_bytes(b"\0" * 10 * 2**20)  # 10 of 20 MB left
    _config(project)
    r = CliRunner().invoke(cli, ["run", "cycle.yaml", "--report-dir", str(disk / "r")])
    assert r.exit_code == 2, r.output
    assert "MB free on the disk of the reports folder" in r.output and "--report-dir" in r.output
    assert not (project / ".cycle" / "cycle.db").exists()  # nothing ran, nothing stored


def test_a_disk_that_fills_during_the_run_leaves_no_cut_report_and_the_run_stored(
        project, disk):
    _config(project, "agent: {function: 'tests.cli.fillers:fills_the_disk'}")
    r = CliRunner().invoke(cli, ["run", "cycle.yaml", "--report-dir", str(disk / "r")])
    assert r.exit_code == 2, r.output
    assert "could not be written" in r.output and "the run itself is stored" in r.output
    assert "Traceback" not in r.output
    hint = next(line for line in r.output.splitlines() if "cycle report" in line)
    run_id = hint.split("cycle report ")[1].split()[0]
    left = sorted(p.name for p in (disk / "r").iterdir())
    assert all(not name.endswith(".part") for name in left), left  # no half-written file
    (disk / "filler").unlink()  # room again
    again = CliRunner().invoke(cli, ["report", run_id, "--report-dir", str(disk / "r")])
    assert again.exit_code == 0, again.output
    data = json.loads((disk / "r" / f"{run_id}.json").read_text())
    assert data["summary"]["passed"] == 1


def test_an_events_file_on_a_full_disk_stops_without_stopping_the_cycle(project, disk):
    from cycle.events import JsonlSink, RunStarted

    (disk / "filler").write_bytes(b"\0" * (20 * 2**20 - 8192))
    sink = JsonlSink(disk / "run.jsonl")
    for i in range(2000):  # the disk fills up on the way: no error reaches the emitter
        sink(RunStarted(run_id=f"run-{i}", prompt_id="p", version="1.0.0", cases=1,
                        iterations=1))
    sink.close()
    assert sink.failed and "No space left on device" in sink.failed
    assert "the store has everything" in sink.failed


def test_the_cycle_report_is_written_again_by_cycle_report(project):
    import shutil

    quickstart = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
    for name in ("cases", "prompts"):
        shutil.copytree(quickstart / name, project / name, dirs_exist_ok=True)
    shutil.copy(quickstart / "cycle.yaml", project / "cycle.yaml")
    done = CliRunner().invoke(cli, ["improve", "cycle.yaml", "--headless", "--yes", "-n", "1"])
    assert done.exit_code == 0, done.output
    (cycle_md,) = (project / "reports").glob("c-*.md")
    cycle_md.unlink()
    again = CliRunner().invoke(cli, ["report", cycle_md.stem])
    assert again.exit_code == 0, again.output
    assert cycle_md.exists() and cycle_md.stem in cycle_md.read_text()


def test_cycle_report_shows_a_stored_run_case_by_case(project):
    _config(project)
    first = CliRunner().invoke(cli, ["run", "cycle.yaml", "--no-reports"])
    assert first.exit_code in (0, 1), first.output
    shown = CliRunner().invoke(cli, ["report", "@last", "--no-write", "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert [c["id"] for c in data["cases"]] == ["c"] and data["reports"] == {}
    assert not (project / "reports").exists()
    text = CliRunner().invoke(cli, ["report", "@last"])
    assert "Cases 1:" in text.output and "json report" in text.output


def test_a_cycle_that_failed_on_a_full_disk_in_round_0_resumes_once_there_is_room(
        project, disk):
    """The store on a small disk that fills during round 0: the cycle fails with the
    reason, and resumes once the space is back (it was left unresumable)."""
    import shutil

    quickstart = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
    for name in ("cases", "prompts"):
        shutil.copytree(quickstart / name, project / name, dirs_exist_ok=True)
    text = (quickstart / "cycle.yaml").read_text()
    (project / "cycle.yaml").write_text(text.replace(
        "criteria:\n", "criteria:\n  - id: room\n    check: {type: python, function: "
        "'tests.cli.fillers:fills_the_disk_once'}\n", 1))
    store = str(disk / "s.db")
    failed = CliRunner().invoke(cli, ["--store", store, "improve", "cycle.yaml", "--headless",
                                      "--yes", "-n", "1"])
    assert failed.exit_code != 0, failed.output
    assert "database or disk is full" in failed.output and "Free some space" in failed.output
    assert "Traceback" not in failed.output
    (disk / "filler").unlink()  # room again
    resumed = CliRunner().invoke(cli, ["--store", store, "improve", "cycle.yaml", "--headless",
                                       "--yes", "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert "resuming cycle" in resumed.output
