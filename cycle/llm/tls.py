"""The TLS context cycle's HTTP clients check servers with: one a process, made in a thread.

An httpx client built with ``verify=True`` makes its own context, and making one reads the
system's trusted certificates: about 25 ms of CPU, on the way to a run's first request
(the provider's client is made by the first call). OpenSSL reads them without holding the
GIL, so ``prepare()`` has a thread make the context while the caller imports the SDK, and
every client then shares it (``context()``).

It is httpx's own default context (httpcore's ``default_ssl_context``), made the same way,
so what is trusted does not change: SSL_CERT_FILE or SSL_CERT_DIR when set, else the
system's store (truststore's on macOS and Windows). A change to either variable makes a
new one.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import threading
from collections.abc import Callable

_lock = threading.Lock()
#: (SSL_CERT_FILE, SSL_CERT_DIR) -> the context made for them, made or being made
_made: dict[tuple[str | None, str | None], _Making] = {}


class _Making:
    def __init__(self) -> None:
        # imported here: a thread importing while the caller imports too would take turns
        # with it for the GIL (more CPU, little gained); reading certificates does not
        import httpcore2  # httpx2's transport layer, which the openai SDK ships with

        self.done = threading.Event()
        self.context: ssl.SSLContext | None = None
        threading.Thread(target=self._make, args=(httpcore2.default_ssl_context,),
                         name="cycle-tls", daemon=True).start()

    def _make(self, make: Callable[[], ssl.SSLContext]) -> None:
        try:
            # a context that cannot be made stays None: the caller makes it again, and sees why
            with contextlib.suppress(Exception):
                self.context = make()
        finally:
            self.done.set()


def _key() -> tuple[str | None, str | None]:
    return os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")


def prepare() -> None:
    """Start making the context, if no thread has yet (it takes a thread of its own)."""
    with _lock:
        if _key() not in _made:
            _made[_key()] = _Making()


def context() -> ssl.SSLContext:
    """The shared context, waiting for its thread if it is still at work. A context that
    could not be made is made here, so that the error (a missing SSL_CERT_FILE) is the
    caller's, as httpx would raise it."""
    prepare()
    making = _made[_key()]
    making.done.wait()
    if making.context is None:
        import httpcore2

        return httpcore2.default_ssl_context()
    return making.context
