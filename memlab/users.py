"""``stack.users``: the default user, agent users, and resolving ``user=`` arguments."""

from __future__ import annotations

import uuid
from typing import Any

from memlab.exceptions import SessionPreconditionError, ValidationError
from memlab.models import User
from memlab.relational import RelationalStore
from memlab.validation import check_name


class Users:
    """User registry of one stack."""

    def __init__(self, store: RelationalStore) -> None:
        self._store = store
        self._default: User | None = None  # never changes once created: resolved once per stack

    async def create(self, name: str, parent_user_id: uuid.UUID | None = None) -> User:
        """Create a user; an agent user names the user that owns it in ``parent_user_id``."""
        name = check_name("user name", name)
        if parent_user_id is not None and not isinstance(parent_user_id, uuid.UUID):
            raise ValidationError(f"parent_user_id must be a uuid.UUID, got {parent_user_id!r}")
        return await self._store.create_user(name, parent_user_id)

    async def default(self) -> User:
        """The stack's default user, created on first use."""
        self._store.require_open()
        if self._default is None:
            self._default = await self._store.default_user()
        return self._default

    async def get(self, user_id: uuid.UUID) -> User | None:
        return await self._store.get_user(user_id)

    async def resolve(self, user: Any = None) -> User:
        """The stored user that ``user`` (a User, or anything with an ``.id``) names, or the default user.

        Only the id is taken from the object: the returned ``User`` (its parent, and so
        every permission check made with it) is read from the relational store on every
        call, so a hand-built ``User(id=..., parent_user_id=...)`` gains nothing.
        Raises ``SessionPreconditionError`` when the object has no ``id`` or names no
        known user.
        """
        if user is None:
            return await self.default()
        user_id = getattr(user, "id", None)
        if user_id is None:
            raise SessionPreconditionError(f"user must be a memlab User (or have an .id), got {user!r}")
        try:
            user_uuid = user_id if isinstance(user_id, uuid.UUID) else uuid.UUID(str(user_id))
        except ValueError:
            raise SessionPreconditionError(f"user id {user_id!r} is not a UUID") from None
        found = await self._store.get_user(user_uuid)
        if found is None:
            raise SessionPreconditionError(f"user {user_uuid} does not exist")
        return found
