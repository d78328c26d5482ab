"""The store's schema, as numbered, append-only migrations.

Applied by ``sqlite_utils.migrations.Migrations``: each migration runs in a
transaction together with the record of it (table ``_sqlite_migrations``,
set ``"cycle"``), so a store written by an older release migrates itself when
opened. Never edit a migration that has shipped: add the next one.

One definition for both databases: on PostgreSQL the same migrations run, each
statement through ``cycle.store.postgres.pg_ddl`` (SQLite's types and row ids as
PostgreSQL has them), with the same record table, all in one transaction (PostgreSQL's
DDL is transactional: a migration never half-applies). So a migration is written in the
SQL both share (``ALTER TABLE ADD COLUMN``, ``CREATE TABLE``/``INDEX``, ``ON CONFLICT``);
what only SQLite has (``PRAGMA``, ``sqlite_master``) goes through ``dialect_of(db)``.

Opening also refuses what is not ours: a file that is not SQLite, a SQLite
file with tables but no cycle migration record, or a store recording a
migration this release does not know (written by a newer cycle).

Opening a store that is up to date reads the record with plain SQL, and a new store is
made with plain SQL too (``_apply_to_new``, the same tables and record sqlite_utils would
write): importing sqlite_utils costs about 45 ms, a fifth of what ``cycle run`` spent
starting beyond the SDK's own import, and only an older store that needs migrating pays it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cycle.errors import StoreFormatError
from cycle.store.postgres import dialect_of, pg_ddl

if TYPE_CHECKING:
    from sqlite_utils import Database

MIGRATION_SET = "cycle"
#: where sqlite_utils.migrations records each migration applied (one row per migration)
RECORD_TABLE = "_sqlite_migrations"

#: this release's migrations, in order
MIGRATIONS: list[Callable[[Database], None]] = []


def migration(fn: Callable[[Database], None]) -> Callable[[Database], None]:
    """Register ``fn`` as the next migration (its name is its record)."""
    MIGRATIONS.append(fn)
    return fn


def apply_migrations(conn: sqlite3.Connection, **options: Any) -> None:
    """Apply the migrations ``conn``'s store lacks, each with its record in one transaction
    (``options`` go to ``Migrations.apply``, e.g. ``stop_before``)."""
    if dialect_of(conn).name == "postgresql":
        _apply_on_postgres(conn, **options)
        return
    if not options and not dialect_of(conn).tables(conn):
        _apply_to_new(conn)
        return
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations

    migrations = Migrations(MIGRATION_SET)
    for fn in MIGRATIONS:
        migrations()(fn)
    migrations.apply(Database(conn, execute_plugins=False), **options)


@migration
def m001_initial(db: Database) -> None:
    """Every table of the first release: prompt versions, labels, runs, cycles."""
    _run(
        db,
        """
        CREATE TABLE prompts (
            id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL
        );
        CREATE TABLE versions (
            prompt_id TEXT NOT NULL REFERENCES prompts(id),
            seq INTEGER NOT NULL,
            version TEXT NOT NULL,
            hash TEXT NOT NULL,
            parent TEXT,
            source TEXT NOT NULL CHECK (source IN ('initial', 'improver', 'manual', 'rollback')),
            message TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            system TEXT NOT NULL,
            user_template TEXT NOT NULL,
            params TEXT NOT NULL,
            metadata TEXT NOT NULL,
            PRIMARY KEY (prompt_id, version),
            UNIQUE (prompt_id, hash)
        );
        CREATE TABLE labels (
            prompt_id TEXT NOT NULL REFERENCES prompts(id),
            name TEXT NOT NULL,
            version TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (prompt_id, name),
            FOREIGN KEY (prompt_id, version) REFERENCES versions(prompt_id, version)
        );
        CREATE TABLE label_moves (
            id INTEGER PRIMARY KEY,
            prompt_id TEXT NOT NULL,
            label TEXT NOT NULL,
            from_version TEXT,
            to_version TEXT NOT NULL,
            action TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            at TEXT NOT NULL
        );
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            prompt_id TEXT,
            version TEXT,
            status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'interrupted', 'failed')),
            started_at TEXT,
            finished_at TEXT,
            config TEXT,
            agent_model TEXT,
            judge_model TEXT,
            judge_version TEXT,
            offline INTEGER,
            cycle_id TEXT,
            round INTEGER,
            role TEXT CHECK (role IS NULL OR role IN ('eval', 'baseline', 'candidate')),
            summary TEXT
        );
        CREATE TABLE results (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(id),
            case_id TEXT NOT NULL,
            iteration INTEGER NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('passed', 'failed', 'error')),
            score REAL,
            passed INTEGER,
            error TEXT,
            input TEXT,
            output TEXT,
            tool_calls TEXT,
            latency REAL,
            agent_cost REAL,
            judge_cost REAL,
            input_tokens INTEGER,
            output_tokens INTEGER,
            started_at TEXT,
            finished_at TEXT,
            UNIQUE (run_id, case_id, iteration)
        );
        CREATE TABLE verdicts (
            id INTEGER PRIMARY KEY,
            result_id INTEGER NOT NULL REFERENCES results(id),
            criterion_id TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('check', 'llm')),
            score REAL,
            passed INTEGER,
            weight REAL,
            required INTEGER,
            reasoning TEXT
        );
        CREATE TABLE calls (
            id INTEGER PRIMARY KEY,
            at TEXT,
            run_id TEXT,
            cycle_id TEXT,
            round INTEGER,
            case_id TEXT,
            iteration INTEGER,
            role TEXT,
            model TEXT,
            input_tokens INTEGER,
            cached_input_tokens INTEGER,
            output_tokens INTEGER,
            cost REAL,
            cost_estimated INTEGER,
            latency REAL,
            cache_hit INTEGER,
            attempts INTEGER,
            error TEXT
        );
        CREATE TABLE cycles (
            id TEXT PRIMARY KEY,
            prompt_id TEXT,
            status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'interrupted', 'failed')),
            config TEXT,
            started_at TEXT,
            finished_at TEXT,
            stop_reason TEXT,
            initial_version TEXT,
            final_version TEXT,
            total_cost REAL
        );
        CREATE TABLE rounds (
            cycle_id TEXT NOT NULL REFERENCES cycles(id),
            round INTEGER NOT NULL,
            incumbent_version TEXT,
            candidate_version TEXT,
            baseline_run_id TEXT,
            candidate_run_id TEXT,
            status TEXT,
            accepted INTEGER,
            score REAL,
            delta REAL,
            ci_low REAL,
            ci_high REAL,
            cost REAL,
            started_at TEXT,
            finished_at TEXT,
            PRIMARY KEY (cycle_id, round)
        );
        CREATE TABLE suggestions (
            id TEXT PRIMARY KEY,
            cycle_id TEXT,
            round INTEGER,
            type TEXT,
            priority TEXT,
            current_value TEXT,
            suggested_value TEXT,
            reasoning TEXT,
            expected_improvement TEXT,
            target_cases TEXT,
            decision TEXT,
            reason TEXT,
            edited_value TEXT,
            applied INTEGER
        );
        """
    )


@migration
def m002_label_moves_who(db: Database) -> None:
    """Record who moved a label (a person, the improvement cycle, a script)."""
    db.execute("ALTER TABLE label_moves ADD COLUMN who TEXT NOT NULL DEFAULT 'user'")


@migration
def m003_indexes(db: Database) -> None:
    """Indexes for the queries the commands, the runner and the loop make."""
    _run(
        db,
        """
        CREATE UNIQUE INDEX idx_versions_prompt_seq ON versions (prompt_id, seq);
        CREATE INDEX idx_label_moves_prompt ON label_moves (prompt_id, label, id);
        CREATE INDEX idx_runs_prompt_version ON runs (prompt_id, version);
        CREATE INDEX idx_runs_cycle ON runs (cycle_id, round);
        CREATE INDEX idx_results_run ON results (run_id);
        CREATE INDEX idx_verdicts_result ON verdicts (result_id);
        CREATE INDEX idx_calls_run ON calls (run_id);
        CREATE INDEX idx_calls_cycle ON calls (cycle_id, round);
        CREATE INDEX idx_cycles_prompt ON cycles (prompt_id);
        CREATE INDEX idx_suggestions_cycle ON suggestions (cycle_id, round);
        """
    )


@migration
def m004_round_reasons(db: Database) -> None:
    """Why a round's candidate was accepted or rejected, and the incumbent's score beside it (H4)."""
    db.execute("ALTER TABLE rounds ADD COLUMN reason TEXT")
    db.execute("ALTER TABLE rounds ADD COLUMN incumbent_score REAL")
    db.execute("ALTER TABLE rounds ADD COLUMN pass_rate REAL")


@migration
def m005_tools_and_traces(db: Database) -> None:
    """A prompt version's tools (JSON, NULL: none), each result's trace and final state,
    a result status for iterations a limit ended ('terminated'), and the tool a
    tool_description suggestion edits."""
    db.execute("ALTER TABLE versions ADD COLUMN tools TEXT")
    db.execute("ALTER TABLE results ADD COLUMN trace TEXT")
    db.execute("ALTER TABLE results ADD COLUMN state TEXT")
    db.execute("ALTER TABLE suggestions ADD COLUMN tool TEXT")
    _widen_check(db, "results", "status IN ('passed', 'failed', 'error')",
                 "status IN ('passed', 'failed', 'error', 'terminated')")


@migration
def m006_verdict_turns(db: Database) -> None:
    """The turns of a conversation where a criterion judged on every turn failed (JSON
    list, NULL: none), so the improver keeps those turns when it condenses a transcript."""
    db.execute("ALTER TABLE verdicts ADD COLUMN failed_turns TEXT")


@migration
def m007_call_journal(db: Database) -> None:
    """The call journal (cycle.store.journal): a paid call's key within its run and its
    answer, so that a resumed run replays it instead of paying again; and which process
    runs a cycle ("host:pid"), so that a killed one shows as interrupted."""
    db.execute("ALTER TABLE cycles ADD COLUMN owner TEXT")
    db.execute("ALTER TABLE calls ADD COLUMN key TEXT")
    db.execute("ALTER TABLE calls ADD COLUMN output TEXT")
    db.execute("CREATE INDEX calls_key ON calls(key) WHERE key IS NOT NULL")


def _widen_check(db: Database, table: str, old: str, new: str) -> None:
    """Replace a CHECK constraint by a wider one (every stored row satisfies it), the way
    SQLite documents for constraint changes that do not touch the stored data: edit the
    schema text under writable_schema and bump schema_version, inside the migration's
    transaction. (Rebuilding the table would fight the foreign keys pointing at it.)
    PostgreSQL drops and adds the constraint (named for its table and column)."""
    if dialect_of(db).name == "postgresql":
        column = old.split()[0]
        db.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_{column}_check, "
                   f"ADD CONSTRAINT {table}_{column}_check CHECK ({new})")
        return
    row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                     [table]).fetchone()
    if row is None or old not in row[0]:
        raise StoreFormatError(f"table {table} does not have the constraint {old!r} to widen")
    version = db.execute("PRAGMA schema_version").fetchone()[0]
    db.execute("PRAGMA writable_schema = ON")
    try:
        db.execute("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?",
                   [row[0].replace(old, new), table])
        db.execute(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        db.execute("PRAGMA writable_schema = OFF")


def _run(db: Database, script: str) -> None:
    # not executescript(): it commits first, and a migration must stay inside
    # its transaction (none of these statements holds a ';')
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


#: the record table as sqlite_utils.migrations creates it, to the letter: a store made by
#: ``_apply_to_new`` is the one sqlite_utils would have made
_SQLITE_RECORD_TABLE = (
    (f'CREATE TABLE "{RECORD_TABLE}" (\n   "id" INTEGER PRIMARY KEY,\n   "migration_set" TEXT,'
     '\n   "name" TEXT,\n   "applied_at" TEXT\n)'),
    (f'CREATE UNIQUE INDEX "idx_{RECORD_TABLE}_migration_set_name"\n    ON "{RECORD_TABLE}" '
     '("migration_set", "name")'))


def _apply_to_new(conn: sqlite3.Connection) -> None:
    """A new SQLite store: every migration and its record through the connection, as
    sqlite_utils.migrations would write them (its import and its table inspection cost a
    new store's first run about 0.1 s of start-up; benchmarks/RESULTS.md, issue 40). The
    caller (Store._migrate) holds the write transaction: a new store gets all of them or
    none. An older store still migrates through sqlite_utils, which also mends a record
    table an older sqlite_utils wrote."""
    from datetime import UTC, datetime

    for statement in _SQLITE_RECORD_TABLE:
        conn.execute(statement)
    for fn in MIGRATIONS:
        fn(conn)  # type: ignore[arg-type]
        conn.execute(f'INSERT INTO "{RECORD_TABLE}" ("migration_set", "name", "applied_at") '
                     "VALUES (?, ?, ?)", (MIGRATION_SET, fn.__name__, str(datetime.now(UTC))))


class _PgMigrating:
    """What a migration is given on PostgreSQL: its statements as PostgreSQL takes them."""

    dialect = "postgresql"

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.conn.execute(pg_ddl(sql), params or ())


def _apply_on_postgres(conn: Any, *, stop_before: str | None = None) -> None:
    # the caller (Store._migrate) holds the write transaction: every migration and its
    # record commit together or not at all
    from cycle.ids import now_iso

    db = _PgMigrating(conn)
    if RECORD_TABLE not in dialect_of(conn).tables(conn):
        db.execute(f"CREATE TABLE {RECORD_TABLE} (id INTEGER PRIMARY KEY, migration_set TEXT "
                   "NOT NULL, name TEXT NOT NULL, applied_at TEXT NOT NULL, "
                   "UNIQUE (migration_set, name))")
    applied = set(applied_names(conn))
    for fn in MIGRATIONS:
        if fn.__name__ == stop_before:
            return
        if fn.__name__ in applied:
            continue
        fn(db)  # type: ignore[arg-type]
        conn.execute(f"INSERT INTO {RECORD_TABLE} (migration_set, name, applied_at) "
                     "VALUES (?, ?, ?)", (MIGRATION_SET, fn.__name__, now_iso()))


def known_names() -> list[str]:
    """Names of this release's migrations, in order."""
    return [fn.__name__ for fn in MIGRATIONS]


def applied_names(db: sqlite3.Connection) -> list[str]:
    """Names of the cycle migrations recorded in ``db``, in the order applied (read only)."""
    return [row[0] for row in db.execute(
        f"SELECT name FROM {RECORD_TABLE} WHERE migration_set = ? ORDER BY id",
        [MIGRATION_SET])]


def check_format(db: sqlite3.Connection, path: str) -> list[str]:
    """Raise StoreFormatError unless ``db`` is blank or a cycle store this release can read.

    Returns the migrations still to apply. Reads only: a refused file is left
    exactly as it was.
    """
    dialect = dialect_of(db)
    try:
        tables = dialect.tables(db)
    except sqlite3.DatabaseError as e:
        raise StoreFormatError(
            f"{path} is not a cycle store: {e}",
            hint="Point --store (or CYCLE_STORE) at a cycle store, or at a new file.",
        ) from None
    if not tables:
        return known_names()
    applied = applied_names(db) if RECORD_TABLE in tables else []
    if not applied:
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        if dialect.name == "postgresql":
            raise StoreFormatError(
                f"{path} is a database but not a cycle store (its schema holds tables {shown} "
                "and no cycle migration record)",
                hint="Give cycle a database of its own, or a schema of its own: "
                "postgresql://.../DB?options=-csearch_path%3Dcycle (after CREATE SCHEMA cycle).",
            )
        raise StoreFormatError(
            f"{path} is a SQLite file but not a cycle store (it holds tables {shown} "
            "and no cycle migration record)",
            hint="Point --store (or CYCLE_STORE) at a cycle store, or at a new file.",
        )
    known = known_names()
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise StoreFormatError(
            f"{path} was written by a newer release of cycle (it records migration "
            f"{', '.join(unknown)}, unknown to this one)",
            hint="Upgrade cycle (pip install -U cycle) to open this store.",
        )
    return [name for name in known if name not in applied]


@migration
def m008_round_stages(db: Database) -> None:
    """A round's stage (baseline, improve, or the confirmation that moves head) and its gain
    on the cases the improver saw and on the held-out ones."""
    db.execute("ALTER TABLE rounds ADD COLUMN stage TEXT")
    # rounds stored before stages existed: round 0 was the baseline, the others improved
    db.execute("UPDATE rounds SET stage = CASE WHEN round = 0 THEN 'baseline' ELSE 'improve' END")
    db.execute("ALTER TABLE rounds ADD COLUMN seen_delta REAL")
    db.execute("ALTER TABLE rounds ADD COLUMN held_out_delta REAL")


@migration
def m009_results_by_case(db: Database) -> None:
    """A run's results by case: reports and the loop read a stored run a case at a time
    (cycle.store.runs.StoredResults), never all of its results at once."""
    db.execute("CREATE INDEX idx_results_run_case ON results (run_id, case_id, iteration)")


@migration
def m010_batch_jobs(db: Database) -> None:
    """Provider batch jobs (cycle.store.batches): each job's id and the keys of its calls,
    so that a run killed while a job runs resumes by polling it instead of paying again."""
    _run(
        db,
        """
        CREATE TABLE batch_jobs (
            id TEXT PRIMARY KEY,
            model TEXT NOT NULL,
            run_id TEXT,
            calls INTEGER NOT NULL,
            state TEXT NOT NULL,
            submitted_at TEXT NOT NULL,
            ended_at TEXT
        );
        CREATE TABLE batch_calls (
            key TEXT PRIMARY KEY,
            job_id TEXT NOT NULL REFERENCES batch_jobs(id)
        );
        """,
    )


@migration
def m011_locks(db: Database) -> None:
    """Leases (cycle.store.locks): which process runs a cycle or a run, so that a second
    resume of it refuses instead of writing the same results beside the first."""
    _run(
        db,
        """
        CREATE TABLE locks (
            name TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            acquired_at TEXT NOT NULL
        );
        """,
    )


@migration
def m012_labels(db: Database) -> None:
    """People's labels of stored outputs (cycle.store.human_labels): a criterion's score or
    pass/fail for one iteration's result, by a labeler; the judge's agreement is measured
    against them."""
    _run(
        db,
        """
        CREATE TABLE human_labels (
            id INTEGER PRIMARY KEY,
            result_id INTEGER NOT NULL REFERENCES results(id),
            criterion_id TEXT NOT NULL,
            score REAL CHECK (score IS NULL OR (score >= 0 AND score <= 100)),
            passed INTEGER,
            labeler TEXT NOT NULL DEFAULT '',
            note TEXT,
            labeled_at TEXT NOT NULL,
            CHECK (score IS NOT NULL OR passed IS NOT NULL),
            UNIQUE (result_id, criterion_id, labeler)
        );
        CREATE INDEX human_labels_by_result ON human_labels(result_id)
        """,
    )


@migration
def m013_judge_consistency(db: Database) -> None:
    """What ``cycle judge consistency`` measured of a run's judge, per criterion: the spread
    of its scores over fresh repeats and the share of verdicts that flipped, against the
    share allowed (cycle.store.judge_consistency); reports flag a criterion over it."""
    _run(
        db,
        """
        CREATE TABLE judge_consistency (
            run_id TEXT NOT NULL REFERENCES runs(id),
            criterion_id TEXT NOT NULL,
            judge_model TEXT,
            judge_version TEXT,
            outputs INTEGER NOT NULL,
            repeats INTEGER NOT NULL,
            spread REAL NOT NULL,
            flip_share REAL NOT NULL,
            max_flips REAL NOT NULL,
            measured_at TEXT NOT NULL,
            PRIMARY KEY (run_id, criterion_id)
        )
        """,
    )


@migration
def m014_population(db: Database) -> None:
    """A round's population (improve.population): which candidate of the round each
    suggestion was made for (``slot``, 0 for a round of one), and runs that screen a
    candidate on a minibatch of cases before the full evaluation (role 'screen')."""
    db.execute("ALTER TABLE suggestions ADD COLUMN slot INTEGER NOT NULL DEFAULT 0")
    _widen_check(db, "runs", "role IS NULL OR role IN ('eval', 'baseline', 'candidate')",
                 "role IS NULL OR role IN ('eval', 'baseline', 'candidate', 'screen')")


@migration
def m015_authors(db: Database) -> None:
    """Who did what (cycle.authors): a version's author; who decided on a suggestion and
    when; whether a label move needed --force past a protection; and the protected labels
    themselves (``allowed``: a JSON list of the authors who may move the label, [] nobody
    without --force; ``prompt_id`` '*': every prompt), kept in the store, not in
    cycle.yaml: a pull request's edit of a file must not unprotect production. Rows
    written before are NULL: their author is unknown.

    Portable SQL only (ADD COLUMN of TEXT/INTEGER, CREATE TABLE): it runs on PostgreSQL too."""
    db.execute("ALTER TABLE versions ADD COLUMN author TEXT")
    db.execute("ALTER TABLE suggestions ADD COLUMN decided_by TEXT")
    db.execute("ALTER TABLE suggestions ADD COLUMN decided_at TEXT")
    db.execute("ALTER TABLE label_moves ADD COLUMN forced INTEGER")
    _run(
        db,
        """
        CREATE TABLE protected_labels (
            prompt_id TEXT NOT NULL,
            label TEXT NOT NULL,
            allowed TEXT NOT NULL,
            protected_by TEXT,
            protected_at TEXT,
            PRIMARY KEY (prompt_id, label)
        )
        """,
    )


@migration
def m016_panel_verdicts(db: Database) -> None:
    """A judge panel's members' verdicts (cycle.judge.panel): each member's score, pass and
    reasoning of one LLM criterion of one result, beside the panel's verdict in
    ``verdicts`` (their mean and majority). A single judge writes none."""
    _run(
        db,
        """
        CREATE TABLE panel_verdicts (
            id INTEGER PRIMARY KEY,
            result_id INTEGER NOT NULL REFERENCES results(id),
            criterion_id TEXT NOT NULL,
            member TEXT NOT NULL,
            score REAL NOT NULL,
            passed INTEGER NOT NULL,
            reasoning TEXT,
            UNIQUE (result_id, criterion_id, member)
        );
        CREATE INDEX panel_verdicts_by_result ON panel_verdicts(result_id)
        """,
    )


@migration
def m017_examples(db: Database) -> None:
    """A prompt version's few-shot examples (JSON, NULL: none), and an example
    suggestion's source case and input (JSON) (improve.examples). Portable SQL only."""
    db.execute("ALTER TABLE versions ADD COLUMN examples TEXT")
    db.execute("ALTER TABLE suggestions ADD COLUMN source_case TEXT")
    db.execute("ALTER TABLE suggestions ADD COLUMN example_input TEXT")


@migration
def m018_screens(db: Database) -> None:
    """A population's screens (cycle.loop.population): each candidate of a round, by its
    slot, with the version it built, its parent and, for a merge, its second parent (the
    version whose edits the merge brought to the first), the screen run, the cases it was
    screened on, its gain over its parent there and whether it went on to the full
    evaluation. The cycle's lineage (cycle.loop.lineage) is read from these rows and the
    rounds; a resumed round writes its screens again over the same rows."""
    _run(
        db,
        """
        CREATE TABLE screens (
            cycle_id TEXT NOT NULL REFERENCES cycles(id),
            round INTEGER NOT NULL,
            slot INTEGER NOT NULL,
            version TEXT NOT NULL,
            parent TEXT NOT NULL,
            second_parent TEXT,
            run_id TEXT NOT NULL,
            cases INTEGER NOT NULL,
            gain REAL,
            kept INTEGER NOT NULL,
            PRIMARY KEY (cycle_id, round, slot)
        )
        """,
    )


@migration
def m019_pairwise(db: Database) -> None:
    """A round's pairwise comparisons (criteria with ``pairwise: true``,
    cycle.loop.preference): a JSON list, one entry per criterion, of the cases that
    preferred the candidate (wins), the incumbent (losses) or neither (ties), the pairs
    compared, the share of order flips and the one-sided sign test's p. NULL: scores
    alone decided. Portable SQL only."""
    db.execute("ALTER TABLE rounds ADD COLUMN pairwise TEXT")


@migration
def m020_second_parent(db: Database) -> None:
    """A merged version's second parent (improve.merge): a version read on its own
    (``cycle history``, the History screen) names both versions it was made from. NULL:
    one parent. Portable SQL only."""
    db.execute("ALTER TABLE versions ADD COLUMN second_parent TEXT")


@migration
def m021_rubrics(db: Database) -> None:
    """The rubrics a judge prompt version carries (``cycle judge improve``: JSON, by
    criterion id; NULL: none), and the criterion a rubric suggestion edits. Portable SQL
    only."""
    db.execute("ALTER TABLE versions ADD COLUMN rubrics TEXT")
    db.execute("ALTER TABLE suggestions ADD COLUMN criterion TEXT")


@migration
def m022_session_leases(db: Database) -> None:
    """Whether a lease is bound to its holder's PostgreSQL session (1: the holder holds
    its advisory lock, so the lease is free once that session ends; NULL: SQLite, or a
    holder of an earlier release). Portable SQL only."""
    db.execute("ALTER TABLE locks ADD COLUMN session INTEGER")


@migration
def m023_retried_charges(db: Database) -> None:
    """Whether a call row is the charge of a failed attempt that was asked again (1; NULL:
    the call's own row): such a row is written before the retry's wait (cycle.llm.journal),
    so that a kill loses no charge, and the call's answer (or failure) has a row of its
    own. Its cost is in every total; it is not a call of its own (``usage_by_role`` counts
    logical calls, and these rows apart). Portable SQL only."""
    db.execute("ALTER TABLE calls ADD COLUMN retried INTEGER")


@migration
def m024_servers(db: Database) -> None:
    """What OpenAI-compatible servers were found to accept (cycle.store.servers): the
    learned structured-output form and the like, by endpoint (a base URL without its
    credentials, and the model; never a key), so that a run with the response cache off
    does not learn it again. Earlier releases kept it in the response cache's own
    ``servers`` table; a row found there moves here when first read. Portable SQL only."""
    db.execute("CREATE TABLE servers (endpoint TEXT PRIMARY KEY, accepted TEXT NOT NULL, "
               "learned_at TEXT NOT NULL)")
