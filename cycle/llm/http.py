"""Turning a provider's HTTP error into a ``cycle.errors`` error, once for all providers.

Providers call :func:`status_error` with what the SDK exception carried
(status, body, headers) and raise the result ``from`` the SDK error. The
message names the provider and the status, never the API key: bodies are
redacted because some providers echo (part of) a rejected key back.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import math
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from cycle.errors import (
    AuthenticationError,
    BadRequestError,
    ProviderError,
    RateLimitError,
    ServerError,
)
from cycle.llm.base import BatchUnsupported

#: longest error body kept on an error (the call log does not need megabytes)
MAX_BODY = 2000

# keys of the usual shapes: OpenAI "sk-...", Google "AIza...", bearer tokens
_KEY_PATTERNS = re.compile(
    r"(sk-[A-Za-z0-9_\-*]{6,}|AIza[0-9A-Za-z_\-]{10,}|Bearer\s+[A-Za-z0-9._\-]{8,})"
)


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with the given secrets and anything shaped like an API key masked."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    return _KEY_PATTERNS.sub("***", text)


#: query parameters of a base URL that carry credentials (?api-key=..., ?token=...)
_SECRET_PARAM = re.compile(r"key|token|secret|sig|pass|auth|credential", re.IGNORECASE)


def token_count(value: Any, *, field: str, where: str) -> int | None:
    """A token count as a provider sent it: the count, or None when it is not a usable
    one (absent, text, a fraction: the call is then priced by a bound, marked estimated).
    A negative or non-finite count is an error of the call: it would lower the spend."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float) and (value < 0 or math.isnan(value) or value in (
            float("inf"), float("-inf"))):
        from cycle.errors import MalformedResponseError

        error = MalformedResponseError(
            f"{where} reported {field} = {value}: a token count cannot be negative or "
            "infinite; the answer is not used (a provider lying about usage)")
        error.retryable = False  # asking again pays again for the same lie
        raise error
    return value if isinstance(value, int) else None


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The credentials a URL carries: its user and password, and the values of query
    parameters named like a key or token (``http://user:pass@host/v1?api-key=...``)."""
    if not url:
        return ()
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
        found = [parts.password or "", parts.username or ""]
        if parts.password:  # as HTTP clients send them: Authorization: Basic base64(user:pass)
            from base64 import b64encode
            from urllib.parse import unquote

            found.append(b64encode(f"{unquote(parts.username or '')}:{unquote(parts.password)}"
                                   .encode()).decode())
        found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True)
                  if _SECRET_PARAM.search(k)]
    except ValueError:
        return ()
    return tuple(v for v in found if len(v) >= 4)


def safe_url(url: str | None) -> str:
    """``url`` as it may be shown or stored: without its user, password and the values of
    credential-like query parameters."""
    if not url:
        return ""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        query = urlencode([(k, "***" if _SECRET_PARAM.search(k) else v)
                           for k, v in parse_qsl(parts.query, keep_blank_values=True)],
                          safe="*")
    except ValueError:
        return "(a URL that does not parse)"
    if ":" in host:
        netloc = f"[{host}]" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


#: shorter secrets are not masked in answers (a 3-letter "key" would mask ordinary words,
#: an empty one every position)
MIN_SECRET = 8


def maskable(values: Iterable[str | None]) -> tuple[str, ...]:
    """The secrets among ``values`` long enough to mask (see ``scrub``), each also as a
    server echoing it may spell it: URL-encoded, and base64 (of its whole 3-byte groups:
    what every base64 text that starts with the secret starts with)."""
    from base64 import b64encode
    from urllib.parse import quote, quote_plus

    found: dict[str, None] = {}
    for v in values:
        if v and len(v) >= MIN_SECRET:
            raw = v.encode()
            for form in (v, quote(v), quote(v, safe=""), quote_plus(v),
                         b64encode(raw[:len(raw) - len(raw) % 3]).decode()):
                found[form] = None
    # the longest first: one secret inside another (a user name inside the Basic
    # credential made of it) must not break the longer one before it is masked whole
    return tuple(sorted(found, key=len, reverse=True))


#: environment variables whose values are credentials: named with one of these words
#: anywhere (OPENAI_API_KEY, GITHUBTOKEN, DB_PASSWORD, GPG_PASSPHRASE, ...)
_SECRET_VARIABLE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSPHRASE|CREDENTIAL|AUTHORIZATION",
                              re.IGNORECASE)
#: ... or with a short spelling of a password or of credentials as a part of the name
#: (DB_PASS, PGPASS, SMTP_PASSWD, MYSQL_PWD, X_AUTH, BASIC_AUTH, OAUTH): a part, or the
#: end of one (PGPASS), but not PWD alone (the shell's current folder), OLDPWD (its last
#: one), BYPASS (a proxy's list of hosts) or AUTHOR (GIT_AUTHOR_NAME)
_SECRET_PART = re.compile(r"(?:(?<!BY)PASS|PASSWD|AUTH)$")
#: ... unless the name's last part says the value only locates something: SSH_AUTH_SOCK is
#: the path of the SSH agent's socket (no credential: the socket's permissions guard the
#: agent, and its path is in every process's environment), OS_AUTH_URL an endpoint
#: (credentials inside a URL are masked whatever its name), COMPASS_HOME a folder
_LOCATOR = frozenset({"SOCK", "SOCKET", "URL", "URI", "HOST", "PORT", "PATH", "FILE", "DIR",
                      "HOME", "TYPE", "METHOD", "MODE"})


