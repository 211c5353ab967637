"""``stack.users``: the default user, agent users, resolving ``user=`` arguments, and API keys.

API keys authenticate callers of the HTTP API (:mod:`memlab.api`) and of ``memlab mcp --http``. A key is
``mlk_`` followed by ``secrets.token_urlsafe(32)`` (43 characters, 256 random bits);
it is returned once by :meth:`Users.create_api_key` and only its SHA-256 hex digest
(plus its first 12 characters, to tell keys apart in a listing) is stored. A key is
looked up by that digest, so no comparison ever runs on the secret itself.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from typing import Any

from memlab.exceptions import SessionPreconditionError, ValidationError
from memlab.models import User
from memlab.relational import RelationalStore
from memlab.validation import check_name

#: every API key starts with this
API_KEY_PREFIX = "mlk_"
#: characters of a key kept in ``api_keys.prefix`` (shown, never enough to authenticate)
_SHOWN_CHARS = 12
#: longest string accepted as a key (a real one is 47 characters)
_MAX_KEY_CHARS = 256
_KEY_CHARS = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no space


def _key_hash(key: Any) -> str:
    """The SHA-256 hex digest of ``key``; ``ValidationError`` unless it is a plausible key string."""
    if not isinstance(key, str):
        raise ValidationError(f"api key must be a str, got {type(key).__name__}")
    if not key or len(key) > _MAX_KEY_CHARS or not _KEY_CHARS.fullmatch(key):
        raise ValidationError(f"api key must be 1-{_MAX_KEY_CHARS} printable ASCII characters without spaces")
    return hashlib.sha256(key.encode("ascii")).hexdigest()


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
        return await self._store.users.create(name, parent_user_id)

    async def default(self) -> User:
        """The stack's default user, created on first use."""
        self._store.require_open()
        if self._default is None:
            self._default = await self._store.users.default()
        return self._default

    async def get(self, user_id: uuid.UUID) -> User | None:
        return await self._store.users.get(user_id)

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
        found = await self._store.users.get(user_uuid)
        if found is None:
            raise SessionPreconditionError(f"user {user_uuid} does not exist")
        return found

    async def by_name(self, name: str) -> list[User]:
        """Every user called ``name``, oldest first (names are not unique)."""
        return await self._store.users.by_name(check_name("user name", name))

    # API keys
    async def create_api_key(self, user: Any = None) -> str:
        """A new API key of ``user`` (None: the default user), shown only here: memlab keeps its SHA-256 only.

        Raises ``SessionPreconditionError`` (a ``ValidationError``) when ``user`` names no known user.
        """
        owner = await self.resolve(user)
        key = API_KEY_PREFIX + secrets.token_urlsafe(32)
        await self._store.users.add_api_key(owner.id, _key_hash(key), key[:_SHOWN_CHARS])
        return key

    async def revoke_api_key(self, key: str) -> bool:
        """Revoke ``key``; True when it was a live key, False when unknown or already revoked.

        ``ValidationError`` when ``key`` is not a string of printable ASCII (1-256 characters).
        """
        return await self._store.users.revoke_api_key_hash(_key_hash(key))

    async def user_for_api_key(self, key: str) -> User | None:
        """The user a live ``key`` belongs to (read from the store), or None for an unknown or revoked key.

        ``ValidationError`` when ``key`` is not a string of printable ASCII (1-256 characters).
        """
        return await self._store.users.by_api_key_hash(_key_hash(key))
