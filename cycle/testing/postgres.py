"""A throw-away PostgreSQL server for tests and benchmarks: a cluster of its own in a
temporary folder, on a loopback port, with a password (so that masking it is tested
against a real login), gone when stopped.

    with ThrowawayPostgres() as pg:
        url = pg.schema_url("t1")        # a fresh schema: one store
        store = Store.open(url)

It runs Debian's (or any) PostgreSQL binaries: ``initdb`` on PATH, else the newest
``/usr/lib/postgresql/*/bin``. As root it runs them as the ``postgres`` user (PostgreSQL
refuses to run as root). ``find_binaries()`` says why when there are none.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Self
from urllib.parse import quote

USER = "cycle"
#: the test cluster's password: tests assert it never reaches a message, row or report
PASSWORD = "pg-s3cret-7f3a"


def find_binaries() -> Path | str:
    """The folder of PostgreSQL's server binaries, or why there is none (a str)."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    if versions:
        return versions[-1].parent
    return ("PostgreSQL's server binaries (initdb, pg_ctl) are not installed: "
            "apt-get install postgresql")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ThrowawayPostgres:
    """Start with ``with`` (or ``start()``/``stop()``)."""

    def __init__(self) -> None:
        binaries = find_binaries()
        if isinstance(binaries, str):
            raise RuntimeError(binaries)  # noqa: TRY004 - a missing program, not a bad argument
        self.bin = binaries
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="cycle-pg-"))
        self.data = self.dir / "data"
        self._as: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL will not run as root
            self._as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.dir, "postgres")
        self._schemas = 0

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as, *args], check=True, capture_output=True, text=True)

    def start(self) -> Self:
        pwfile = self.dir / "pw"
        pwfile.write_text(PASSWORD)
        if self._as:
            shutil.chown(pwfile, "postgres")
        try:
            self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", USER,
                      f"--pwfile={pwfile}", "--auth=scram-sha-256", "-E", "UTF8",
                      "--locale=C", "--no-sync")
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-l",
                      str(self.dir / "log"), "-o",
                      f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                      "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                      "-c max_connections=200", "start")
        except subprocess.CalledProcessError as e:
            log = (self.dir / "log").read_text() if (self.dir / "log").exists() else ""
            self.stop()
            raise RuntimeError(f"PostgreSQL did not start: {e.stderr}{log}") from None
        return self

    def url(self, database: str = "postgres", *, password: bool = True) -> str:
        auth = f"{USER}:{quote(PASSWORD)}" if password else USER
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}"

    def schema_url(self, name: str | None = None) -> str:
        """A URL whose store lives in a new, empty schema of its own."""
        import psycopg

        if name is None:
            self._schemas += 1
            name = f"s{self._schemas}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            conn.execute(f'CREATE SCHEMA "{name}"')
        return f"{self.url()}?options=-csearch_path%3D{name}"

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run([*self._as, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m",
                            "immediate", "stop"], check=False, capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
