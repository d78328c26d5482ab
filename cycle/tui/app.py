"""The Textual app: watch and steer a cycle, or browse the store.

The app holds no business logic. It runs the cycle the caller hands it (a
coroutine function that builds a ``Loop`` and runs it), listens to its events
through a throttled bridge, answers its review requests on the Review screen,
and reads or rolls back versions through the ``Store`` API.

The cycle runs in a child process (``cycle.tui.process``), so the screen stays
responsive while the core computes without yielding (an offline model never
waits on the network) and drawing takes nothing from the cycle. A thread of
the app relays what the child says: events onto the app's bus (the bridge and
any other sink, such as ``--events``), review requests as messages.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen

from cycle.events import EventBus
from cycle.records import ReviewRequest, Suggestion
from cycle.store.store import shown_target, store_target
from cycle.tui.bridge import DEFAULT_RATE, EventBridge
from cycle.tui.process import DEFAULT_HOST, CycleOutcome, CycleProcess, CycleRun
from cycle.tui.screens.confirm import ConfirmScreen
from cycle.tui.screens.dashboard import DashboardScreen
from cycle.tui.screens.help import HelpScreen
from cycle.tui.screens.history import HistoryScreen
from cycle.tui.screens.review import ReviewScreen
from cycle.tui.state import DashboardState
from cycle.tui.widgets import masked
from cycle.tui.widgets.header import HeaderInfo

if TYPE_CHECKING:
    from cycle.simulate import Simulation
    from cycle.store import Store

#: a frame that brings more events than this is part of a fast run: the heavy
#: widgets (tables, chart, log) then wait for their own, slower refresh
BUSY_BATCH = 50
#: seconds between redraws of the heavy widgets while a run is fast. Redrawing
#: them every frame (a layout pass of the whole screen whenever the case list
#: grew) was most of the UI thread's CPU on a fast offline run
#: (benchmarks/RESULTS.md)
FULL_INTERVAL = 1.0


class ReviewRequested(Message):
    """The cycle asks the app to open the Review screen; ``reply`` gets the decisions."""

    def __init__(self, request: ReviewRequest, reply: concurrent.futures.Future[list[Suggestion]]) -> None:
        super().__init__()
        self.request = request
        self.reply = reply


class CycleEnded(Message):
    """The cycle has ended (its child has said so, or died)."""

    def __init__(self, outcome: CycleOutcome) -> None:
        super().__init__()
        self.outcome = outcome


class PlainNotices:
    """Notifications shown as text, whatever the caller asks: they quote errors, and an
    error quotes what came from outside (a tool's message, a model's answer, a case id).
    Read as markup, ``[/b]`` in one was an error that stopped the app and ``[@click=...]``
    a button nobody wrote (Textual's ``notify`` reads markup by default, and a screen's
    passes ``markup=True`` on)."""

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        App.notify(self, message, title=title, severity=severity,  # type: ignore[arg-type]
                   timeout=timeout, markup=False)


class CycleApp(PlainNotices, App[CycleOutcome | None]):
    """Dashboard + Review while a cycle runs; History on the store otherwise."""

    CSS_PATH = Path(__file__).parent / "app.tcss"
    TITLE = "cycle"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        *,
        cycle: CycleRun | None = None,
        store: Store | None = None,
        store_path: str | Path | None = None,
        info: HeaderInfo | None = None,
        bus: EventBus | None = None,
        prompt_id: str | None = None,
        clock: Callable[[], float] = time.time,
        refresh_rate: float = DEFAULT_RATE,
        host: str = DEFAULT_HOST,
    ) -> None:
        """``cycle`` set: run it and open the Dashboard; else open History on ``store``.

        ``clock`` drives the elapsed times shown (tests freeze it for snapshots).
        ``host``: "process" (a forked child; the default on Linux) or "thread".
        """
        super().__init__()
        if cycle is None and store is None and store_path is None:
            raise ValueError("CycleApp needs a cycle to run or a store to browse")
        self._cycle = cycle
        self._store = store
        self._opened: Store | None = None  # the connection the app opened itself, to close
        self._store_path = store_target(store_path) if store_path is not None else None
        self.info = info or HeaderInfo(prompt_id=prompt_id or "",
                                       store=shown_target(store_path) if store_path else "")
        self.bus = bus or EventBus()
        self.prompt_id = prompt_id
        self.clock = clock
        self.refresh_rate = refresh_rate
        self.state = DashboardState()
        self.bridge = EventBridge()
        self.outcome: CycleOutcome | None = None
        self._dashboard: DashboardScreen | None = None
        self._process = CycleProcess(cycle, host=host) if cycle is not None else None
        self._quit_when_ended = False
        self._cycle_done = threading.Event()
        self._full_at = -FULL_INTERVAL  # when the heavy widgets were last drawn
        self._gc_frozen = False

    # -- screens -------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The app's own connection to the store (SQLite connections belong to one thread)."""
        if self._store is None:
            from cycle.store import Store

            assert self._store_path is not None
            self._store = self._opened = Store.open(self._store_path)
        return self._store

    def get_default_screen(self) -> Screen[Any]:
        if self._cycle is not None:
            self._dashboard = DashboardScreen(self.state, self.info)
            return self._dashboard
        if not self.store.list_prompts(builtin=False) and self.store.runs.recent(limit=1):
            # only eval files run against an endpoint: their runs have no prompt to browse
            from cycle.tui.screens.runs import RunsScreen

            return RunsScreen(self.store, self.info)
        return HistoryScreen(self.store, self.info, prompt_id=self.prompt_id)

    def on_mount(self) -> None:
        if self._cycle is not None:
            self.bridge.attach(self.bus)
            self.set_interval(1 / self.refresh_rate, self.flush_events)
            # start once the first frame is drawn: the app's one-time setup then
            # does not compete with the cycle's first cases for the GIL
            self.call_after_refresh(self._start_cycle)

    def _start_cycle(self) -> None:
        # The app's widgets, styles and caches (~25,000 objects) live as long as
        # the app: freeze them (a permanent generation the collector skips) so
        # that no full collection walks them again, the UI's or, as the child
        # is forked with them frozen, the cycle's (benchmarks/RESULTS.md).
        # Unfrozen when the app closes.
        gc.freeze()
        self._gc_frozen = True
        self.run_cycle()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_simulate(self) -> None:
        """Play the agent of ./cycle.yaml (its golden traces go where cycle simulate puts
        them by default: <prompt id>.evalset.json here)."""
        from cycle.assemble.simulate import config_agent
        from cycle.errors import CycleError
        from cycle.simulate import Simulation
        from cycle.tui.screens.simulate import SimulateScreen

        config = Path.cwd() / "cycle.yaml"
        if not config.exists():
            self.notify("no cycle.yaml here: run cycle simulate CONFIG, or cycle simulate "
                        "--adk package.module:agent", severity="error")
            return
        try:
            simulation = Simulation([config_agent(config, eval_set_path=None, cases_path=None,
                                                  store_path=self._store_path)])
        except CycleError as e:
            self.notify(str(e), severity="error", timeout=10)
            return
        self.push_screen(SimulateScreen(simulation))

    def action_history(self) -> None:
        if not any(isinstance(s, HistoryScreen) for s in self.screen_stack):
            prompt_id = self.state.prompt_id or self.info.prompt_id or None
            self.push_screen(HistoryScreen(self.store, self.info, prompt_id=prompt_id))

    def on_dashboard_screen_case_chosen(self, message: DashboardScreen.CaseChosen) -> None:
        from cycle.tui.screens.case import CaseScreen

        self.push_screen(CaseScreen(self.store, message.run_id, message.case_id, self.info))

    # -- events --------------------------------------------------------------

    def flush_events(self, *, full: bool = False) -> None:
        """Fold the queued events in and redraw what changed (the refresh timer).

        While events pour in (a fast run), only the cheap status lines and the
        progress bar are redrawn every frame; the tables, chart and log at most
        once per ``FULL_INTERVAL``. Their changes accumulate in the state
        meanwhile, so nothing is lost, and as soon as a frame brings few events
        everything is drawn at once. ``full``: draw everything now.
        """
        batch = self.bridge.drain()
        apply = self.state.apply
        for event in batch:
            apply(event)
        if self._dashboard is None or not self.is_running:
            return  # no dashboard, or the app is closing (its screens go before its timers)
        tick = time.monotonic()
        if not full and len(batch) > BUSY_BATCH and tick - self._full_at < FULL_INTERVAL:
            self._dashboard.show_progress(self.clock())
            return
        self._full_at = tick
        changes = self.state.take_changes()
        if changes.empty:
            self._dashboard.show_progress(self.clock())
        else:
            self._dashboard.show_changes(changes, now=self.clock())

    # -- the cycle -----------------------------------------------------------

    @property
    def cycle_running(self) -> bool:
        return self._cycle is not None and self.outcome is None

    @work(thread=True, exclusive=True, group="cycle", exit_on_error=False)
    def run_cycle(self) -> None:
        """Start the cycle's child and relay what it says until it ends (a worker thread)."""
        assert self._process is not None
        try:
            self._process.start()
            outcome = self._process.relay(self.bus.emit, self._ask)
        except Exception as e:  # noqa: BLE001 -- e.g. the child could not start: shown, not raised
            outcome = CycleOutcome("failed", error=e)
        self._cycle_done.set()
        self.post_message(CycleEnded(outcome))

    def _ask(self, request: ReviewRequest, answer: Callable[[list[Suggestion]], None]) -> None:
        """A review request from the cycle (relay thread): open the Review screen."""
        reply: concurrent.futures.Future[list[Suggestion]] = concurrent.futures.Future()
        reply.add_done_callback(lambda f: None if f.cancelled() else answer(f.result()))
        self.post_message(ReviewRequested(request, reply))

    def interrupt_cycle(self) -> None:
        """Stop the cycle: it is marked interrupted, so it can be resumed."""
        if self._process is not None:
            self._process.cancel()

    def on_unmount(self) -> None:
        # however the app closes, never leave the cycle waiting on a screen that
        # is gone: interrupt it, so the cycle is marked interrupted (resumable)
        if self._process is not None and not self._cycle_done.is_set():
            self.interrupt_cycle()
            # (a cycle cancelled before its child began never starts: nothing to wait for)
            if self._process.started and not self._cycle_done.wait(timeout=30):
                self._process.join(0)  # kills a child that will not stop
        if self._gc_frozen:
            self._gc_frozen = False
            gc.unfreeze()
        if self._opened is not None:  # (a store given by the caller stays the caller's)
            self._opened.close()
            self._opened = None

    def on_cycle_ended(self, message: CycleEnded) -> None:
        self.flush_events(full=True)
        self.outcome = outcome = message.outcome
        self.bridge.detach()
        while any(isinstance(s, ReviewScreen) for s in self.screen_stack):
            self.pop_screen()
        if outcome.status == "failed":
            self.state.status = "failed"
            error = outcome.error
            # an error cycle did not write (a library's, a plugin's) may quote a key: masked
            # here as the CLI masks it in an internal error
            self.state.note(masked(f"[error] the cycle failed: {type(error).__name__}: {error}"))
        elif outcome.status == "interrupted":
            self.state.status = "interrupted"
            self.state.note("the cycle was interrupted; it can be resumed")
        self.flush_events(full=True)
        if self._quit_when_ended:
            self.exit(outcome)
        else:
            self.notify(f"The cycle {outcome.status}. Press q to quit.",
                        severity="error" if outcome.status == "failed" else "information")

    def on_review_requested(self, message: ReviewRequested) -> None:
        reply = message.reply

        def decided(suggestions: list[Suggestion] | None) -> None:
            if suggestions is not None and not reply.done():
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    # cancelled meanwhile (the user quit): nobody waits for it
                    reply.set_result(suggestions)
            self.state.status = "running"

        self.state.status = "reviewing"
        self.push_screen(ReviewScreen(message.request, self.info), decided)

    async def action_quit(self) -> None:
        leave = getattr(self.screen, "action_leave", None)
        if leave is not None:  # the Simulate screen: it asks before it drops a session
            leave()
            return
        if not self.cycle_running:
            self.exit(self.outcome)
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self._quit_when_ended = True
                self.notify("Interrupting the cycle…")
                self.interrupt_cycle()

        cycle_id = self.state.cycle_id
        resume = f" with `cycle improve --resume {cycle_id}`" if cycle_id else ""
        self.push_screen(
            ConfirmScreen(f"The cycle is running. Interrupt it and quit?\nIt can be resumed later{resume}."),
            answer,
        )


