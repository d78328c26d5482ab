"""What compatible servers accept, in the store (cycle.store.servers): replaced when
learned again, on SQLite and PostgreSQL alike; on a team's PostgreSQL store, a loopback
server's form is one machine's."""

from __future__ import annotations

import socket

import pytest

from cycle.store import Store

LOCAL = "http://localhost:8080/v1|local-model"
REMOTE = "https://llm.example.com/v1|big-model"


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path):
    if request.param == "sqlite":
        return tmp_path / "s.db"
    return request.getfixturevalue("postgres").schema_url()


def test_a_form_is_kept_and_replaced_when_learned_again(target):
    with Store.open(target) as store:
        assert store.servers.server(REMOTE) is None
        store.servers.remember_server(REMOTE, '{"structured":"json_schema"}')
        store.servers.remember_server(REMOTE, '{"structured":"json_object_schema"}')
    with Store.open(target) as store:
        assert store.servers.server(REMOTE) == '{"structured":"json_object_schema"}'
        assert store.db.execute("SELECT count(*) FROM servers").fetchone()[0] == 1


def test_a_loopback_server_is_one_machines_on_a_team_store(target):
    with Store.open(target) as store:
        store.servers.remember_server(LOCAL, '{"structured":"prompt"}')
        assert store.servers.server(LOCAL) == '{"structured":"prompt"}'
        (key,) = store.db.execute("SELECT endpoint FROM servers").fetchone()
        shared = store.dialect.name == "postgresql"
    assert key == (f"{socket.gethostname()}/{LOCAL}" if shared else LOCAL)
