"""The ``cycle`` command.

One module per command group; commands are imported lazily so that
``cycle --help`` stays fast and a command's heavy imports (textual, the SDKs)
load only when it runs. Any ``CycleError`` becomes a one-paragraph message on
stderr and its exit code; ``--debug`` shows the traceback instead.

Exit codes: 0 all passed, 1 some cases failed, 2 usage or input error,
3 errors prevented judging (provider down, judge unparseable), 4 internal
error (a bug: please report it with ``--debug`` output), 130 interrupted.
"""

from __future__ import annotations

import importlib
import math
import sys
import traceback
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import click
from msgspec import Struct

from cycle import __version__, heap
from cycle.environment import load_env
from cycle.errors import CycleError
from cycle.safetext import TerminalStream

if TYPE_CHECKING:
    from cycle.assemble.config import LoadedConfig


class Command(NamedTuple):
    """A command's one entry: where it is, the first sentence of its help (what
    ``cycle --help`` lists, so that listing the commands imports none of them;
    tests/cli/test_startup.py holds it to the docstring), and whether it loads a suite
    and calls ``heap.settle`` itself (every path that runs models does, which turns the
    collector back on; any other command turns it on as it is looked up)."""

    target: str
    help: str
    settles: bool = False


#: command name -> its entry. A module adds its commands here, and only here.
COMMANDS: dict[str, Command] = {
    "prompt": Command("cycle.cli.prompt:prompt",
               "Prompts in the store: list them, import and export prompt files."),
    "history": Command("cycle.cli.prompt:history",
                "The versions of prompt ID, newest first, with labels, source, score and message."),
    "show": Command("cycle.cli.prompt:show",
             "Show one version: its number, labels, hash, source and content."),
    "diff": Command("cycle.cli.prompt:diff",
             ("Diffs, field by field, from version A to version B (numbers, labels or hashes): "
              "a changed line as its word changes, ``~ keep [-old-]{+new+}``; --lines for "
              "unified.")),
    "rollback": Command("cycle.cli.prompt:rollback",
                 "Move the head label (or --label) of prompt ID back to an earlier version."),
    "label": Command("cycle.cli.prompt:label",
              "Point label NAME of prompt ID at VERSION (creating the label if new)."),
    "promote": Command("cycle.cli.prompt:promote",
                "Point the production label of prompt ID at VERSION (default: head)."),
    "protect": Command("cycle.cli.prompt:protect",
                "Protect label LABEL: it then moves only by the people --allow names, or "
                "with --force."),
    "unprotect": Command("cycle.cli.prompt:unprotect",
                  "Lift the protection of label LABEL (of every prompt, or of --prompt ID)."),
    "run": Command("cycle.cli.run:run",
            "Evaluate the prompt of CONFIG (cycle.yaml) on its cases and write reports.",
            settles=True),
    "compare": Command("cycle.cli.run:compare",
                "Compare two stored runs, paired by case: RUN_B against RUN_A (the baseline)."),
    "runs": Command("cycle.cli.runs:runs", "List the stored runs (of PROMPT_ID, if given), newest first."),
    "report": Command("cycle.cli.runs:report",
               "Show stored run RUN_ID case by case, and write its reports (again)."),
    "plan": Command("cycle.cli.plan:plan",
             "Say how many cases and iterations a gain of --gain points needs."),
    "improve": Command("cycle.cli.improve:improve",
                "Improve the prompt of CONFIG (cycle.yaml) round by round.", settles=True),
    "cycles": Command("cycle.cli.cycles:cycles",
               "List the improvement cycles in the store (of PROMPT_ID, if given), newest first."),
    "tui": Command("cycle.cli.tui:tui",
            ("Open the History screen on the store: on PROMPT_ID, else the prompt of "
             "./cycle.yaml, else the prompt used last.")),
    "store": Command("cycle.cli.store:store_group",
              "Whole stores: copy one into another (SQLite or PostgreSQL), verified."),
    "doctor": Command("cycle.cli.doctor:doctor",
                      "Probe a model's endpoint: what works, and the settings that fit it."),
    "judge": Command("cycle.cli.judge:judge_group",
                     "People's labels of stored outputs, and the judge's agreement with them."),
    "models": Command("cycle.cli.models:models",
               "List model providers and the price table (USD per million tokens)."),
    "init": Command("cycle.cli.init:init",
             "Create a working project in DIRECTORY (default: here): cycle.yaml, a prompt, cases."),
    "simulate": Command("cycle.cli.simulate:simulate",
                 ("Play the agent's model in a Textual screen; each finished session becomes a "
                 "golden trace appended to an ADK EvalSet.")),
    "import": Command("cycle.cli.adk:import_group", "Turn other tools' eval files into cycle case files."),
    "export": Command("cycle.cli.adk:export_group",
               "Write cycle's cases, or a run's recorded traces, in other tools' formats."),
}

