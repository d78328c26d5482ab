"""The store on PostgreSQL (issue 36), against a real server (tests/conftest.py's
throw-away cluster): every command as on SQLite, many writers at once, migrations that
never half-apply, the password never shown, and clear refusals."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.errors import NotFoundError, StoreError, StoreFormatError
from cycle.prompts.semver import parse
from cycle.store import Store
from cycle.store.store import shown_target
from cycle.testing.postgres import PASSWORD
from tests.loop.test_kill_resume import WRAPPER
from tests.stored import copied

ROOT = Path(__file__).resolve().parents[2]


def cycle(store: str | Path, *args: str):
    r = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    assert PASSWORD not in r.output
    return r


def _normal(text: str) -> str:
    """Output with what differs between any two runs (ids, times, durations) blanked."""
    text = re.sub(r"(run|c)-\d{8}-\d{6}-[0-9a-f]{6}", r"\1-ID", text)
    text = re.sub(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(\+00:00|Z)?", "TIME", text)
    text = re.sub(r"\"(latency\w*|elapsed|duration|seconds)\": [0-9.e-]+", r'"\1": N', text)
    return re.sub(r"\d+(\.\d+)? ?(ms|s)\b", r"N \2", text)


def _session(store: str | Path, project: Path, tmp: Path) -> list[str]:
    """A person's first day, command by command, on ``store``; each command's output."""
    config = str(project / "cycle.yaml")
    outputs: list[str] = []

    def say(*args: str, codes: tuple[int, ...] = (0,)) -> str:
        r = cycle(store, *args)
        assert r.exit_code in codes, (args, r.output)
        shown = r.output.replace(shown_target(store), "STORE")
        outputs.append(_normal(f"$ {' '.join(args)}\n{shown}"))
        return r.output

    say("prompt", "import", str(project / "prompts" / "support-reply.yaml"))
    say("run", config, "-n", "2", "--no-reports", "-q", codes=(0, 1))
    run_id = json.loads(say("runs", "--json"))[0]["id"]
    say("improve", config, "--headless", "--yes", "--report-dir", str(tmp / "reports"))
    say("history", "support-reply", "--json")
    say("diff", "support-reply", "1.0.0", "head")
    say("label", "support-reply", "1.0.1", "staging")
    say("promote", "support-reply", "1.0.1")
    say("rollback", "support-reply", "--to", "1.0.0")
    say("show", "support-reply@staging")
    say("prompt", "list", "--json")
    say("runs", "--json")
    say("runs", "show", run_id, "--json")
    cycle_id = json.loads(say("cycles", "--json"))[0]["id"]
    say("cycles", "--json")
    newest = json.loads(say("runs", "--json"))[0]["id"]
    say("compare", run_id, newest, "--json", codes=(0, 1))
    say("report", run_id, "--no-write")
    out = tmp / "labels.jsonl"
    say("judge", "sample", run_id, "--n", "6", "--out", str(out), "--labeler", "ann")
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    for k, x in enumerate(lines):
        x["score"] = float(40 + 7 * k % 50)
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    say("judge", "labels", "import", str(out))
    say("judge", "agreement", run_id, "--json")
    say("judge", "labels", "export", run_id)
    say("prompt", "export", "support-reply@staging")
    assert cycle_id
    return outputs


def test_every_command_gives_the_same_answers_on_postgresql_as_on_sqlite(postgres, tmp_path):
    """The quickstart's first day (import, run, improve, history, diff, labels, promote,
    rollback, runs, cycles, compare, report, people's labels and agreement, export) on both
    backends (batch jobs and resumes: tests/cli/test_batch_cli.py and below): the
    offline model is deterministic, so every output is the same but for ids and times."""
    on_sqlite = _session(tmp_path / "s.db", copied("quickstart", tmp_path / "a"), tmp_path / "a")
    on_pg = _session(postgres.schema_url(), copied("quickstart", tmp_path / "b"), tmp_path / "b")
    assert len(on_pg) == len(on_sqlite)
    for a, b in zip(on_sqlite, on_pg, strict=True):
        assert b.replace("/b/", "/a/") == a


WRITER = """
import sys
from cycle.records import Prompt
from cycle.store import Store

