"""`cycle improve` under the TUI in a real pseudo-terminal, as a user runs it: the
cycle in its own process, keys typed on the terminal, the exit code and what is
printed after the app closes, and a quit mid-review resumed headless."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from cycle.store import Store

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses a Linux pty")

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
CYCLE = Path(sys.executable).with_name("cycle")
_ESCAPES = re.compile(rb"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78])")


class Terminal:
    """A command on a pseudo-terminal; what it draws is kept as plain text."""

    def __init__(self, *args: str, cwd: Path) -> None:
        import pty

        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: become the command
            os.chdir(cwd)
            os.environ.update(TERM="xterm-256color", COLUMNS="100", LINES="30")
            os.execv(str(CYCLE), ["cycle", *args])
        self._raw = b""
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self._raw += data

    @property
    def text(self) -> str:
        with self._lock:
            raw = self._raw
        return _ESCAPES.sub(b"", raw).decode(errors="replace")

    def wait_for(self, needle: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} never appeared; the screen ended with:\n{self.text[-1500:]}")
            time.sleep(0.05)

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def exit_code(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._reader.join(5)
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError(f"the command did not exit; the screen ended with:\n{self.text[-1500:]}")


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    shutil.copytree(QUICKSTART, tmp_path / "quickstart",
                    ignore=shutil.ignore_patterns(".cycle", "reports", "*.jsonl"))
    return tmp_path / "quickstart"


def _kinds(log: Path) -> Counter[str]:
    return Counter(json.loads(line)["kind"] for line in log.read_text().splitlines())


def test_a_cycle_watched_to_the_end_in_a_real_terminal(quickstart: Path, tmp_path: Path) -> None:
    term = Terminal("improve", "cycle.yaml", "--yes", "--events", "events.jsonl", cwd=quickstart)
    term.wait_for("OFFLINE MODEL")
    term.wait_for("Press q to quit")
    term.type("q")
    assert term.exit_code() == 0
    after = term.text.split("Press q to quit")[-1]
    assert "support-reply: 1.0.0 (46.8) -> 1.0.2 (96.5)  [offline model]" in after
    assert "report: reports/" in after
    # every event of the child reached the app's --events log: the same as headless
    log = (quickstart / "events.jsonl").read_text().splitlines()
    assert json.loads(log[0])["kind"] == "cycle_started" and json.loads(log[-1])["kind"] == "cycle_finished"
    shutil.copytree(quickstart / "prompts", tmp_path / "headless" / "prompts")
    shutil.copytree(quickstart / "cases", tmp_path / "headless" / "cases")
    shutil.copy(quickstart / "cycle.yaml", tmp_path / "headless")
    headless = Terminal("improve", "cycle.yaml", "--headless", "--yes", "--events", "events.jsonl",
                        cwd=tmp_path / "headless")
    assert headless.exit_code() == 0
    kinds = _kinds(quickstart / "events.jsonl")
    assert kinds == _kinds(tmp_path / "headless" / "events.jsonl")
    # 5 evaluations x 5 cases x 3 iterations: the baseline, two candidates, and the confirmation
    # of the best against the baseline on fresh samples
    assert kinds["case_finished"] == 5 * 5 * 3


def test_quitting_at_the_review_saves_the_cycle_and_it_resumes_headless(quickstart: Path) -> None:
    term = Terminal("improve", "cycle.yaml", cwd=quickstart)
    term.wait_for("Diff of the prompt")  # the Review screen: the loop waits for a person
    term.type("q")
    term.wait_for("Interrupt it and quit?")
    term.type("y")
    assert term.exit_code() == 130
    assert "Interrupted; the cycle is saved. Resume with: cycle improve" in term.text

    with Store.open(quickstart / ".cycle" / "cycle.db") as store:
        (cycle_id,) = [row[0] for row in store.db.execute("select id from cycles")]
        assert store.cycles.get(cycle_id).status == "interrupted"
        assert store.labels("support-reply")["head"] == "1.0.0"

    resumed = Terminal("improve", "cycle.yaml", "--headless", "--yes", "--resume", cwd=quickstart)
    assert resumed.exit_code() == 0, resumed.text
    assert f"resuming cycle {cycle_id}" in resumed.text
    with Store.open(quickstart / ".cycle" / "cycle.db") as store:
        assert store.cycles.get(cycle_id).status == "finished"
