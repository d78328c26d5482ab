"""Benchmark the prompt store on a store holding 100,000 versions, on SQLite and PostgreSQL.

    .venv/bin/python benchmarks/bench_store.py [--backend sqlite|postgresql|both]
        [--versions 100000] [--reps 200] [--pg-url URL]
    .venv/bin/python benchmarks/bench_store.py --run [--cases 2000] [-c 16] [--pairs 3]
        [--latency S] [--no-reports]
    .venv/bin/python benchmarks/bench_store.py --profile DIR    # one run each under cProfile

**Operations** (the default): each backend's store is built fast with bulk inserts
through the real schema (the migrations of ``Store.open``; on PostgreSQL with COPY), then
each operation a user or the cycle does is timed through the public API: create a
version, resolve a label, list a page of history, diff two versions, roll back. Prints
medians and p95 in milliseconds as a Markdown table, the backends side by side. Target:
every median under 5 ms.

**A run** (``--run``): ``cycle run`` of 2,000 cases (an agent call and an LLM-judge call
each, bench_scale's project) at concurrency 16, each in its own process against the
loopback server in another (zero latency unless ``--latency``), writing to a fresh SQLite
file or a fresh PostgreSQL schema, in interleaved pairs (each backend first in turn: the
machine is shared). Per run: wall, the cycle process's CPU (its rusage, user + system),
model calls (rows of the store's ``calls``), CPU per call; on the throw-away server also
the PostgreSQL processes' CPU over the run (from /proc). Target: PostgreSQL's CPU per
model call within 1.10x of SQLite's (median of the pairs' ratios). ``--no-reports``: the
run without its reports (which read the stored results back a case at a time);
``--profile DIR``: one run per backend under cProfile, timed by CPU.

PostgreSQL is a throw-away cluster (cycle/testing/postgres.py: Debian's binaries) unless
``--pg-url`` names a database, in which the benchmark makes schemas of its own and drops
them. Without PostgreSQL's binaries or psycopg, ``--backend both`` measures SQLite alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cycle.records import Prompt
from cycle.store import Store

BIG = "bench"  # the prompt every timing uses: the one with the longest history
SYSTEM = (
    "You are a support agent for Acme Widgets. Answer the customer's question in at most three "
    "sentences, in plain words, without promising refunds the policy does not allow.\n"
) * 4
BACKENDS = ("sqlite", "postgresql")
NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}

_VERSION_COLUMNS = ("prompt_id", "seq", "version", "hash", "parent", "source", "message",
                    "created_at", "system", "user_template", "params", "metadata")
_LABEL_COLUMNS = ("prompt_id", "name", "version", "updated_at")
_MOVE_COLUMNS = ("prompt_id", "label", "from_version", "to_version", "action", "reason", "who", "at")


def content(pid: str, i: int) -> Prompt:
    return Prompt(
        id=pid,
        system=f"{SYSTEM}Revision {i}: keep the tone warm and the facts exact.\n",
        user_template="Customer message:\n{{ input }}\n",
        params={"model": "openai:gpt-4o-mini", "temperature": round((i % 10) / 10, 1), "max_tokens": 300},
    )


def rows(total: int, big: int) -> dict[str, tuple[tuple[str, ...], list[tuple]]]:
    """The tables' rows of ``total`` versions: ``big`` of them for BIG, the rest 100 per
    prompt; each table's (columns, rows), in the order they must be inserted."""
    plan: list[tuple[str, int]] = [(BIG, big)]
    rest = total - big
    plan += [(f"prompt-{n:05d}", 100) for n in range(rest // 100)]
    now = "2026-11-21T09:00:00.000000+00:00"
    prompts, versions, labels, moves = [], [], [], []
    for pid, count in plan:
        prompts.append((pid, now))
        for i in range(count):
            p = content(pid, i)
            versions.append((
                pid, i + 1, f"1.0.{i}", p.content_hash, f"1.0.{i - 1}" if i else None,
                "initial" if i == 0 else "improver", f"round {i}", now, p.system, p.user_template,
                json.dumps(p.params), "{}",
            ))
        last = f"1.0.{count - 1}"
        labels += [(pid, "head", last, now), (pid, "production", "1.0.0", now)]
        moves += [(pid, "head", None, last, "save", "", "user", now),
                  (pid, "production", None, "1.0.0", "save", "", "user", now)]
    return {"prompts": (("id", "created_at"), prompts), "versions": (_VERSION_COLUMNS, versions),
            "labels": (_LABEL_COLUMNS, labels), "label_moves": (_MOVE_COLUMNS, moves)}


def build(store: Store, target: str | Path, total: int, big: int) -> None:
    """Bulk-insert ``total`` versions through the real schema: on SQLite in one
    transaction of executemany, on PostgreSQL by COPY on a connection of its own."""
    tables = rows(total, big)
    if store.dialect.name == "sqlite":
        with store.transaction() as db:
            for table, (columns, values) in tables.items():
                marks = ", ".join("?" * len(columns))
                db.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                               values)
        store.db.execute("ANALYZE")
        return
    import psycopg

    with psycopg.connect(str(target)) as conn:  # one transaction, committed on leaving
        for table, (columns, values) in tables.items():
            with conn.cursor().copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in values:
                    copy.write_row(row)
    store.db.execute("ANALYZE")


def size_mb(store: Store, target: str | Path) -> float:
    if store.dialect.name == "sqlite":
        return Path(target).stat().st_size / 1e6
    (size,) = store.db.execute(
        "SELECT sum(pg_total_relation_size(quote_ident(table_schema) || '.' || "
        "quote_ident(table_name))) FROM information_schema.tables "
        "WHERE table_schema = current_schema()").fetchone()
    return float(size) / 1e6


def timed(fn: Callable[[int], object], reps: int) -> tuple[float, float]:
    samples = []
    for i in range(reps):
        start = time.perf_counter()
        fn(i)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def operations(store: Store, big: int, reps: int) -> list[tuple[str, float, float]]:
    """Each operation's median and p95 in ms."""
    measured: list[tuple[str, float, float]] = []
    prompts = len(store.list_prompts())

    def create(i: int) -> None:
        store.save_version(content(BIG, big + i), source="improver", message="bench")

    measured.append(("create a version (save_version, new content)", *timed(create, reps)))
    measured.append(("save identical content (dedupe hit)", *timed(lambda i: store.save_version(content(BIG, i)), reps)))
    measured.append(("resolve a label (resolve 'bench@production')", *timed(lambda i: store.resolve(f"{BIG}@production"), reps)))
    measured.append(("resolve a version number", *timed(lambda i: store.resolve(f"{BIG}@1.0.{i * 37}"), reps)))
    measured.append(("history, first page of 50", *timed(lambda i: store.history(BIG, limit=50), reps)))
    measured.append(("history, page of 50 at offset 5,000", *timed(lambda i: store.history(BIG, limit=50, offset=5000), reps)))
    measured.append((f"list every prompt (list_prompts, {prompts:,} prompts)", *timed(lambda i: store.list_prompts(), 20)))
    measured.append(("diff two versions (per field)", *timed(lambda i: store.diff(BIG, f"1.0.{i}", "head"), reps)))
    measured.append(("roll back head (rollback)", *timed(
        lambda i: store.rollback(BIG, f"1.0.{(i * 53) % big}", reason="bench"), reps)))
    measured.append(("move a label (set_label)", *timed(
        lambda i: store.set_label(BIG, "staging", f"1.0.{(i * 31) % big}"), reps)))
    return measured


# -- where the stores live ---------------------------------------------------------------


def pg_unavailable() -> str | None:
    """Why no throw-away PostgreSQL can be started here (None: it can)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'cycle[postgres]')"
    from cycle.testing.postgres import find_binaries

    found = find_binaries()
    return found if isinstance(found, str) else None


class Postgres:
    """Fresh schemas, one per store: on a throw-away cluster, or in the database of
    ``--pg-url`` (its schemas dropped on leaving)."""

    def __init__(self, stack: ExitStack, url: str | None) -> None:
        self.url = url
        self.server = None
        self._made: list[str] = []
        if url is None:
            from cycle.testing.postgres import ThrowawayPostgres

            self.server = stack.enter_context(ThrowawayPostgres())
        else:
            stack.callback(self._drop)

    def schema(self, name: str) -> str:
        if self.server is not None:
            return self.server.schema_url(name)
        import psycopg

        assert self.url is not None
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            conn.execute(f'CREATE SCHEMA "{name}"')
        self._made.append(name)
        return f"{self.url}{'&' if '?' in self.url else '?'}options=-csearch_path%3D{name}"

    def _drop(self) -> None:
        import psycopg

        assert self.url is not None
        with psycopg.connect(self.url, autocommit=True) as conn:
            for name in self._made:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

    def cpu(self) -> float | None:
        """CPU seconds (user + system) of the throw-away cluster's processes so far: the
        postmaster's own and its reaped children's (a backend that exited), and each live
        child's. None on a server of ``--pg-url`` (not ours to read)."""
        if self.server is None:
            return None
        tick = os.sysconf("SC_CLK_TCK")
        pid = int((self.server.data / "postmaster.pid").read_text().split()[0])
        total = 0
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()  # from field 3 (state) on
            ppid, utime, stime, cutime, cstime = (int(fields[i]) for i in (1, 11, 12, 13, 14))
            if int(proc.name) == pid:
                total += utime + stime + cutime + cstime
            elif ppid == pid:
                total += utime + stime
        return total / tick


@contextmanager
def backends(wanted: list[str], pg_url: str | None) -> Iterator[tuple[list[str], Postgres | None]]:
    with ExitStack() as stack:
        pg = None
        if "postgresql" in wanted:
            why = None if pg_url else pg_unavailable()
            if why and wanted == list(BACKENDS):
                print(f"PostgreSQL left out: {why}\n")
                wanted = ["sqlite"]
            elif why:
                raise SystemExit(f"no PostgreSQL: {why}")
            else:
                pg = Postgres(stack, pg_url)
        yield wanted, pg


# -- the operations ----------------------------------------------------------------------


def bench_operations(args: argparse.Namespace, asked: list[str]) -> None:
    measured: dict[str, list[tuple[str, float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, backends(asked, args.pg_url) as (wanted, pg):
        for backend in wanted:
            if backend == "sqlite":
                target: str | Path = Path(args.path or Path(tmp) / "cycle.db")
            else:
                assert pg is not None
                target = pg.schema("bench_store_ops")
            store = Store.open(target)
            t0 = time.perf_counter()
            build(store, target, args.versions, args.big)
            built = time.perf_counter() - t0
            count = store.db.execute("SELECT count(*) FROM versions").fetchone()[0]
            print(f"{NAMES[backend]}: {count:,} versions, {len(store.list_prompts()):,} prompts, "
                  f"{size_mb(store, target):.0f} MB, built in {built:.1f} s", flush=True)
            measured[backend] = operations(store, args.big, args.reps)
            store.close()

    print(f"\n| operation ({args.reps} repetitions; list: 20) | "
          + " | ".join(f"{NAMES[b]} median ms | {NAMES[b]} p95 ms" for b in wanted)
          + (" | median PG / SQLite |" if len(wanted) == 2 else " |"))
    print("| --- |" + " ---: | ---: |" * len(wanted) + (" ---: |" if len(wanted) == 2 else ""))
    first = measured[wanted[0]]
    for i, (name, _, _) in enumerate(first):
        cells = [f"{measured[b][i][1]:.2f} | {measured[b][i][2]:.2f}" for b in wanted]
        ratio = (f" | {measured['postgresql'][i][1] / measured['sqlite'][i][1]:.1f}x"
                 if len(wanted) == 2 else "")
        print(f"| {name} | " + " | ".join(cells) + ratio + " |")
    # the target covers what a user or the cycle does per step; listing every prompt is shown
    # for scale but reads the whole prompts table by design
    for b in wanted:
        slow = [name for name, median, _ in measured[b] if median >= 5.0 and not name.startswith("list")]
        print(f"\n{NAMES[b]}: " + ("every targeted median under 5 ms" if not slow
                                   else f"OVER 5 ms: {', '.join(slow)}"))


# -- a run -------------------------------------------------------------------------------


#: ``python -c PROFILED OUT cycle-arguments...``: the cycle command under cProfile, timed by
#: CPU (process_time: a wait for a server is no cost of the client), its stats to OUT
PROFILED = """
import cProfile, runpy, sys, time
out = sys.argv.pop(1)
profile = cProfile.Profile(time.process_time)
profile.enable()
try:
    runpy.run_module("cycle", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
finally:
    profile.disable()
    profile.dump_stats(out)
"""


def one_run(backend: str, args: argparse.Namespace, work: Path, pg: Postgres | None,
            number: int, profile: Path | None = None) -> dict:
    """One ``cycle run`` writing to a fresh store of ``backend`` (under cProfile, its stats
    to ``profile``, if given)."""
    from bench_latency import server, timed
    from bench_scale import project

    proc, url = server(args.latency, work / f"timeline-{backend}-{number}.json")
    try:
        project_dir = work / f"project-{backend}-{number}"
        project(project_dir, args.cases, url)
        if backend == "sqlite":
            target = str(project_dir / "s.db")
        else:
            assert pg is not None
            target = pg.schema(f"bench_run_{number}")
        cycle = ["-m", "cycle"] if profile is None else ["-c", PROFILED, str(profile)]
        before = pg.cpu() if pg is not None and backend == "postgresql" else None
        wall, cpu, _, _ = timed([sys.executable, *cycle, "--store", target, "run", "cycle.yaml",
                                 "-n", "1", "-c", str(args.concurrency), "--no-cache", "-q",
                                 *(["--no-reports"] if args.no_reports else [])], project_dir)
        after = pg.cpu() if before is not None and pg is not None else None
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    with Store.open(target, create=False) as store:
        calls, errors = store.db.execute(
            "SELECT count(*), count(error) FROM calls").fetchone()
    return {"wall": wall, "cpu": cpu, "calls": calls, "errors": errors,
            "server_cpu": None if before is None or after is None else after - before}


def profile_runs(args: argparse.Namespace, asked: list[str]) -> None:
    """One run on each backend under cProfile: where the store's CPU goes."""
    import pstats

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    out = Path(args.profile)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-store-profile-") as tmp, \
            backends(asked, args.pg_url) as (wanted, pg):
        for number, backend in enumerate(wanted):
            stats_file = out / f"{backend}.prof"
            r = one_run(backend, args, Path(tmp), pg, number, profile=stats_file)
            stats = pstats.Stats(str(stats_file))
            print(f"\n== {NAMES[backend]}: {r['calls']} calls, {r['cpu']:.1f} s CPU under the "
                  f"profiler ({stats.total_tt:.1f} s profiled); {stats_file}")
            stats.sort_stats("cumulative").print_stats(r"cycle/store/|psycopg/", 25)


def bench_run(args: argparse.Namespace, asked: list[str]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    got: dict[str, list[dict]] = {b: [] for b in asked}
    print(f"cycle run of {args.cases:,} cases at concurrency {args.concurrency}, latency "
          f"{args.latency * 1000:.0f} ms, {args.pairs} pairs"
          + (", no reports" if args.no_reports else "") + "\n")
    print(f"{'pair':>4} {'backend':>10} {'wall s':>7} {'CPU s':>7} {'calls':>6} "
          f"{'ms CPU/call':>11} {'server CPU s':>12}")
    with tempfile.TemporaryDirectory(prefix="bench-store-run-") as tmp, \
            backends(asked, args.pg_url) as (wanted, pg):
        for i in range(args.pairs):
            order = wanted if i % 2 == 0 else list(reversed(wanted))
            for backend in order:
                r = one_run(backend, args, Path(tmp), pg, i * 2 + order.index(backend))
                got[backend].append(r)
                server_cpu = "" if r["server_cpu"] is None else f"{r['server_cpu']:.2f}"
                print(f"{i + 1:>4} {NAMES[backend]:>10} {r['wall']:>7.2f} {r['cpu']:>7.2f} "
                      f"{r['calls']:>6} {1000 * r['cpu'] / r['calls']:>11.3f} {server_cpu:>12}"
                      + (f"  {r['errors']} errors" if r["errors"] else ""), flush=True)

    print("\n| backend | wall | cycle CPU | calls | ms CPU per call | PostgreSQL server CPU "
          "| ms CPU per call, cycle + server |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for backend in wanted:
        runs = got[backend]
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        calls = statistics.median(r["calls"] for r in runs)
        per = statistics.median(1000 * r["cpu"] / r["calls"] for r in runs)
        servers = [r["server_cpu"] for r in runs if r["server_cpu"] is not None]
        server = f"{statistics.median(servers):.2f} s" if servers else ""
        both = (f"{statistics.median(1000 * (r['cpu'] + r['server_cpu']) / r['calls'] for r in runs):.3f}"
                if servers else f"{per:.3f}" if backend == "sqlite" else "")
        print(f"| {NAMES[backend]} | {wall:.2f} s | {cpu:.2f} s | {calls:,.0f} | {per:.3f} | "
              f"{server} | {both} |")
    if len(wanted) == 2:
        pairs = list(zip(got["postgresql"], got["sqlite"], strict=True))
        cpu_ratios = [(p["cpu"] / p["calls"]) / (s["cpu"] / s["calls"]) for p, s in pairs]
        wall_ratios = [p["wall"] / s["wall"] for p, s in pairs]
        ratio = statistics.median(cpu_ratios)
        print(f"\nPostgreSQL / SQLite, per pair: CPU per call "
              f"{', '.join(f'{x:.3f}' for x in cpu_ratios)} (median **{ratio:.3f}x**); wall "
              f"{', '.join(f'{x:.3f}' for x in wall_ratios)} (median {statistics.median(wall_ratios):.3f}x)")
        print("target (within 1.10x): " + ("met" if ratio <= 1.10 else "NOT met"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=[*BACKENDS, "both"], default="both")
    ap.add_argument("--pg-url", default=None,
                    help="a PostgreSQL database to make the stores' schemas in (default: a "
                    "throw-away cluster)")
    ap.add_argument("--versions", type=int, default=100_000)
    ap.add_argument("--big", type=int, default=10_000, help="versions of the prompt being timed")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--path", default=None, help="the SQLite store file (default: a temporary one)")
    ap.add_argument("--run", action="store_true",
                    help="time `cycle run` writing to each backend instead of the operations")
    ap.add_argument("--cases", type=int, default=2000, help="--run: cases of the run")
    ap.add_argument("-c", "--concurrency", type=int, default=16, help="--run: cases in flight")
    ap.add_argument("--pairs", type=int, default=3, help="--run: pairs of runs, interleaved")
    ap.add_argument("--latency", type=float, default=0.0,
                    help="--run: seconds the loopback server takes per answer")
    ap.add_argument("--no-reports", action="store_true",
                    help="--run: cycle run --no-reports (the run without its reports' reads)")
    ap.add_argument("--profile", metavar="DIR", default=None,
                    help="one run per backend under cProfile (CPU time), stats to DIR")
    args = ap.parse_args()
    wanted = list(BACKENDS) if args.backend == "both" else [args.backend]
    if args.profile:
        profile_runs(args, wanted)
    elif args.run:
        bench_run(args, wanted)
    else:
        bench_operations(args, wanted)


if __name__ == "__main__":
    main()
