"""The progress line of `cycle run`: cases done, failures, errors and cost so far."""

import io

from cycle.events import CaseFinished, EventBus, RunFinished, RunStarted
from cycle.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _feed(progress: Progress, n: int = 10) -> None:
    bus = EventBus()
    bus.subscribe(progress)
    bus.emit(RunStarted(run_id="run-x", prompt_id="p", version="1.0.0", cases=5, iterations=2))
    for i in range(n):
        error = "judge: malformed" if i == 3 else None
        passed = None if error else i % 2 == 0
        bus.emit(CaseFinished(run_id="run-x", case_id=f"c{i // 2}", iteration=i % 2,
                              score=None if error else 50.0, passed=passed, error=error,
                              cost=0.0125, latency=0.01))
    bus.emit(RunFinished(run_id="run-x", score=50.0, pass_rate=0.5, errors=1, cost=0.125,
                         status="finished"))


def test_in_a_log_it_prints_a_line_per_tenth_with_counts_and_cost():
    out = io.StringIO()
    _feed(Progress(out, offline=True))
    lines = out.getvalue().splitlines()
    assert lines[0] == "running run-x: 10 iterations"
    assert len(lines) == 11  # the header and one line per tenth of the work, no more
    last = lines[-1]
    # 10 done; odd iterations failed (5) except #3, which errored; cost of every call so far
    assert "10/10 iterations" in last and "4 failed" in last and "1 errors" in last
    assert "$0.1250" in last and "[offline model]" in last
    assert "\r" not in out.getvalue()


def test_on_a_terminal_it_redraws_one_line_and_ends_it():
    out = Terminal()
    progress = Progress(out, interval=3600)  # only forced draws: start and end
    _feed(progress)
    text = out.getvalue()
    assert text.count("\r\x1b[2K") == 2 and text.endswith("\n") and text.count("\n") == 1
    assert "[" + "#" * 24 + "] 10/10 iterations" in text
    assert progress.line().startswith("[########################]")


def test_a_batch_job_waiting_is_on_the_line_and_its_start_and_end_in_a_log():
    from cycle.events import BatchProgress

    out, term = io.StringIO(), Terminal()
    for stream in (out, term):
        progress = Progress(stream, interval=0)
        progress(RunStarted(run_id="run-x", cases=3, iterations=1))
        progress(BatchProgress(model="openai:gpt-4o-mini", job_id="batch_1", state="submitted",
                               total=3))
        progress(BatchProgress(model="openai:gpt-4o-mini", job_id="batch_1", state="in_progress",
                               total=3, completed=1))
        if stream is term:
            assert "batch batch_1 in_progress 1/3 answered" in progress.line()
        progress(BatchProgress(model="openai:gpt-4o-mini", job_id="batch_1", state="completed",
                               done=True, total=3, completed=3))
        assert "batch_1" not in progress.line()  # ended: off the line
    assert out.getvalue().splitlines()[1:] == [
        "openai:gpt-4o-mini batch batch_1 submitted (3 calls)",
        "openai:gpt-4o-mini batch batch_1 completed 3/3 answered"]


def test_in_a_log_a_run_with_nothing_left_to_run_says_so_once():
    # found resuming a finished run (`cycle run --resume @last`): the header came twice
    out = io.StringIO()
    _feed(Progress(out), n=0)
    assert out.getvalue() == "running run-x: 10 iterations\n"


def test_per_case_iterations_count_as_they_run():
    # the total is the runner's (a case with iterations of its own), not cases x iterations
    out = io.StringIO()
    progress = Progress(out)
    progress(RunStarted(run_id="run-x", cases=2, iterations=3, total=4))
    assert out.getvalue() == "running run-x: 4 iterations\n"


def test_behind_the_terminal_filter_only_cycle_s_own_redraw_is_raw():
    """The filter let a write through raw when it began with the redraw, cycle's or an
    outsider's text that began with it (an answer, an error printed on its own line)."""
    from cycle.safetext import TerminalStream

    out = Terminal()
    stream = TerminalStream(out)
    _feed(Progress(stream, interval=3600))
    assert out.getvalue().count("\r\x1b[2K") == 2  # cycle's own redraw still redraws
    out.truncate(0)
    out.seek(0)
    stream.write("\r\x1b[2K\x1b]52;c;ZXZpbA==\x07answer\n")
    assert out.getvalue() == "\\r\\x1b[2K\\x1b]52;c;ZXZpbA==\\x07answer\n"
