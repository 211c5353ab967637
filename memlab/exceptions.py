"""memlab's exception tree.

Every error memlab raises on purpose derives from :class:`MemlabError`; driver
errors (sqlite3, redis, asyncpg, ...) are wrapped, never raised bare::

    MemlabError
    ├── ConfigError(ValueError)              unknown strategy name, bad env value, unusable data root
    ├── ValidationError(ValueError)          a caller passed a bad argument; nothing was written
    │   ├── SessionParameterValidationError  bad user/session/qa id, last_n < 1, non-UUID dataset id
    │   ├── SessionQAEntryValidationError    a QA entry field is invalid (feedback_score outside 1..5, ...)
    │   ├── SessionPreconditionError         the call needs state that does not exist (no main_dataset)
    │   ├── NotFoundError                    the dataset or document the call names does not exist (``what`` says which)
    │   ├── SessionDistillationError         distill_session() got no dataset, or one that is unknown or not writable
    │   └── StructuredOutputError            the LLM's output does not fill the requested response_model
    ├── PermissionDeniedError(PermissionError)  the user may not read / write that dataset; nothing leaked
    ├── BackendError(RuntimeError)           a store failed; the message names the backend, never a secret
    │   ├── CacheConnectionError             the session cache could not be reached or answered wrongly
    │   │   └── MigrationError               the cache schema cannot be brought to this memlab's head
    │   ├── SnapshotConflict                 another process committed a dataset's snapshot first (retried inside memlab)
    │   └── SessionLockTimeout               a session's turn lock stayed held by another process past the timeout
    ├── LLMError(RuntimeError)               litellm or the provider failed; the original error is __cause__
    │   └── DistillationCallsFailedError     curator / writer calls of a session distillation failed (``result``: the partial run)
    ├── EmbeddingError(RuntimeError)         an embedder could not load, verify or call its model
    └── StackStateError(RuntimeError)        a MemoryStack used before open() or after close()
        └── SyncInEventLoopError             a SyncMemoryStack called inside a running event loop (await the async API there)

Every library error is defined here and only here; other modules re-export them.

Raised only by the ``memlab`` command and the benchmarks, and defined with them (not
part of the library's tree, not exported from ``memlab``)::

    MemlabError
    ├── ValidationError
    │   └── UsageError                       memlab._cli_errors: a command-line argument is wrong (exit status 2)
    └── BenchmarkError(RuntimeError)         memlab.bench.errors: a benchmark subject could not run
        ├── BackendSkipped                   a cache backend cannot be benchmarked here (the message says why)
        └── SubjectFailed                    a benchmark subject raised during a repeat (``error`` is what)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "BackendError",
    "CacheConnectionError",
    "ConfigError",
    "DistillationCallsFailedError",
    "EmbeddingError",
    "LLMError",
    "MemlabError",
    "MigrationError",
    "NotFoundError",
    "SessionLockTimeout",
    "SnapshotConflict",
    "PermissionDeniedError",
    "SessionDistillationError",
    "SessionParameterValidationError",
    "SessionPreconditionError",
    "SessionQAEntryValidationError",
    "StackStateError",
    "StructuredOutputError",
    "SyncInEventLoopError",
    "ValidationError",
]


class MemlabError(Exception):
    """Root of every error memlab raises on purpose."""


class ConfigError(MemlabError, ValueError):
    """A configuration value is unknown or unusable."""

    #: for an invalid config section, each pydantic error as ``(location, message, input)``; empty otherwise
    problems: Sequence[tuple[tuple[int | str, ...], str, Any]] = ()


class ValidationError(MemlabError, ValueError):
    """A caller passed an invalid argument. Nothing was written."""


class SessionParameterValidationError(ValidationError):
    """A session id, user id, qa id, ``last_n`` or dataset id is invalid."""


class SessionQAEntryValidationError(ValidationError):
    """A field of a session QA entry is invalid."""


class SessionPreconditionError(ValidationError):
    """The call needs state that does not exist yet (for example a ``main_dataset``)."""


class NotFoundError(ValidationError):
    """The dataset or document a call names does not exist. Nothing was written.

    ``what`` is ``"dataset"`` (an id no dataset has, or a name the acting user owns no
    dataset of: names are per user) or ``"document"`` (a ``data_id`` the dataset does
    not hold). A subclass of :class:`ValidationError`, which callers caught before.
    """

    def __init__(self, message: str, *, what: str) -> None:
        super().__init__(message)
        self.what = what


class PermissionDeniedError(MemlabError, PermissionError):
    """The user lacks ``read`` / ``write`` on a dataset. The message names the dataset id, never its content."""


class BackendError(MemlabError, RuntimeError):
    """A storage backend failed. The original driver error is chained as ``__cause__``."""


class CacheConnectionError(BackendError):
    """The session cache could not be reached, or it answered with something unusable."""


class SnapshotConflict(BackendError):
    """A dataset's shared snapshot changed since it was loaded; the writer reloads and applies its change again."""


