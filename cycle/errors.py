"""Every error cycle raises, in one hierarchy.

The CLI turns any ``CycleError`` into a one-paragraph message and a non-zero
exit; only ``--debug`` shows the traceback. Messages carry what the user needs
to fix the problem (a file and line, a variable to set, a list of known
names) and never a secret.

    CycleError
    ├── ConfigError              a cycle.yaml, prompt or case file is wrong (file, line, field)
    │   └── TemplateError        a prompt template does not compile or does not render
    ├── ModelError               talking to a model went wrong
    │   ├── UnknownProviderError "foo:bar" names no known provider
    │   ├── MissingCredentialsError  the API key variable is not set
    │   ├── ProviderError        the provider answered with an error (status, body, headers)
    │   │   ├── AuthenticationError  401/403: never retried
    │   │   ├── RateLimitError       429: retried, honouring Retry-After
    │   │   ├── ServerError          5xx: retried
    │   │   └── BadRequestError      other 4xx: not retried
    │   ├── ProviderConnectionError  timeout or connection failure: retried
    │   ├── MalformedResponseError   the provider's answer could not be understood
    │   ├── StructuredOutputError    the model's JSON did not validate, even after a repair
    │   ├── RetriesExhaustedError    every attempt failed; wraps the last error
    │   └── BudgetExceededError      the cost cap would be crossed; no call was made
    ├── ReportError              a report could not be written (what it reports is stored)
    ├── StoreError               the SQLite store
    │   ├── NotFoundError        an unknown prompt, version, label, run or cycle
    │   ├── LockedError          another process runs the cycle or run to resume
    │   ├── ProtectedLabelError  a protected label, moved by someone it does not allow
    │   └── StoreFormatError     not a cycle store, or written by a newer release
    └── EvalError                running or judging a case went wrong (an *error*, never a score)
        └── JudgeError           the judge's verdict was missing or malformed after a repair
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class CycleError(Exception):
    """Base of every error cycle raises on purpose."""

    #: the CLI's exit code for this error
    exit_code: int = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n{self.hint}"
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt without calling __init__, whose details are keyword-only in
        # subclasses: the TUI's cycle process sends its errors back pickled
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[CycleError], args: tuple[Any, ...], state: dict[str, Any]) -> CycleError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class ConfigError(CycleError):
    """A configuration, prompt or case file is wrong."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        where = ""
        if file:
            where = str(file) + (f":{line}" if line else "")
        if field:
            where = f"{where} ({field})" if where else field
        super().__init__(f"{where}: {message}" if where else message, hint=hint)


class TemplateError(ConfigError):
    """A prompt template does not compile or cannot be rendered."""


class ModelError(CycleError):
    """Talking to a model went wrong."""

    exit_code = 3

    #: whether Model should retry the call that raised this
    retryable: bool = False


class UnknownProviderError(ModelError):
    exit_code = 2


class MissingCredentialsError(ModelError):
    exit_code = 2


class ProviderError(ModelError):
    """The provider answered with an error status."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
        retry_after: float | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        #: seconds the provider asked us to wait, from Retry-After / retry-after-ms
        self.retry_after = retry_after


class AuthenticationError(ProviderError):
    exit_code = 2


class RateLimitError(ProviderError):
    retryable = True


class ServerError(ProviderError):
    retryable = True


class BadRequestError(ProviderError):
    pass


class ProviderConnectionError(ModelError):
    retryable = True

    #: what came back before the connection dropped (a ModelOutput of what was streamed):
    #: the provider may bill it, so the budget and the ledger charge it, estimated
    paid: Any = None


class MalformedResponseError(ModelError):
    #: an answer that came back but could not be used (a ModelOutput standing for it): the
    #: provider may bill it, so the budget and the ledger charge it, estimated
    paid: Any = None


class StructuredOutputError(ModelError):
    pass


class RetriesExhaustedError(ModelError):
    def __init__(self, message: str, *, attempts: int, last: BaseException | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last = last


class BudgetExceededError(ModelError):
    exit_code = 3

    def __init__(self, message: str, *, spent: float = 0.0, limit: float = 0.0) -> None:
        super().__init__(message)
        self.spent = spent
        self.limit = limit


class StoreError(CycleError):
    pass


class StoreConnectionLost(StoreError):
    """The connection to a PostgreSQL store was lost mid-command (the server restarted,
    the backend was terminated): what was stored before is kept, the rest resumes."""


class ReportError(CycleError):
    """A report could not be written (the run or cycle it reports on is stored)."""


class LockedError(StoreError):
    """Another process is running the cycle or run this one would resume."""


class NotFoundError(StoreError):
    pass


class ProtectedLabelError(StoreError):
    """A protected label (``cycle protect``) would be moved by an author it does not
    allow, without --force; nothing was moved."""

    #: the protection that refused (a cycle.records.Protection), for who may move it
    protection: Any = None


class StoreFormatError(StoreError):
    pass


class EvalError(CycleError):
    exit_code = 3


class JudgeError(EvalError):
    pass


def describe(exc: BaseException, **extra: Any) -> str:
    """One line naming an exception, for logs and error columns in the store."""
    text = str(exc) or exc.__class__.__name__
    return f"{exc.__class__.__name__}: {text}"