EXIT_INTERNAL = 4


class FiniteFloat(click.FloatRange):
    """A FloatRange that also refuses nan and inf (which pass its bounds checks: ``nan``
    compares false with everything, and would silently lift a cap)."""

    name = "finite float"

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


#: the most rows a listing's -n/--offset takes: what SQLite's LIMIT and OFFSET can hold is
#: an int64, and a larger number was an internal error (OverflowError) instead of a usage one
MAX_ROWS = 1_000_000_000


class CliContext(Struct):
    debug: bool = False
    #: --store as given; None means "CYCLE_STORE, else beside the config"
    store: str | None = None

    def store_path(self, config: LoadedConfig | str | Path | None = None) -> Path:
        """Where the store is: --store, then CYCLE_STORE, then the config's ``store:``, then
        .cycle/cycle.db beside the config (``config``: the loaded config or its folder);
        a path, or a PostgreSQL URL as text."""
        import os

        from cycle.store.store import default_path, store_target

        if self.store:
            return store_target(self.store)  # type: ignore[return-value]
        if config is None or isinstance(config, str | Path):
            return default_path(config)  # type: ignore[return-value]
        if config.store is not None and not os.environ.get("CYCLE_STORE"):
            return config.store  # type: ignore[return-value]
        return default_path(config.base_dir)  # type: ignore[return-value]


def store_of(config: LoadedConfig | str | Path | None = None) -> Path:
    """This command's store (``CliContext.store_path``)."""
    obj = click.get_current_context().find_object(CliContext) or CliContext()
    return obj.store_path(config)


