"""memlab's exception tree.

Every error memlab raises on purpose derives from :class:`MemlabError`; driver
errors (sqlite3, redis, asyncpg, ...) are wrapped, never raised bare::

    MemlabError
    ├── ConfigError(ValueError)              unknown strategy name, bad env value, unusable data root
    ├── ValidationError(ValueError)          a caller passed a bad argument; nothing was written
    │   ├── SessionParameterValidationError  blank user/session/qa id, last_n < 1, non-UUID dataset id
    │   ├── SessionQAEntryValidationError    a QA entry field is invalid (feedback_score outside 1..5, ...)
    │   └── SessionPreconditionError         the call needs state that does not exist (no main_dataset)
    ├── PermissionDeniedError(PermissionError)  the user may not read / write that dataset; nothing leaked
    ├── BackendError(RuntimeError)           a store failed; the message names the backend, never a secret
    │   └── CacheConnectionError             the session cache could not be reached or answered wrongly
    └── StackStateError(RuntimeError)        a MemoryStack used before open() or after close()
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "CacheConnectionError",
    "ConfigError",
    "MemlabError",
    "PermissionDeniedError",
    "SessionParameterValidationError",
    "SessionPreconditionError",
    "SessionQAEntryValidationError",
    "StackStateError",
    "ValidationError",
]


class MemlabError(Exception):
    """Root of every error memlab raises on purpose."""


class ConfigError(MemlabError, ValueError):
    """A configuration value is unknown or unusable."""


class ValidationError(MemlabError, ValueError):
    """A caller passed an invalid argument. Nothing was written."""


class SessionParameterValidationError(ValidationError):
    """A session id, user id, qa id, ``last_n`` or dataset id is invalid."""


class SessionQAEntryValidationError(ValidationError):
    """A field of a session QA entry is invalid."""


class SessionPreconditionError(ValidationError):
    """The call needs state that does not exist yet (for example a ``main_dataset``)."""


class PermissionDeniedError(MemlabError, PermissionError):
    """The user lacks ``read`` / ``write`` on a dataset. The message names the dataset id, never its content."""


class BackendError(MemlabError, RuntimeError):
    """A storage backend failed. The original driver error is chained as ``__cause__``."""


class CacheConnectionError(BackendError):
    """The session cache could not be reached, or it answered with something unusable."""


class StackStateError(MemlabError, RuntimeError):
    """A :class:`~memlab.MemoryStack` was used outside its open/close lifecycle."""
