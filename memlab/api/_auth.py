"""Who is calling: the bearer API key's user, as one FastAPI dependency (see :mod:`memlab.api`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPBearer
from pydantic import BaseModel

from memlab.exceptions import ValidationError
from memlab.models import User
from memlab.stack import MemoryStack

__all__ = ["AUTH_ERRORS", "Caller", "ErrorBody"]


class ErrorBody(BaseModel):
    """The body of a 401, 403, 404, 409, 502 or 503 answer."""

    detail: str


def _unauthorized(detail: str, *, invalid: bool) -> HTTPException:
    challenge = 'Bearer error="invalid_token"' if invalid else "Bearer"
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": challenge})


class _BearerKey(HTTPBearer):
    """The schema's ``HTTPBearer`` scheme, whose dependency is the key's user itself.

    One dependency instead of a user dependency on the credentials dependency: FastAPI
    solves each level of dependencies per request at a cost of its own (the routes'
    ceiling in ``memlab bench serve`` has none), and the OpenAPI schema is the same.
    """

    async def __call__(self, request: Request) -> User:  # type: ignore[override]
        """The user of the request's bearer key; 401 for a missing, malformed, unknown or revoked key."""
        credentials = await super().__call__(request)
        if credentials is None:
            raise _unauthorized("an API key is required: send 'Authorization: Bearer <key>'", invalid=False)
        stack: MemoryStack = request.app.state.stack
        try:
            user = await stack.users.user_for_api_key(credentials.credentials)
        except ValidationError:  # not even shaped like a key
            user = None
        if user is None:
            raise _unauthorized("the API key is unknown or revoked", invalid=True)
        return user


_caller = _BearerKey(
    scheme_name="HTTPBearer", auto_error=False, description="an API key: `memlab users create-key NAME` or `stack.users.create_api_key(user)`"
)

#: a route's caller: the user of the request's API key (read from the store, with its parent)
Caller = Annotated[User, Depends(_caller)]

#: the answers every ``/api/v1`` route may give besides its own
AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "missing, unknown or revoked API key"},
    503: {"model": ErrorBody, "description": "the stack is not open, or a store is unavailable"},
}
