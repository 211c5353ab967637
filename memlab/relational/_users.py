"""``store.users``: the ``users`` and ``api_keys`` tables.

One default user per database (created on first use, a race settles on one row).
An API key is stored and found only by its SHA-256 hex digest, never the key itself.
"""

from __future__ import annotations

import uuid

from sqlalchemy import bindparam, select, update
from sqlalchemy.sql import ClauseElement

from memlab._sqlrun import DB, is_integrity_error
from memlab.exceptions import ValidationError
from memlab.metadata_tables import api_keys, users
from memlab.models import User
from memlab.relational._base import Insert, Repository, binds, when

_USER_COLS = (users.c.id, users.c.name, users.c.parent_user_id, users.c.is_default, users.c.created_at)


def _user(row) -> User:
    return User(
        id=uuid.UUID(row[0]),
        name=row[1],
        parent_user_id=uuid.UUID(row[2]) if row[2] else None,
        is_default=bool(row[3]),
        created_at=when(row[4]),
    )


class UserRepository(Repository):
    """Users (agents name their parent) and their API keys."""

    @staticmethod
    def statements(insert: Insert) -> dict[str, ClauseElement]:
        return {
            "user_insert": users.insert().values(**binds("id", "name", "parent_user_id", "is_default", "created_at")),
            "user_by_id": select(*_USER_COLS).where(users.c.id == bindparam("id")),
            "user_default": select(*_USER_COLS).where(users.c.is_default.is_(True)),
            "users_by_name": select(*_USER_COLS).where(users.c.name == bindparam("name")).order_by(users.c.created_at, users.c.id),
            "api_key_insert": api_keys.insert().values(**binds("id", "user_id", "key_hash", "prefix", "created_at")),
            "api_key_user": select(*_USER_COLS)
            .join(api_keys, api_keys.c.user_id == users.c.id)
            .where(api_keys.c.key_hash == bindparam("key_hash"), api_keys.c.revoked_at.is_(None)),
            "api_key_revoke": update(api_keys)
            .where(api_keys.c.key_hash == bindparam("key_hash"), api_keys.c.revoked_at.is_(None))
            .values(revoked_at=bindparam("revoked_at")),
        }

    async def create(self, name: str, parent_user_id: uuid.UUID | None = None, *, is_default: bool = False) -> User:
        """A new user; ``ValidationError`` when ``parent_user_id`` names no user."""

        def work(db: DB) -> User:
            if parent_user_id is not None and db.first("user_by_id", id=str(parent_user_id)) is None:
                raise ValidationError(f"parent_user_id {parent_user_id} is not a known user")
            row = (str(uuid.uuid4()), name, str(parent_user_id) if parent_user_id else None, is_default, self._now())
            db.run("user_insert", id=row[0], name=name, parent_user_id=row[2], is_default=is_default, created_at=row[4])
            return _user(row)

        return await self._run(work, write=True)

    async def get(self, user_id: uuid.UUID) -> User | None:
        rows = await self._read("user_by_id", id=str(user_id))
        return _user(rows[0]) if rows else None

    async def default(self) -> User:
        """The database's default user, created on first use."""
        row = await self._run(lambda db: db.first("user_default"), write=False)
        if row:
            return _user(row)
        try:
            return await self.create("default_user", is_default=True)
        except Exception as exc:  # another process created it first
            if not is_integrity_error(exc):
                raise
            return _user(await self._run(lambda db: db.first("user_default"), write=False))

    async def by_name(self, name: str) -> list[User]:
        """Every user called ``name`` (names are not unique), oldest first."""
        rows = await self._run(lambda db: db.rows("users_by_name", name=name), write=False)
        return [_user(row) for row in rows]

    async def add_api_key(self, user_id: uuid.UUID, key_hash: str, prefix: str) -> None:
        """Store an API key of ``user_id`` by its SHA-256 hex digest and its displayable ``prefix``."""
        created = self._now()

        def work(db: DB) -> None:
            if db.first("user_by_id", id=str(user_id)) is None:
                raise ValidationError(f"user {user_id} does not exist")
            db.run("api_key_insert", id=str(uuid.uuid4()), user_id=str(user_id), key_hash=key_hash, prefix=prefix, created_at=created)

        await self._run(work, write=True)

    async def by_api_key_hash(self, key_hash: str) -> User | None:
        """The user owning the unrevoked key whose SHA-256 hex digest is ``key_hash``, or None."""
        rows = await self._read("api_key_user", key_hash=key_hash)
        return _user(rows[0]) if rows else None

    async def revoke_api_key_hash(self, key_hash: str) -> bool:
        """Revoke the key with that hash; False when no unrevoked key has it."""
        revoked = self._now()
        count = await self._run(lambda db: db.run("api_key_revoke", key_hash=key_hash, revoked_at=revoked), write=True)
        return count > 0
