"""How the API answers a failure: each memlab error has its own status (none is a 500), and every 422 has FastAPI's shape.

=============================================  ======  ==========================================================
memlab error (:func:`memlab.remote.error_kind`)  status  body
=============================================  ======  ==========================================================
``ValidationError`` (invalid argument)          422     ``{"detail": [{"loc": [...], "msg": ..., "type": "value_error"}]}``
                                                        at the path, query or body field memlab's message names
``SessionPreconditionError``                    409     memlab's message (the call needs state that does not exist)
``NotFoundError`` (not found)                   404     ``dataset not found`` / ``document not found``
``PermissionDeniedError`` (permission denied)   404     ``dataset not found``: the write routes answer 403 instead
                                                        for a dataset the caller may read (:func:`refusing`)
``BackendError``, ``StackStateError``           503     ``a memlab store is unavailable`` / ``the memory stack is not open``
``ConfigError``                                 503     the server's configuration cannot serve the call
``LLMError``, ``EmbeddingError``                502     a model call failed, and the error's class
any other ``MemlabError``                       503     its class
=============================================  ======  ==========================================================

Error bodies are ASCII JSON (a lone surrogate a client sent is echoed as ``\\udXXX``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from memlab.api._bodies import BODY_FIELDS, MEMLAB_NAMES
from memlab.exceptions import (
    ConfigError,
    MemlabError,
    NotFoundError,
    PermissionDeniedError,
    SessionPreconditionError,
    StackStateError,
    ValidationError,
)
from memlab.models import User
from memlab.remote import ErrorKind, error_kind
from memlab.stack import MemoryStack

__all__ = ["DATASET_NOT_FOUND", "SESSION_NOT_FOUND", "TURN_NOT_FOUND", "install", "refusing", "status_of"]

logger = logging.getLogger("memlab.api")

SESSION_NOT_FOUND = "session not found"
DATASET_NOT_FOUND = "dataset not found"
TURN_NOT_FOUND = "turn not found"
_QUERY_NAMES = frozenset({"status", "order_by", "descending", "limit", "offset", "range"})
_STATUS_OF_KIND: dict[ErrorKind, int] = {
    "invalid argument": 422,
    "permission denied": 404,
    "not found": 404,
    "unavailable": 503,
    "model call failed": 502,
    "memlab error": 503,
}


class _AsciiJSON(JSONResponse):
    """JSON with every non-ASCII character escaped: an echoed lone surrogate cannot make the answer unencodable."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def status_of(exc: MemlabError) -> int:
    """The HTTP status of a memlab error (the table above)."""
    if isinstance(exc, SessionPreconditionError):
        return 409
    if isinstance(exc, ConfigError):  # raised by a call only for the server's own configuration, never for an argument
        return 503
    return _STATUS_OF_KIND[error_kind(exc)]


def _where(request: Request, message: str) -> list[str]:
    """The location of the field a memlab message names (its first word: memlab's messages start with the argument)."""
    first = message.split(" ", 1)[0]
    if first in request.path_params:
        return ["path", first]
    if request.method == "POST":
        name = MEMLAB_NAMES.get(first, first)
        return ["body", name] if name in BODY_FIELDS else ["body"]
    if first in _QUERY_NAMES or first in request.query_params:
        return ["query", first]
    return ["query"]


def _detail(exc: MemlabError, status: int) -> str:
    if isinstance(exc, NotFoundError):
        return f"{exc.what} not found"
    if isinstance(exc, PermissionDeniedError):
        return DATASET_NOT_FOUND  # as for a dataset that does not exist: a refusal never says that it does
    if isinstance(exc, SessionPreconditionError):
        return str(exc)
    if isinstance(exc, StackStateError):
        return "the memory stack is not open"
    if isinstance(exc, ConfigError):
        return "the server's memlab configuration cannot serve this call"
    if status == 502:
        return f"a model call failed ({type(exc).__name__})"
    if error_kind(exc) == "unavailable":
        return "a memlab store is unavailable"
    return f"memlab could not complete the call ({type(exc).__name__})"


def _memlab_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MemlabError)
    status = status_of(exc)
    if status == 422 and isinstance(exc, ValidationError) and not isinstance(exc, NotFoundError):
        error = {"loc": _where(request, str(exc)), "msg": str(exc), "type": "value_error"}
        return _AsciiJSON(status_code=422, content={"detail": [error]})
    if status >= 500:
        logger.warning("%s %s answered %d: %s: %s", request.method, request.url.path, status, type(exc).__name__, exc)
    return _AsciiJSON(status_code=status, content={"detail": _detail(exc, status)})


def _request_validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's own 422 answer, as ASCII JSON."""
    assert isinstance(exc, RequestValidationError)
    return _AsciiJSON(status_code=422, content={"detail": jsonable_encoder(exc.errors())})


def install(app: FastAPI) -> None:
    """Answer every memlab error, and FastAPI's validation errors, as the table above says."""
    app.add_exception_handler(MemlabError, _memlab_error)
    app.add_exception_handler(RequestValidationError, _request_validation_error)


@asynccontextmanager
async def refusing(stack: MemoryStack, caller: User, dataset: Any) -> AsyncIterator[None]:
    """Around a write into ``dataset``: a refusal is 403 when the caller may read the dataset, else 404 (as an unknown one)."""
    try:
        yield
    except PermissionDeniedError:
        if await stack.datasets.can(caller, dataset, "read"):
            raise HTTPException(status_code=403, detail="the caller may read this dataset but not write it") from None
        raise HTTPException(status_code=404, detail=DATASET_NOT_FOUND) from None