def run_cycle_app(
    cycle: CycleRun,
    *,
    store_path: str | Path,
    info: HeaderInfo | None = None,
    bus: EventBus | None = None,
) -> CycleOutcome:
    """Run a cycle under the TUI (``cycle improve cycle.yaml`` without ``--headless``).

    ``cycle(bus, reviewer)`` is awaited in a child process (``cycle.tui.process``)
    on its own asyncio loop: build the Loop inside it, with the ``bus`` and
    ``reviewer`` given, and open the Store inside it too (a SQLite connection
    belongs to the process and thread that opened it). What it returns, or
    raises, comes back pickled::

        async def cycle(bus, reviewer):
            store = Store.open(path)
            return await build_loop(loaded, store=store, bus=bus, reviewer=reviewer).run(resume=resume)

    ``store_path`` is opened separately by the app, read-only in practice, for
    the History and case screens. ``info`` names the prompt and models in the
    header (``offline=True`` shows the OFFLINE MODEL badge). ``bus``: pass yours
    if other sinks (a JSONL log) are subscribed to it: the child's events are
    emitted on it in the app's process.

    Blocks until the user quits. Returns the outcome: ``status`` "finished"
    (``result`` is what ``cycle`` returned), "interrupted" (the user quit
    mid-cycle after confirming; the cycle's task was cancelled so the cycle is
    marked interrupted and resumable) or "failed" (``error`` is the exception,
    for the CLI to report), or "interrupted" if the app closed before the end.
    """
    app = CycleApp(cycle=cycle, store_path=store_path, info=info, bus=bus)
    outcome = app.run()
    if outcome is None:
        outcome = app.outcome or CycleOutcome("interrupted")
    return outcome


