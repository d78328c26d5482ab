"""What OpenAI-compatible servers were found to accept (cycle.llm.compat), in the store's
``servers`` table: the one durable home of a learned form. A run with the response cache
off (``--no-cache``, ``cache.enabled: false``) asks a server in the form an earlier run
learned, without paying a refused request to learn it again; a server that changed its
mind (refuses the kept form) is learned again and the row updated.

The key is the endpoint as ``OpenAIAPI.server_key`` gives it: the base URL without its
user, password or credential-like query values (``safe_url``), and the model. No key, no
header, nothing secret is stored. On a store shared by a team (PostgreSQL), a loopback
endpoint (``localhost``, ``127.0.0.1``, ``[::1]``) is one machine's own server: its row is
keyed by the machine's host name too, so that two people's local servers on the same port
do not take each other's forms.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from cycle.ids import now_iso

if TYPE_CHECKING:
    from cycle.store.store import Store

#: hosts that name the machine a call is made from
_LOOPBACK = ("localhost", "127.", "::1", "0.0.0.0")


class StoreServers:
    """Learned forms by endpoint, in the store's ``servers`` table."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def server(self, endpoint: str) -> str | None:
        """What the server at ``endpoint`` was found to accept, as kept (JSON), or None."""
        row = self.store.db.execute(
            "SELECT accepted FROM servers WHERE endpoint = ?", [self._key(endpoint)]).fetchone()
        return row[0] if row else None

    def remember_server(self, endpoint: str, accepted: str) -> None:
        """Keep (or replace) what the server at ``endpoint`` accepts."""
        with self.store.transaction() as db:
            db.execute(
                "INSERT INTO servers (endpoint, accepted, learned_at) VALUES (?, ?, ?) "
                "ON CONFLICT (endpoint) DO UPDATE SET accepted = excluded.accepted, "
                "learned_at = excluded.learned_at",
                [self._key(endpoint), accepted, now_iso()])

    def _key(self, endpoint: str) -> str:
        if self.store.dialect.name != "postgresql" or not _is_loopback(endpoint):
            return endpoint
        return f"{socket.gethostname()}/{endpoint}"


def _is_loopback(endpoint: str) -> bool:
    try:
        host = urlsplit(endpoint.partition("|")[0]).hostname or ""
    except ValueError:
        return False
    return host.startswith(_LOOPBACK)