class SessionLockTimeout(BackendError):
    """A turn waited the whole timeout (``SESSION_TURN_LOCK_TIMEOUT_SECONDS``) for its session's turn lock without getting it.

    The message says how long this caller waited, how many turns took the lock
    meanwhile (where the backend can count them) and how long the holder has held it.
    """


class StackStateError(MemlabError, RuntimeError):
    """A :class:`~memlab.MemoryStack` was used outside its open/close lifecycle."""


class SyncInEventLoopError(StackStateError):
    """A :class:`~memlab.SyncMemoryStack` method was called inside a running event loop, which it would block.

    In async code (an ``async def``, a Jupyter cell) ``await`` the same method of a
    :class:`~memlab.MemoryStack` instead.
    """


class MigrationError(CacheConnectionError):
    """The cache schema cannot be brought to this memlab's head revision."""


class StructuredOutputError(ValidationError):
    """The model's output could not be validated as the requested ``response_model``.

    ``raw_text`` holds the full output (the message quotes only its start);
    ``response_model`` is the pydantic class; the pydantic or JSON error is chained
    as ``__cause__``.
    """

    def __init__(self, message: str, *, raw_text: str, response_model: type | None = None, model: str | None = None) -> None:
        super().__init__(message)
        self.raw_text = raw_text
        self.response_model = response_model
        self.model = model


class LLMError(MemlabError, RuntimeError):
    """An LLM call failed in litellm or at the provider. The original error is chained as ``__cause__``.

    ``model`` is the litellm model string of the call; ``provider_error`` the class
    name of the original exception (``"RateLimitError"``, ``"AuthenticationError"``, ...).
    The message never contains the API key.
    """

    def __init__(self, message: str, *, model: str | None = None, provider_error: str | None = None) -> None:
        super().__init__(message)
        self.model = model
        self.provider_error = provider_error


class EmbeddingError(MemlabError, RuntimeError):
    """An embedder failed: its model could not be loaded or verified, or the provider call failed.

    ``model`` names the embedder's model; ``provider_error`` is the class name of
    the original exception where there is one (chained as ``__cause__``). The
    message never contains an API key.
    """

    def __init__(self, message: str, *, model: str | None = None, provider_error: str | None = None) -> None:
        super().__init__(message)
        self.model = model
        self.provider_error = provider_error


class SessionDistillationError(ValidationError):
    """``distill_session()`` needs an existing dataset the user may write: it got None, an unknown one, or a read-only one."""


class DistillationCallsFailedError(LLMError):
    """Some curator or writer LLM calls of a session distillation failed.

    ``result`` is the partial :class:`~memlab.models.DistillResult` (status ``failed``):
    what was proposed, accepted, published and sealed before the error; the first
    failed call's error is chained as ``__cause__``.
    """

    def __init__(self, message: str, *, result: Any = None, model: str | None = None, provider_error: str | None = None) -> None:
        super().__init__(message, model=model, provider_error=provider_error)
        self.result = result