def _set_store(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value:
        obj = ctx.find_object(CliContext)
        if obj is not None:
            obj.store = value


def _with_global_options(command: click.Command) -> click.Command:
    """Let --store and --debug follow any subcommand too (``cycle history ID --store X``)."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _with_global_options(sub)
    names = {p.name for p in command.params}
    if "store" not in names:
        command.params.append(click.Option(
            ["--store"], type=click.Path(dir_okay=False), expose_value=False,
            callback=_set_store, help="The store (as for `cycle --store`)."))
    if "debug" not in names:
        # main() looks for --debug anywhere in the arguments; this only makes it legal here
        command.params.append(click.Option(
            ["--debug"], is_flag=True, expose_value=False, help="Show tracebacks."))
    return command


def local_minute(at: datetime) -> str:
    """A stored (UTC) time as people read it in a listing: local, to the minute."""
    return at.astimezone().strftime("%Y-%m-%d %H:%M")


def store_flag(path: Path) -> str:
    """`` --store PATH`` for a command hint, or '' when the default store is that path."""
    from cycle.store.store import shown_target

    obj = click.get_current_context().find_object(CliContext) or CliContext()
    default = CliContext(store=None).store_path()
    if obj.store is None and (str(path) == str(default) if isinstance(path, str)
                              else Path(path).resolve() == Path(default).resolve()):
        return ""
    return f" --store {shown_target(path)}"


#: where a command's first sentence may be cut and still read whole: before a colon, a
#: semicolon, a comma or a parenthesis
_CLAUSE_ENDS = (":", ";", ",", " (")


def short_help(text: str, limit: int) -> str:
    """A command's line in ``cycle --help``: the first sentence of its help; one too long
    is cut at the last clause that ends past half of ``limit`` ("Compare two stored runs,
    paired by case"), else at a word, with "..." (click's own helper goes in 9.0)."""
    words = text.split("\n\n", 1)[0].split()
    for i, word in enumerate(words):  # a period then a lowercase word is "e.g." or "vs."
        if word.endswith(".") and (i + 1 == len(words) or not words[i + 1][0].islower()):
            words = words[:i + 1]
            break
    sentence = " ".join(words)
    if len(sentence) <= limit:
        return sentence
    head = sentence[:limit + 1]
    # the last clause end past half the line with no parenthesis left open before it
    cuts = [i for i in range(limit // 2, len(head)) if head.startswith(_CLAUSE_ENDS, i)
            and head.count("(", 0, i) == head.count(")", 0, i)]
    if cuts:
        return head[:cuts[-1]]
    return head[:limit - 3].rsplit(" ", 1)[0].rstrip(",;:") + "..."


class CycleGroup(click.Group):
    """Lazy command loading plus cycle's error handling, so that the console
    command and click's CliRunner behave the same."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name == module_name:
                return None
            raise
        if not target.settles:
            heap.resume()  # main() turned it off for loading; this command is loaded
        return _with_global_options(getattr(module, attr))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from COMMANDS, importing no command (click's own would import
        every command module, the SDKs and the TUI with them, to read one line of help)."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, short_help(COMMANDS[name].help, limit))
                for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
        args = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in args
        # every string a command prints may hold text from outside: shown, never obeyed
        streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = TerminalStream(sys.stdout), TerminalStream(sys.stderr)
        try:
            code = self._main(args, prog_name, complete_var, debug, **extra)
        finally:
            sys.stdout, sys.stderr = streams
        sys.exit(code if isinstance(code, int) else 0)

    def _main(self, args: list[str], prog_name: str | None, complete_var: str | None,
              debug: bool, **extra: Any) -> Any:
        try:
            code = super().main(
                args=args, prog_name=prog_name or "cycle", complete_var=complete_var,
                standalone_mode=False, **extra,
            )
        except click.exceptions.Abort:
            click.echo("Aborted.", err=True)
            code = 130
        except click.ClickException as e:
            e.show()
            code = e.exit_code
        except click.exceptions.Exit as e:
            code = e.exit_code
        except CycleError as e:
            if debug:
                _print_traceback()
            click.echo(f"error: {e}", err=True)
            code = e.exit_code
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            code = 130
        except Exception as e:  # noqa: BLE001 - a bug: say so plainly, keep the traceback for --debug
            if _damaged_store(e):
                # a table or column gone from a store its migrations made (dropped by hand,
                # a file of another program's under a cycle store's name): not a bug of cycle's
                if debug:
                    _print_traceback()
                click.echo(f"error: the store is damaged: {_masked(str(e))}\n"
                           "Restore it from a backup, or point "
                           "--store / CYCLE_STORE at another store.", err=True)
                return 2
            if debug:
                _print_traceback()
            click.echo(
                f"internal error: {e.__class__.__name__}: {_masked(str(e))}\n"
                "This is a bug in cycle; run again with --debug for the traceback.",
                err=True,
            )
            code = EXIT_INTERNAL
        return code


def _damaged_store(error: Exception) -> bool:
    """Whether ``error`` is a store's table or column that is not there (SQLite's
    OperationalError, PostgreSQL's UndefinedTable / UndefinedColumn)."""
    import sqlite3

    if isinstance(error, sqlite3.OperationalError):
        return str(error).startswith(("no such table", "no such column"))
    return type(error).__name__ in ("UndefinedTable", "UndefinedColumn")


def _masked(text: str) -> str:
    """``text`` without the environment's keys and tokens, nor anything shaped like a key."""
    from cycle.llm.http import environment_secrets, redact

    return redact(text, *environment_secrets())


def _print_traceback() -> None:
    """The traceback of the error being handled, its causes' among them: the SDK error
    a provider's error is raised from carries the body as the provider sent it (a body
    that may quote the key), so the keys are masked here, in the last text cycle shows."""
    sys.stderr.write(_masked(traceback.format_exc()))


@click.group(cls=CycleGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.option(
    "--store",
    type=click.Path(dir_okay=False),
    default=None,
    help="The store: a SQLite file or a postgresql:// URL (default: $CYCLE_STORE, else "
    "cycle.yaml's store:, else .cycle/cycle.db beside cycle.yaml).",
)
@click.version_option(version=__version__, prog_name="cycle")
@click.pass_context
def cli(ctx: click.Context, debug: bool, store: str | None) -> None:
    """cycle: improve LLM prompts with evidence.

    Evaluate a prompt on test cases, let an improver propose edits, review
    them, keep every version in a store with diffs and rollback.
    """
    load_env(Path.cwd())
    ctx.obj = CliContext(debug=debug, store=store)


def main() -> None:
    """Entry point of the ``cycle`` console command."""
    heap.own()
    cli.main()
