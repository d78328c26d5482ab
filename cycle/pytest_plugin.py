"""cycle inside pytest: ``pytest --cycle cycle.yaml`` makes each case a test.

Registered by entry point (no conftest needed). Each ``--cycle`` path (a cycle.yaml, its
folder, or a tool-forge eval file), or each line of the ``cycle`` ini option, adds one test
item per case. The first item to run runs
the suite once, for every selected case (``-k`` and ``--deselect`` narrow it), with cycle's
runner and concurrency; each item then reports its case:

- passed;
- failed, with the criteria that failed and their reasoning;
- an error (an infrastructure error: provider down, timeout, judge unparseable) is a pytest
  *error*, not a failure.

``--cycle-min-score`` and ``--cycle-min-pass-rate`` gate the session on the suite's score
and pass rate. The run is stored like any ``cycle run``, so ``cycle compare`` reads it.
Nothing heavy is imported unless ``--cycle`` is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cycle.words import pct

if TYPE_CHECKING:
    from cycle.records import CaseStats, RunResult


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cycle", "cycle: LLM prompt evaluation")
    group.addoption("--cycle", action="append", default=[], metavar="PATH",
                    help="A cycle.yaml (or its folder) or a tool-forge eval .json file whose "
                    "cases become tests (repeatable).")
    group.addoption("--cycle-agent-endpoint", metavar="URL",
                    help="The agent of tool-forge eval files (default: ./cycle.yaml's agent).")
    group.addoption("--cycle-iterations", type=int, metavar="N",
                    help="Runs per case (default: the config's; 1 for eval files).")
    group.addoption("--cycle-concurrency", type=int, metavar="N",
                    help="Cases in flight (default: the config's; 1 for eval files).")
    group.addoption("--cycle-min-score", type=float, metavar="SCORE",
                    help="Fail the session when a suite's score (0-100) is below this.")
    group.addoption("--cycle-min-pass-rate", type=float, metavar="PERCENT",
                    help="Fail the session when a suite's pass rate (0-100) is below this.")
    parser.addini("cycle", type="linelist", default=[],
                  help="Suites always collected (as --cycle), relative to the rootdir.")


def suite_paths(config: pytest.Config) -> list[Path]:
    """--cycle paths (from the current folder), else the ``cycle`` ini option's (from the
    rootdir): a project can keep its suites in pytest.ini / pyproject.toml for CI."""
    given = [Path(p) for p in config.getoption("cycle")]
    if given:
        return given
    return [config.rootpath / p for p in config.getini("cycle")]


def _check_options(config: pytest.Config) -> None:
    """The cycle flags' values, refused before any test is collected: ``--cycle-iterations
    0`` was an error of every test (a ValueError), and ``--cycle-min-score nan`` a gate
    that could never fail (nan compares false with everything)."""
    for flag in ("iterations", "concurrency"):
        value = config.getoption(f"cycle_{flag}")
        if value is not None and value < 1:
            raise pytest.UsageError(f"--cycle-{flag}: {value} is not a whole number >= 1")
    for flag in ("min_score", "min_pass_rate"):
        value = config.getoption(f"cycle_{flag}")
        if value is not None and not 0 <= value <= 100:  # nan is refused here too
            raise pytest.UsageError(f"--cycle-{flag.replace('_', '-')}: {value} is not a "
                                    "number from 0 to 100")


def pytest_configure(config: pytest.Config) -> None:
    _check_options(config)
    config.addinivalue_line(
        "markers", "cycle_suite(path, iterations=None, concurrency=None): the suite the "
        "cycle_suite fixture runs for this test when called without a path")
    if suite_paths(config):
        config.pluginmanager.register(_Suites(config), "cycle-suites")


class SuiteRuns:
    """What the ``cycle_suite`` fixture gives a test: ``cycle_suite("cycle.yaml")`` runs that
    suite (every case, with cycle's runner and concurrency) once per session and returns
    its ``RunResult``; the run is stored like any ``cycle run``. Under
    ``@pytest.mark.cycle_suite("cycle.yaml")`` the path may be left out. A relative path is
    from the test file's folder, else from the rootdir. Bad input fails the test with
    cycle's one-line message.

        @pytest.mark.cycle_suite("cycle.yaml", iterations=1)
        def test_support_prompt_holds(cycle_suite):
            run = cycle_suite()
            assert run.suite.pass_rate >= 0.9 and run.score >= 85
    """

    def __init__(self, request: pytest.FixtureRequest, cache: dict[Any, RunResult]) -> None:
        self._request = request
        self._cache = cache

    def __call__(self, path: str | Path | None = None, *, iterations: int | None = None,
                 concurrency: int | None = None) -> RunResult:
        marker = self._request.node.get_closest_marker("cycle_suite")
        if path is None:
            if marker is None or not marker.args:
                pytest.fail("cycle_suite() needs a path, or @pytest.mark.cycle_suite(PATH) on "
                            "the test", pytrace=False)
            path = marker.args[0]
            iterations = iterations or marker.kwargs.get("iterations")
            concurrency = concurrency or marker.kwargs.get("concurrency")
        where = Path(path)
        if not where.is_absolute():
            beside = self._request.path.parent / where
            where = beside if beside.exists() else self._request.config.rootpath / where
        if where.is_dir():
            where = where / "cycle.yaml"
        key = (where.resolve(), iterations, concurrency)
        if key not in self._cache:
            from cycle import aio
            from cycle.errors import CycleError

            try:
                loaded, cases = load_suite(where, iterations=iterations, concurrency=concurrency)
                self._cache[key] = aio.run(run_loaded(loaded, cases))
            except CycleError as e:
                pytest.fail(f"cycle: {e}", pytrace=False)
        return self._cache[key]


_RUNS = pytest.StashKey[dict]()


@pytest.fixture
def cycle_suite(request: pytest.FixtureRequest) -> SuiteRuns:
    """Runs a cycle suite once per session and hands its ``RunResult`` to the test
    (see ``SuiteRuns``)."""
    return SuiteRuns(request, request.config.stash.setdefault(_RUNS, {}))


def load_suite(path: Path, *, iterations: int | None, concurrency: int | None) -> tuple[Any, list[Any]]:
    """cycle.yaml at ``path`` with the overrides, and its validated cases."""
    from cycle.assemble.config import apply_overrides, load_config
    from cycle.assemble.suite import validate_suite
    from cycle.environment import load_env

    loaded, _ = apply_overrides(load_config(path), iterations=iterations, concurrency=concurrency)
    load_env(loaded.base_dir)
    return loaded, validate_suite(loaded)


async def run_loaded(loaded: Any, cases: list[Any], notes: list[str] | None = None
                     ) -> RunResult:
    """A run of a loaded cycle.yaml on ``cases``, stored like any ``cycle run``;
    ``notes`` gets what a person should know of it (the store's head ahead of the file)."""
    from cycle.assemble.config import head_ahead_note
    from cycle.assemble.suite import build_suite, open_cache, run_budget
    from cycle.evals.results import detached
    from cycle.store import Store, default_path

    store = Store.open(default_path(loaded.base_dir))
    cache = open_cache(loaded)
    try:
        note = head_ahead_note(loaded, store, evaluate_head=(
            "prompt: store:{id}@head in " + loaded.path.name))
        if note is not None and notes is not None:
            notes.append(note)
        suite = build_suite(loaded, store=store, cases=cases, budget=run_budget(loaded),
                            cache=cache)
        try:
            # read into memory: the store closes before the session reads the results
            return detached(await suite.runner(store=store).run(meta=suite.meta()))
        finally:
            await suite.aclose()
    finally:
        store.close()
        if cache is not None:
            cache.close()


class _Shown:
    """An exception whose message pytest prints as it is given: made printable here
    (cycle.safetext), since it quotes a judge's reasoning or a provider's error, whose
    escape sequences (an OSC 52 clipboard write, ``ESC[2J``) acted on the terminal."""

    def __init__(self, message: str) -> None:
        from cycle.safetext import printable

        super().__init__(printable(message))  # type: ignore[call-arg]


class CaseFailed(_Shown, AssertionError):
    """A case failed its criteria."""


class CaseErrored(_Shown, Exception):
    """An infrastructure error kept a case from being judged."""


class _Suites:
    """The --cycle suites of a session: collected, run once each, gated."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.files: list[SuiteFile] = []

    @pytest.hookimpl(tryfirst=True)  # before -k and --deselect narrow the items
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        for path in suite_paths(config):
            if path.is_dir():
                path = path / "cycle.yaml"
            node = SuiteFile.from_parent(session, path=path.resolve())
            self.files.append(node)
            # collected as pytest collects a file: a bad config is a collection error
            report = node.ihook.pytest_make_collect_report(collector=node)
            session.ihook.pytest_collectreport(report=report)
            if report.passed:
                items.extend(x for x in report.result if isinstance(x, pytest.Item))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from cycle.safetext import printable

        for node in self.files:
            if node.outcome is None:
                continue
            for line in node.summary_lines():
                terminalreporter.write_line(printable(line))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        gated = [why for node in self.files for why in node.gate_failures()]
        if gated and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


class SuiteFile(pytest.File):
    """One cycle.yaml or eval file: its cases, and the one run that judges them."""

    outcome: RunResult | None = None
    eval_result: dict[str, Any] | None = None

    @property
    def notes(self) -> list[str]:
        """What the summary tells besides the figures (the store's head ahead of the file)."""
        if "_notes" not in self.__dict__:
            self._notes: list[str] = []
        return self._notes

    def collect(self) -> list[CaseItem]:  # type: ignore[override]
        from cycle.errors import CycleError

        try:
            cases = self._cases()
        except CycleError as e:
            raise self.CollectError(f"cycle: {e}") from None
        return [CaseItem.from_parent(self, name=c.id, case_id=c.id) for c in cases]

    @property
    def is_eval_file(self) -> bool:
        return self.path.suffix.lower() == ".json"

    def _option(self, name: str) -> Any:
        return self.config.getoption(name)

    def _cases(self) -> list[Any]:
        if self.is_eval_file:
            self._prepared = self._prepare()
            return self._prepared.cases
        self._loaded, self._all = load_suite(
            self.path, iterations=self._option("cycle_iterations"),
            concurrency=self._option("cycle_concurrency"))
        return self._all

    def _prepare(self) -> Any:
        from cycle.assemble.config import load_config
        from cycle.assemble.evalfile import EvalOptions, prepare

        endpoint = self._option("cycle_agent_endpoint")
        local = Path("cycle.yaml")
        config = load_config(local) if endpoint is None and local.exists() else None
        return prepare(EvalOptions(
            eval_file=self.path, endpoint=endpoint,
            iterations=self._option("cycle_iterations") or 1,
            concurrency=self._option("cycle_concurrency") or 1), config)

    def ensure_run(self) -> None:
        """Run the suite once, for the cases of this file the session selected."""
        if self.outcome is not None:
            return
        from cycle import aio

        selected = tuple(i.case_id for i in self.session.items
                         if isinstance(i, CaseItem) and i.parent is self)
        self.outcome = aio.run(self._run(selected))

    async def _run(self, ids: tuple[str, ...]) -> RunResult:
        from cycle.store import Store, default_path

        if self.is_eval_file:
            from cycle.assemble.evalfile import run_eval
            from cycle.evals.results import detached

            prepared = self._prepared  # checked at collection; run only what was selected
            prepared.loaded.cases = [c for c in prepared.cases if c.id in ids]
            base = prepared.config.base_dir if prepared.config else None
            store = Store.open(default_path(base))
            try:
                out = await run_eval(prepared, store=store)
                run = detached(out.run)
            finally:
                store.close()
            self.eval_result = out.result
            return run
        from cycle.cases import select

        return await run_loaded(self._loaded, select(self._all, ids=ids), self.notes)

    def case(self, case_id: str) -> CaseStats | None:
        assert self.outcome is not None
        return self.outcome.cases.get(case_id)

    def gate_failures(self) -> list[str]:
        if self.outcome is None:
            return []
        out = []
        s = self.outcome.suite
        low = self._option("cycle_min_score")
        if low is not None and (s.score.mean is None or s.score.mean < low):
            score = "none" if s.score.mean is None else f"{s.score.mean:.1f}"
            out.append(f"suite score {score} is below --cycle-min-score {low:g}")
        rate = self._option("cycle_min_pass_rate")
        if rate is not None and (s.pass_rate is None or s.pass_rate * 100 < rate):
            shown = "none" if s.pass_rate is None else pct(s.pass_rate)
            out.append(f"pass rate {shown} is below --cycle-min-pass-rate {rate:g}%")
        return out

    def summary_lines(self) -> list[str]:
        assert self.outcome is not None
        r = self.outcome
        s = r.suite
        score = "-" if r.score is None else f"{r.score:.1f}"
        offline = " [offline model]" if r.offline else ""
        lines = [(f"cycle {self.path.name}: run {r.run_id}{offline}: score {score}, "
                  f"{s.passed} passed, {s.failed} failed, {s.errored} errored, ${s.cost:.4f}")]
        lines += [f"cycle gate FAILED: {why}" for why in self.gate_failures()]
        lines += [f"cycle note: {note}" for note in self.notes]
        return lines


class CaseItem(pytest.Item):
    """One case of a suite."""

    def __init__(self, *, case_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case_id = case_id

    @property
    def suite(self) -> SuiteFile:
        assert isinstance(self.parent, SuiteFile)
        return self.parent

    def setup(self) -> None:
        self.suite.ensure_run()
        stats = self.suite.case(self.case_id)
        if stats is None:
            raise CaseErrored(f"case {self.case_id} was not run (the run stopped early: "
                              f"{self.suite.outcome.stop_reason if self.suite.outcome else ''})")
        if stats.status == "error":
            errors = [r.error for r in self.suite.outcome.results_of(self.case_id)  # type: ignore[union-attr]
                      if r.error]
            raise CaseErrored(errors[0] if errors else "error")

    def runtest(self) -> None:
        stats = self.suite.case(self.case_id)
        assert stats is not None
        if stats.status == "passed":
            return
        raise CaseFailed(self._failure_text(stats))

    def _failure_text(self, stats: CaseStats) -> str:
        eval_result = self.suite.eval_result
        if eval_result is not None:
            row = next(c for c in eval_result["cases"] if c["id"] == self.case_id)
            return str(row.get("error") or "failed")
        mean = "-" if stats.mean is None else f"{stats.mean:.1f}"
        head = (f"case {self.case_id}: score {mean}, pass rate {pct(stats.pass_rate)} over "
                f"{stats.iterations} iterations")
        lines = [head]
        rep = stats.representative
        if rep is not None:
            lines += [f"  {v.criterion_id}{' (required)' if v.required else ''}: {v.score:.0f} - "
                      f"{v.reasoning}" for v in rep.verdicts if not v.passed]
        return "\n".join(lines)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed | CaseErrored):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"cycle case {self.case_id}"
