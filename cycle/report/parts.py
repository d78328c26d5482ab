"""A report as parts: its head, each case's text in one or more streams, its tail.

A run's report is written either whole at the end (``pieces``: head, then each stream's
cases in the run's order, then the tail) or ahead, while the run goes
(``cycle.report.ahead``: each case's text as soon as it is stored, the head and tail at
the end). Both go through the same ``Parts``, so the two give the same file, byte for
byte. Most reports have one stream (their cases in order); the Markdown report has three
(the table's rows, then the failed cases, then the passed ones)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from cycle.records import CaseStats, RunResult

#: a report's text of its ``n``-th case (from 0)
CaseText = Callable[[int, CaseStats, RunResult], str]


class Parts:
    """One report being written (a new one for each file: a report's parts may keep
    what they need of the cases written before)."""

    #: how many streams its cases are written in
    streams = 1

    def head(self, result: RunResult) -> str:
        """The text before the first case (it may hold figures of every case)."""
        raise NotImplementedError

    def case(self, stream: int, n: int, c: CaseStats, result: RunResult) -> str:
        """The ``n``-th case's text in ``stream`` ("" when it has none there)."""
        raise NotImplementedError

    def before(self, stream: int) -> str:
        """What goes before ``stream``'s text (asked only of a stream with text, in
        order)."""
        return ""

    def tail(self, result: RunResult) -> str:
        raise NotImplementedError

    def cases(self, stream: int, result: RunResult) -> Iterable[tuple[int, CaseStats]]:
        """The cases (and their numbers) a whole report's ``stream`` goes through."""
        return enumerate(result.cases.values())


class Plain(Parts):
    """A report of one stream: its head, each case's text, its tail."""

    def __init__(self, head: Callable[[RunResult], str], case: CaseText,
                 tail: Callable[[RunResult], str]) -> None:
        self._head, self._case, self._tail = head, case, tail

    def head(self, result: RunResult) -> str:
        return self._head(result)

    def case(self, stream: int, n: int, c: CaseStats, result: RunResult) -> str:
        return self._case(n, c, result)

    def tail(self, result: RunResult) -> str:
        return self._tail(result)


def pieces(parts: Parts, result: RunResult) -> Iterator[str]:
    """The whole report in pieces: its head, each stream's cases, its tail (a run of any
    size is written in the memory of one case)."""
    yield parts.head(result)
    for stream in range(parts.streams):
        started = False
        for n, c in parts.cases(stream, result):
            text = parts.case(stream, n, c, result)
            if text:
                if not started:
                    started = True
                    yield parts.before(stream)
                yield text
    yield parts.tail(result)