def secret_variable(name: str) -> bool:
    """Whether the environment variable ``name`` holds a credential (by its name)."""
    if _SECRET_VARIABLE.search(name):
        return True
    parts = [p for p in re.split(r"[^A-Z0-9]+", name.upper()) if p]
    if len(parts) > 1 and parts[-1] in _LOCATOR:
        return False
    return any(_SECRET_PART.search(p) for p in parts) or (len(parts) > 1 and "PWD" in parts)


def environment_secrets() -> tuple[str, ...]:
    """The credentials the environment (and so .env) holds, to mask in what code cycle did
    not write may say (a Python agent's answer or exception): the values of variables
    named like a key, token, secret, password or credentials (``secret_variable``), and
    those inside a URL's credentials."""
    import os

    found: list[str] = []
    for name, value in os.environ.items():
        if secret_variable(name):
            found.append(value)
        elif value.startswith(("http://", "https://")):
            found.extend(url_secrets(value))
    return maskable(found)


def scrub(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` (a text, or JSON-like data: dicts, lists, strings) with every secret (from
    ``maskable``) replaced by ``***``; what holds no secret is returned as it is, not
    copied (every answer of a model with a key passes through here)."""
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, "***")
        return value
    if isinstance(value, dict):
        items = [(k, v, scrub(k, secrets), scrub(v, secrets)) for k, v in value.items()]
        if all(k is k2 and v is v2 for k, v, k2, v2 in items):
            return value
        return {k2: v2 for _, _, k2, v2 in items}
    if isinstance(value, list | tuple):
        new = [scrub(v, secrets) for v in value]
        return value if all(a is b for a, b in zip(value, new, strict=True)) else type(value)(new)
    return value


#: a UTF-16 surrogate on its own (a pair decodes to one character, so any left is lone)
_SURROGATE = re.compile("[\ud800-\udfff]")


_ENCODER = json.JSONEncoder(ensure_ascii=False, check_circular=False, default=str)


def has_surrogate(value: Any) -> bool:
    """Whether a lone surrogate is anywhere in ``value`` (a text, or JSON-like data): one
    pass of the C JSON encoder, then of UTF-8's, which refuses it (a fraction of the cost of
    ``whole``'s walk). Data the encoder cannot take is said to have one (walked, then)."""
    try:
        _ENCODER.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except (TypeError, ValueError, RecursionError):
        return True
    return False


def whole(value: Any) -> Any:
    """``value`` (a text, or JSON-like data) with each lone surrogate replaced by U+FFFD:
    text every UTF-8 encoder takes. What holds none is returned as it is, not copied."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        items = [(k, v, whole(k), whole(v)) for k, v in value.items()]
        if all(k is k2 and v is v2 for k, v, k2, v2 in items):
            return value
        return {k2: v2 for _, _, k2, v2 in items}
    if isinstance(value, list | tuple):
        new = [whole(v) for v in value]
        return value if all(a is b for a, b in zip(value, new, strict=True)) else type(value)(new)
    return value


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (now if now is not None else time.time()))


def status_error(
    provider: str,
    model: str,
    status: int,
    *,
    body: str | None,
    headers: Mapping[str, str] | None,
    detail: str | None = None,
    secrets: tuple[str, ...] = (),
    key_variable: str | None = None,
    what: str | None = None,
) -> ProviderError:
    """The ``cycle`` error for an HTTP error status from ``provider`` (``what``: how the
    message names the answer, when not by its status: an error sent in a 200's body)."""
    secrets = (*secrets, *maskable(secrets))  # and as a body may spell them (URL, base64)
    body = redact(body or "", *secrets)[:MAX_BODY]
    detail = redact(detail or "", *secrets).strip()
    headers = dict(headers or {})
    retry_after = parse_retry_after(headers)
    what = what or f"{provider}:{model} answered HTTP {status}"
    message = f"{what}: {detail}" if detail else what
    kwargs: dict[str, Any] = {
        "status": status, "body": body, "headers": headers, "retry_after": retry_after,
    }
    if status in (401, 403):
        hint = f"Check the API key in {key_variable}." if key_variable else "Check the API key."
        return AuthenticationError(message, hint=hint, **kwargs)
    if status == 429:
        error = RateLimitError(message, **kwargs)
        # an exhausted quota does not recover by waiting: retrying only burns time
        # (OpenAI says so with the code insufficient_quota; Gemini's per-minute
        # limits also say "exceeded your current quota", so only the code counts)
        if "insufficient_quota" in body:
            error.retryable = False
            error.hint = "The account has no quota left; add credit or use another key."
        return error
    if status >= 500 or status == 408:
        return ServerError(message, **kwargs)
    return BadRequestError(message, **kwargs)


@contextlib.contextmanager
def unsupported_when_missing(base_url: str | None) -> Iterator[None]:
    """A 404 or 405 where a batch endpoint should be (a compatible server that has none)
    becomes ``BatchUnsupported``: the calls then go live."""
    try:
        yield
    except ProviderError as e:
        if e.status in (404, 405):
            raise BatchUnsupported(
                f"{safe_url(base_url) or 'the server'} has no batch endpoints (HTTP {e.status})") from e
        raise
