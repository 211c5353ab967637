"""What memlab's two servers share: the HTTP API (:mod:`memlab.api`) and the MCP server (:mod:`memlab.integrations.mcp`).

Both act for one caller (the owner of an API key, or the stdio server's user) on one
stack, take the same arguments for the same calls and answer with the same models:

* argument types: ``Annotated`` aliases carrying their bounds and a description, which
  a pydantic model field and an MCP tool parameter take alike (:data:`TopK`,
  :data:`Datasets`, ...), and the query values of ``stack.usage`` (:data:`SessionStatus`,
  :data:`OrderBy`);
* :class:`FeedbackResult` and :class:`EndResult`, the answers of rating a turn and of
  ending a session;
* :func:`check_remember_text`: ``remember`` over a server stores text only;
* :func:`error_kind`: the kind of a memlab error, which each server turns into its own
  answer (the text of an MCP tool error, an HTTP status).

Nothing here imports a server framework: pydantic and memlab only.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from memlab.exceptions import (
    BackendError,
    ConfigError,
    EmbeddingError,
    LLMError,
    MemlabError,
    NotFoundError,
    PermissionDeniedError,
    StackStateError,
    ValidationError,
)
from memlab.validation import MAX_ID_CHARS

__all__ = [
    "ERROR_KINDS",
    "MAX_TOP_K",
    "DatasetIds",
    "Datasets",
    "EndResult",
    "EndStatus",
    "ErrorKind",
    "FeedbackResult",
    "FeedbackScore",
    "Ids",
    "OrderBy",
    "SessionStatus",
    "TopK",
    "WritableDataset",
    "check_remember_text",
    "error_kind",
]

#: the query values ``stack.usage`` accepts (its ``STATUSES`` and ``SESSION_ORDER_COLUMNS``), as types a schema lists
SessionStatus = Literal["running", "completed", "failed", "abandoned"]
OrderBy = Literal["last_activity_at", "started_at", "ended_at", "cost_usd", "tokens_in", "tokens_out"]
#: how ``stack.session.end`` may end a session
EndStatus = Literal["completed", "failed"]

#: the largest ``top_k`` a server takes (the Python API has no bound)
MAX_TOP_K = 1000

Ids = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
Datasets = Annotated[list[str] | None, Field(description="dataset names to search (each needs read permission); omitted: your datasets")]
DatasetIds = Annotated[
    list[str] | None, Field(description="dataset ids to search (how an agent user names a dataset its parent shared); each needs read permission")
]
TopK = Annotated[int, Field(ge=1, le=MAX_TOP_K, description="at most this many results")]
FeedbackScore = Annotated[int | None, Field(ge=1, le=5, description="1 (bad) to 5 (good)")]
WritableDataset = Annotated[
    str, Field(min_length=1, max_length=MAX_ID_CHARS, description="dataset name (created when missing) or id you may write")
]


class FeedbackResult(BaseModel):
    """Rating a turn: ``stored`` is False when the session has no turn ``qa_id`` (or the cache is unavailable).

    The HTTP API answers 404 instead of ``stored: false``, so its 200 answers always hold True.
    """

    stored: bool
    session_id: str | None
    qa_id: str


class EndResult(BaseModel):
    """Ending a session: ``ended`` is False when the session has no record (nothing was ever stored in it).

    The HTTP API answers 404 instead of ``ended: false``, so its 200 answers always hold True.
    """

    ended: bool
    session_id: str | None
    status: EndStatus


def check_remember_text(text: Any) -> Any:
    """``text`` (a str or a list of str) unchanged, unless an item starts with ``file://``: ``ValidationError``.

    The Python API reads such a string as a path on the machine it runs on; a server
    would read its own files for a client, so over a server ``remember`` stores text only.
    """
    texts = [text] if isinstance(text, str) else text if isinstance(text, list) else []
    if any(isinstance(item, str) and item.lstrip().lower().startswith("file://") for item in texts):
        raise ValidationError("text holds a 'file://' path: remember over a server stores text; paths are read only through the Python API")
    return text


ErrorKind = Literal["invalid argument", "permission denied", "not found", "unavailable", "model call failed", "memlab error"]
#: every kind :func:`error_kind` returns
ERROR_KINDS: tuple[ErrorKind, ...] = ("invalid argument", "permission denied", "not found", "unavailable", "model call failed", "memlab error")


def error_kind(exc: MemlabError) -> ErrorKind:
    """What went wrong, for a client: a bad argument, a refused dataset, a missing dataset or document, a store down, a model call failed."""
    if isinstance(exc, NotFoundError):
        return "not found"
    if isinstance(exc, (ValidationError, ConfigError)):
        return "invalid argument"
    if isinstance(exc, PermissionDeniedError):
        return "permission denied"
    if isinstance(exc, (BackendError, StackStateError)):
        return "unavailable"
    if isinstance(exc, (LLMError, EmbeddingError)):
        return "model call failed"
    return "memlab error"