url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
# every writer opens the blank schema at once: it is migrated once
with Store.open(url) as store:
    for k in range(n):
        store.save_version(Prompt(id=f"own-{name}", system=f"step {k}"), message=name)
        v = store.save_version(Prompt(id="shared", system=f"{name} step {k}"), message=name,
                               who=name, move_head=False)
        store.set_label("shared", "staging", v.version, who=name)
        store.save_version(Prompt(id="same", system="identical content from all"))
"""


def test_eight_processes_on_one_postgresql_store_lose_nothing(postgres):
    """8 writers (as on 8 machines: each its own connection) create versions and move a
    label at once: no version number twice, none skipped, every label move recorded in
    a chain (each move starts where the one before it ended)."""
    url, writers, n = postgres.schema_url(), 8, 12
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, f"w{i}", str(n)], env=env,
                              stderr=subprocess.PIPE, text=True) for i in range(writers)]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    with Store.open(url) as store:
        for i in range(writers):
            assert store.count_versions(f"own-w{i}") == n
        shared = store.history("shared", limit=1000)
        numbers = sorted(parse(v.version) for v in shared)
        assert numbers == [(1, 0, k) for k in range(writers * n)]  # none twice, none skipped
        assert sorted(v.seq for v in shared) == list(range(1, writers * n + 1))
        moves = store.label_moves("shared", label="staging", limit=1000)[::-1]
        assert len(moves) == writers * n
        assert [m.from_version for m in moves[1:]] == [m.to_version for m in moves[:-1]]
        assert store.labels("shared")["staging"] == moves[-1].to_version
        assert {m.who for m in moves} == {f"w{i}" for i in range(writers)}
        assert store.count_versions("same") == 1


def test_migrations_never_half_apply_and_a_newer_store_is_refused(postgres, monkeypatch):
    from cycle.store import migrations

    url = postgres.schema_url()

    def m999_broken(db) -> None:
        db.execute("CREATE TABLE half (x INTEGER)")
        raise RuntimeError("a migration failing halfway")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, m999_broken])
    with pytest.raises(RuntimeError, match="halfway"):
        Store.open(url)
    with _raw(url) as db:  # nothing of it is left: not the table, not a record
        assert db.execute("SELECT count(*) FROM information_schema.tables "
                          "WHERE table_schema = current_schema()").fetchone()[0] == 0
    monkeypatch.undo()

    with Store.open(url) as store:  # this release's migrations, all of them
        store.db.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                         "VALUES ('cycle', 'm999_from_the_future', 'now')")
    with pytest.raises(StoreFormatError, match="newer release of cycle"):
        Store.open(url)


def test_a_database_of_other_tables_is_refused_and_a_blank_one_is_not_a_store_to_read(postgres):
    url = postgres.schema_url()
    with _raw(url) as db:
        db.execute("CREATE TABLE customers (id INTEGER)")
    with pytest.raises(StoreFormatError, match="not a cycle store") as e:
        Store.open(url)
    assert "search_path" in (e.value.hint or "")
    blank = postgres.schema_url()
    with pytest.raises(NotFoundError, match="no cycle store"):
        Store.open(blank, create=False)
    r = cycle(blank, "history", "anything")
    assert r.exit_code != 0 and "no cycle store at postgresql://cycle:***@" in r.output


def test_the_password_never_reaches_a_message_a_row_or_a_report(postgres, tmp_path):
    wrong = postgres.url().replace(PASSWORD, "not-the-" + PASSWORD)
    with pytest.raises(StoreError) as e:
        Store.open(wrong)
    said = f"{e.value} {e.value.hint}"
    assert "password authentication failed" in said and "cycle:***@" in said
    assert PASSWORD not in said
    # a server that is not there: the same
    r = cycle(postgres.url().replace(str(postgres.port), "1"), "history", "x")
    assert r.exit_code != 0 and "cannot open the store postgresql://cycle:***@" in r.output
    # a whole run and cycle: not in a row of any table, nor in a report
    url = postgres.schema_url()
    project = copied("quickstart", tmp_path)
    r = cycle(url, "improve", str(project / "cycle.yaml"), "--headless", "--yes",
              "--report-dir", str(tmp_path / "reports"))
    assert r.exit_code == 0, r.output
    with Store.open(url) as store:
        tables = store.dialect.tables(store.db)
        for table in tables:
            for row in store.db.execute(f"SELECT * FROM {table}"):
                assert PASSWORD not in repr(row), table
    for report in (tmp_path / "reports").iterdir():
        assert PASSWORD not in report.read_text(errors="replace")


def test_a_missing_driver_says_how_to_install_it(postgres, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(StoreError, match="driver is not installed") as e:
        Store.open(postgres.url())
    assert "cycle[postgres]" in (e.value.hint or "")


def _raw(url: str):
    import psycopg

    return psycopg.connect(url, autocommit=True)


def test_cycle_yaml_names_the_team_store_and_refuses_its_password(postgres, tmp_path,
                                                                   monkeypatch):
    """`store:` in cycle.yaml: every command of the project uses it, also those that do not
    read the config (history, runs), from the project's folder; CYCLE_STORE comes first;
    a URL with its password in the shared file is refused, naming the fix."""
    url = postgres.schema_url()
    project = copied("quickstart", tmp_path)
    config = project / "cycle.yaml"
    config.write_text(config.read_text() + f"store: {url.replace(':' + PASSWORD, '')}\n")
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    monkeypatch.chdir(project)
    r = CliRunner().invoke(cli, ["run", "cycle.yaml", "-q", "--no-reports"])
    assert r.exit_code in (0, 1), r.output
    assert not (project / ".cycle" / "cycle.db").exists()  # the run went to the team store
    r = CliRunner().invoke(cli, ["history", "support-reply"])
    assert r.exit_code == 0 and "1.0.0" in r.output, r.output
    with Store.open(url) as store:
        assert len(store.runs.recent()) == 1
    monkeypatch.setenv("CYCLE_STORE", str(tmp_path / "mine.db"))
    r = CliRunner().invoke(cli, ["run", "cycle.yaml", "-q", "--no-reports"])
    assert (tmp_path / "mine.db").exists()
    monkeypatch.delenv("CYCLE_STORE")

    config.write_text(config.read_text().replace("store: postgresql://cycle@",
                                                 f"store: postgresql://cycle:{PASSWORD}@"))
    for args in (["run", "cycle.yaml"], ["history", "support-reply"]):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 2, r.output
        assert "PGPASSWORD" in r.output and "cycle.yaml" in r.output
        assert PASSWORD not in r.output and "Traceback" not in r.output




def test_a_cycle_killed_on_one_machine_resumes_on_another_paying_nothing_twice(postgres,
                                                                                tmp_path):
    """SIGKILL mid-round in one checkout; another checkout of the project (another
    machine: the lease names a host that is not this one) resumes it from the team store,
    unasked: the killed process's session ended, and its lease with it (before leases were
    bound to sessions, this needed --take-over). The results stored before the kill are
    not asked for again."""
    import signal
    import time

    import yaml

    url = postgres.schema_url()
    checkouts = []
    for name in ("laptop", "ci"):
        project = copied("quickstart", tmp_path / name)
        config = yaml.safe_load((project / "cycle.yaml").read_text())
        config.update(agent="slow:default", judge="slow:default", improver="slow:default",
                      run={"iterations": 3, "concurrency": 2},
                      improve={"acceptance": "significant", "stop": {"max_rounds": 2}})
        (project / "cycle.yaml").write_text(yaml.safe_dump(config))
        (project / "run_cycle.py").write_text(WRAPPER)  # a slow offline model
        checkouts.append(project)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CYCLE_STORE": url}

    def start(project: Path, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "run_cycle.py", "improve", "cycle.yaml",
                                 "--headless", "--yes", *args], cwd=project,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    first = start(checkouts[0])
    with Store.open(url) as store:
        deadline = time.monotonic() + 60
        while store.db.execute("SELECT count(*) FROM results WHERE run_id LIKE '%-r1'"
                               ).fetchone()[0] < 4:
            assert first.poll() is None, first.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.01)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        kept = {tuple(r) for r in store.db.execute(
            "SELECT run_id, case_id, iteration FROM results")}
        paid = {(r[0], r[1], r[2]): r[3] for r in store.db.execute(
            "SELECT run_id, case_id, iteration, count(*) FROM calls WHERE run_id IS NOT NULL "
            "AND role = 'agent' GROUP BY run_id, case_id, iteration")}
        (cycle_id,) = store.db.execute("SELECT id FROM cycles").fetchone()
        store.db.execute("UPDATE locks SET host = 'laptop.example'")  # as if another machine's

    resumed = start(checkouts[1], "--resume", cycle_id)
    _, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err
    with Store.open(url) as store:
        status, reason = store.db.execute("SELECT status, stop_reason FROM cycles").fetchone()
        assert status == "finished" and reason.startswith("max_rounds"), reason
        assert store.db.execute(
            "SELECT count(*) FROM (SELECT 1 FROM results GROUP BY run_id, case_id, iteration "
            "HAVING count(*) > 1) AS twice").fetchone()[0] == 0
        after = {(r[0], r[1], r[2]): r[3] for r in store.db.execute(
            "SELECT run_id, case_id, iteration, count(*) FROM calls WHERE run_id IS NOT NULL "
            "AND role = 'agent' GROUP BY run_id, case_id, iteration")}
    for key in kept:
        assert after.get(key) == paid.get(key), key  # a stored result was not paid again


def test_a_lease_is_free_once_its_holders_session_ends_and_refused_while_connected(postgres):
    """A lease held on another machine (its host is not this one's, so its process cannot
    be looked at) is refused while the holder's session is connected, naming the machine
    and --take-over (for a machine gone without its session ending yet), and is free,
    unasked, once that session has ended: a process killed, crashed or cut from the
    server. A refusal leaves nothing held by the one refused."""
    import socket
    import time

    from cycle.errors import LockedError
    from cycle.store import locks

    url = postgres.schema_url()
    said = {"what": "run r-1", "resume_hint": "cycle run cycle.yaml --resume r-1"}
    holder = Store.open(url)
    locks.acquire(holder, "run:r-1", **said)
    holder.db.execute("UPDATE locks SET host = 'laptop.example'")  # as if another machine's
    with Store.open(url) as other:
        with pytest.raises(LockedError, match="on laptop.example .*still connected") as held:
            locks.acquire(other, "run:r-1", **said)
        assert "--take-over" in (held.value.hint or "")
        assert not locks.abandoned(other, "run:r-1")
        assert other.db.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                "AND pid = pg_backend_pid()").fetchone()[0] == 0
        holder.close()  # its session ends, as a killed process's does
        deadline = time.monotonic() + 10  # the server ends the backend as it reads the close
        while not locks.abandoned(other, "run:r-1"):
            assert time.monotonic() < deadline, "the lease outlived its holder's session"
            time.sleep(0.01)
        locks.acquire(other, "run:r-1", **said)
        assert other.db.execute("SELECT host, pid, session FROM locks").fetchone() == (
            socket.gethostname(), os.getpid(), 1)
        # a lease of an earlier release (bound to no session) on another machine is refused
        # as before, and the session lock taken while looking is given back
        locks.release(other, "run:r-1")
        other.db.execute("INSERT INTO locks (name, host, pid, acquired_at) "
                         "VALUES ('run:r-2', 'ci.example', 7, 'then')")
        with pytest.raises(LockedError, match="on ci.example \\(since then\\);"):
            locks.acquire(other, "run:r-2", **said)
        assert other.db.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                "AND pid = pg_backend_pid()").fetchone()[0] == 0


def test_the_connection_answers_as_sqlite3s_does(postgres, monkeypatch):
    """What the store relies on of its PostgreSQL connection (cycle/store/postgres.py),
    kept through the per-statement savings benchmarks/bench_store.py --run measured: bools
    stored as SQLite's 0/1, a cursor still read while later statements reuse dropped ones,
    psycopg's errors as sqlite3's, and a write transaction (BEGIN and the lock in one
    statement) that waits for another writer, then says the store is busy, rolled back."""
    from cycle.store import store as store_module

    url = postgres.schema_url()
    with Store.open(url) as store:
        db = store.db
        db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, flag INTEGER NOT NULL)")
        db.execute("INSERT INTO t (k, flag) VALUES (?, ?)", (1, True))
        db.executemany("INSERT INTO t (k, flag) VALUES (?, ?)", [(2, False), (3, True)])
        assert db.execute("SELECT k, flag FROM t ORDER BY k").fetchall() == [(1, 1), (2, 0), (3, 1)]
        assert db.execute("SELECT k FROM t WHERE flag = ? ORDER BY k", (True,)).fetchall() == [(1,), (3,)]
        kept = db.execute("SELECT k FROM t ORDER BY k")
        assert kept.fetchone() == (1,)
        for _ in range(5):  # later statements, their cursors dropped and reused
            assert db.execute("SELECT count(*) FROM t").fetchone() == (3,)
        assert kept.fetchall() == [(2,), (3,)]
        assert list(db.execute("SELECT k FROM t WHERE k > ? ORDER BY k", (1,))) == [(2,), (3,)]
        with pytest.raises(sqlite3.IntegrityError):
            db.execute("INSERT INTO t (k, flag) VALUES (?, ?)", (1, 0))
        with pytest.raises(sqlite3.IntegrityError):
            db.executemany("INSERT INTO t (k, flag) VALUES (?, ?)", [(9, None)])
        with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
            db.execute("SELECT * FROM no_such_table")
        assert not db.in_transaction

    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.5)
    with Store.open(url) as store, _raw(url) as other:
        other.execute("BEGIN")
        other.execute("SELECT pg_advisory_xact_lock(hashtext('cycle:' || current_schema()))")
        with pytest.raises(StoreError, match="is busy"), store.transaction():
            pass
        assert not store.db.in_transaction
        other.execute("COMMIT")
        with store.transaction() as db:
            assert db.in_transaction
            db.execute("INSERT INTO t (k, flag) VALUES (?, ?)", (4, 1))
        assert store.db.execute("SELECT count(*) FROM t").fetchone() == (4,)


def test_a_percent_sign_means_itself_with_and_without_parameters(postgres):
    with Store.open(postgres.schema_url()) as store:
        assert store.db.execute("SELECT 'a%b'").fetchone()[0] == "a%b"
        assert store.db.execute("SELECT 'a%b' || ?", ["?"]).fetchone()[0] == "a%b?"


def _terminate_cycles_backends(postgres, schema: str) -> int:
    """End every backend of cycle's on the store in ``schema`` (as an admin's
    pg_terminate_backend, or a server restart, does); how many."""
    import psycopg

    with psycopg.connect(postgres.url(), autocommit=True) as admin:
        return len(admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
            "'cycle' AND pid <> pg_backend_pid() AND query NOT LIKE %s",
            ("%pg_terminate_backend%",)).fetchall())


def test_a_connection_lost_mid_run_says_so_once_and_the_run_resumes(postgres, tmp_path):
    """The server ends cycle's connection while a run writes (pg_terminate_backend, as a
    restart does): one line saying the connection was lost and the exact command that
    resumes the run, no traceback, no "bug in cycle", no password; the resume finishes
    the run from what was stored (found by trying to break the team store)."""
    from cycle.errors import StoreConnectionLost
    from cycle.testing.server import LoopbackServer, Reply
    from tests.stored import loopback_project

    schema = "lost_mid_run"
    url = postgres.schema_url(schema)
    with Store.open(url) as store:  # the store exists before the run's own connection
        with pytest.raises(StoreConnectionLost, match="lost the connection") as lost:
            _terminate_cycles_backends(postgres, schema)
            store.db.execute("SELECT 1")
        assert PASSWORD not in str(lost.value) and "***" in str(lost.value)
        assert not store.db.in_transaction  # nothing to roll back: a transaction says so too
        with pytest.raises(StoreConnectionLost), store.transaction() as db:
            db.execute("SELECT 1")
    answered = []

    def responder(request):
        answered.append(1)
        if len(answered) == 4:  # the run has stored some results by now
            assert _terminate_cycles_backends(postgres, schema) >= 1
        return Reply(text="ok")

    with LoopbackServer(responder=responder) as srv:
        cfg = loopback_project(tmp_path, srv.openai_base_url, cases="abcdefgh",
                               criteria="[{id: c, check: {type: contains, values: [ok]}}]")
        r = cycle(url, "run", str(cfg), "--no-reports", "-q")
        assert r.exit_code == 2, r.output
        assert "error: lost the connection to the store" in r.output
        assert "Traceback" not in r.output and "bug in cycle" not in r.output
        with Store.open(url) as store:
            run_id = store.runs.recent(limit=1)[0].id
        assert f"cycle run {cfg} --resume {run_id}" in r.output
        r = cycle(url, "run", str(cfg), "--no-reports", "-q", "--resume", run_id)
        assert r.exit_code == 0, r.output
    with Store.open(url) as store:
        assert store.db.execute("SELECT status FROM runs").fetchall() == [("finished",)]
        assert store.db.execute(
            "SELECT count(*), count(DISTINCT case_id) FROM results").fetchone() == (24, 8)  # 3 iterations each


@pytest.mark.parametrize("password", ["kappa@zeta:omega/theta%zz", "alpha/gamma", "sigma%ss",
                                      "delta epsilon", "lambda?mu@nuxi"])
def test_a_password_not_percent_encoded_is_never_shown(postgres, password):
    """A password typed into the URL as it is, with @ / : % ? or a space (which the URL
    should have percent-encoded): the message masks it whole, in the URL and in libpq's
    own complaint that quotes the part it could not read, and says how to write it
    (found trying to break the team store: "cycle:ab/cd@..." was shown as it was, and
    libpq's 'invalid percent-encoded token: "pa%ss"' quoted the password)."""
    url = f"postgresql://cycle:{password}@127.0.0.1:{postgres.port}/postgres?application_name=me@x"
    r = cycle(url, "prompt", "list")
    assert r.exit_code == 2, r.output
    assert "error: cannot open the store postgresql://cycle:***@127.0.0.1:" in r.output
    for piece in {password, *re.split(r"[@:/% ?]", password)}:
        assert len(piece) < 3 or piece not in r.output, r.output
    assert "%40" in r.output  # how to write it


def test_an_at_sign_in_the_query_is_no_password():
    """An ``@`` only in a URL's query (an application_name) ends no user's part: nothing
    of the host is masked, and cycle.yaml may hold such a URL."""
    from cycle.store.postgres import has_password, masked

    for url in ("postgresql://db.example.com:5432/cycle?application_name=me@laptop",
                "postgresql://me@db.example.com:5432/cycle?application_name=me@laptop"):
        assert masked(url) == url and not has_password(url)
    assert masked("postgresql://me:pw@db:5432/c?application_name=me@x") == \
        "postgresql://me:***@db:5432/c?application_name=me@x"


def test_a_statement_timeout_of_the_databases_says_so(postgres):
    """A statement_timeout the administrator set (on the user or the database) cancels
    one of cycle's statements: said as that, with how to raise it, not as "is not a cycle
    store" (what opening said) nor as a bug (found trying to break the team store)."""
    with Store.open(postgres.schema_url()) as store:
        store.db.execute("SET statement_timeout = '20ms'")
        with pytest.raises(StoreError, match="cancelled a statement") as cancelled:
            store.db.execute("SELECT pg_sleep(5)")
        assert "statement_timeout" in str(cancelled.value) and PASSWORD not in str(cancelled.value)
        store.db.execute("SET statement_timeout = 0")
        assert store.db.execute("SELECT 1").fetchone() == (1,)  # the connection goes on


def test_a_schema_that_does_not_exist_is_named(postgres):
    """A URL whose search_path names no schema there is (a typo, or not created yet):
    said when opening, not as "No prompts yet" to a reader nor as "no schema has been
    selected to create in" to a writer (found trying to break the team store)."""
    url = f"{postgres.url()}?options=-csearch_path%3Dno_such_schema"
    for args in (("prompt", "list"), ("prompt", "import", str(ROOT / "examples" / "quickstart"
                                                            / "prompts" / "support-reply.yaml"))):
        r = cycle(url, *args)
        assert r.exit_code == 2, r.output
        assert "names no schema that exists (search_path no_such_schema)" in r.output


def test_options_a_pooler_drops_are_refused_not_written_to_another_schema(postgres,
                                                                         monkeypatch):
    """Between cycle and the server, a pooler that drops startup options (PgBouncer with
    ``ignore_startup_parameters = options``; found trying PgBouncer 1.18) made the URL's
    schema silently public: the store went there. The session's search_path is checked
    against the URL's, and a store that would go elsewhere is refused, naming both."""
    import psycopg

    url = postgres.schema_url("pooled")
    real = psycopg.connect

    def pooler(conninfo, **kwargs):  # what reaches the server: no options
        kwargs.pop("options", None)
        return real(conninfo.split("?")[0], **kwargs)

    monkeypatch.setattr(psycopg, "connect", pooler)
    r = cycle(url, "prompt", "import", str(ROOT / "examples" / "quickstart" / "prompts"
                                          / "support-reply.yaml"))
    assert r.exit_code == 2, r.output
    assert "search_path '\"$user\", public', not the URL's 'pooled'" in r.output
    monkeypatch.setattr(psycopg, "connect", real)
    with real(postgres.url(), autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM information_schema.tables WHERE "
                             "table_schema = 'public'").fetchone() == (0,)