class ScreenApp(PlainNotices, App[None]):
    """One screen on its own (``cycle simulate``, ``cycle judge label``): the app's look,
    its help, and quit through the screen's own ``leave`` (which may ask first)."""

    CSS_PATH = Path(__file__).parent / "app.tcss"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help", key_display="?"),
    ]

    def __init__(self, make: Callable[[], Screen[Any]]) -> None:
        super().__init__()
        self._make = make

    def get_default_screen(self) -> Screen[Any]:
        return self._make()

    async def action_quit(self) -> None:
        leave = getattr(self.screen, "action_leave", None)
        if leave is not None:  # it asks before it drops unfinished work
            leave()
        else:
            self.exit()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))


class SimulateApp(ScreenApp):
    """``cycle simulate``: the Simulate screen on its own."""

    TITLE = "cycle simulate"

    def __init__(self, simulation: Simulation) -> None:
        from cycle.tui.screens.simulate import SimulateScreen

        super().__init__(lambda: SimulateScreen(simulation))
        self.simulation = simulation


class LabelApp(ScreenApp):
    """``cycle judge label``: the Label screen on its own (its arguments are the screen's,
    cycle.tui.screens.label.LabelScreen)."""

    TITLE = "cycle judge label"

    def __init__(self, store: Store, run_id: str, outputs: list[dict[str, Any]],
                 criteria: list[tuple[str, str]], *, labeler: str) -> None:
        from cycle.tui.screens.label import LabelScreen

        super().__init__(lambda: LabelScreen(store, run_id, outputs, criteria, labeler=labeler))
