"""memlab's own metadata database (users, datasets): ``{data_root}/memlab.db``.

Small, rarely written tables; the same inline SQLite runner as the cache.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import Boolean, Column, ForeignKey, Index, MetaData, String, Table, bindparam, select

from memlab._sqlrun import DB, SQLiteRunner, is_integrity_error
from memlab.exceptions import ValidationError
from memlab.models import Dataset, User

metadata = MetaData()

users = Table(
    "users",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("parent_user_id", String(36), ForeignKey("users.id"), nullable=True),
    Column("is_default", Boolean, nullable=False, default=False),
    Column("created_at", String(40), nullable=False),
)
# at most one default user, even when two processes race to create it
Index("ux_users_default", users.c.is_default, unique=True, sqlite_where=users.c.is_default.is_(True))

datasets = Table(
    "datasets",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("owner_id", String(36), ForeignKey("users.id"), nullable=False),
    Column("created_at", String(40), nullable=False),
    Index("ux_datasets_owner_name", "owner_id", "name", unique=True),
)

_USER_COLS = (users.c.id, users.c.name, users.c.parent_user_id, users.c.is_default, users.c.created_at)
_DATASET_COLS = (datasets.c.id, datasets.c.name, datasets.c.owner_id, datasets.c.created_at)

STATEMENTS = {
    "user_insert": users.insert().values(
        id=bindparam("id"),
        name=bindparam("name"),
        parent_user_id=bindparam("parent_user_id"),
        is_default=bindparam("is_default"),
        created_at=bindparam("created_at"),
    ),
    "user_by_id": select(*_USER_COLS).where(users.c.id == bindparam("id")),
    "user_default": select(*_USER_COLS).where(users.c.is_default.is_(True)),
    "dataset_insert": datasets.insert().values(
        id=bindparam("id"), name=bindparam("name"), owner_id=bindparam("owner_id"), created_at=bindparam("created_at")
    ),
    "dataset_by_name": select(*_DATASET_COLS).where(datasets.c.owner_id == bindparam("owner_id"), datasets.c.name == bindparam("name")),
    "dataset_by_id": select(*_DATASET_COLS).where(datasets.c.id == bindparam("id")),
}


def _when(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _user(row) -> User:
    return User(
        id=uuid.UUID(row[0]),
        name=row[1],
        parent_user_id=uuid.UUID(row[2]) if row[2] else None,
        is_default=bool(row[3]),
        created_at=_when(row[4]),
    )


def _dataset(row) -> Dataset:
    return Dataset(id=uuid.UUID(row[0]), name=row[1], owner_id=uuid.UUID(row[2]), created_at=_when(row[3]))


class RelationalStore:
    """Users and datasets in SQLite."""

    def __init__(self, path: Path, clock) -> None:
        self.path = Path(path)
        self.clock = clock
        self._runner: SQLiteRunner | None = None

    async def open(self) -> None:
        runner = SQLiteRunner(self.path, STATEMENTS)
        await runner.open()
        try:
            await runner.run_ddl(lambda conn: metadata.create_all(conn, checkfirst=True))
        except BaseException:
            await runner.close()
            raise
        self._runner = runner

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.close()

    async def _run(self, fn, *, write: bool):
        return await self._runner.run(fn, write=write)

    # users
    async def create_user(self, name: str, parent_user_id: uuid.UUID | None = None, *, is_default: bool = False) -> User:
        def work(db: DB) -> User:
            if parent_user_id is not None and db.first("user_by_id", id=str(parent_user_id)) is None:
                raise ValidationError(f"parent_user_id {parent_user_id} is not a known user")
            row = (str(uuid.uuid4()), name, str(parent_user_id) if parent_user_id else None, is_default, self.clock.now().isoformat())
            db.run("user_insert", id=row[0], name=name, parent_user_id=row[2], is_default=is_default, created_at=row[4])
            return _user(row)

        return await self._run(work, write=True)

    async def get_user(self, user_id: uuid.UUID) -> User | None:
        row = await self._run(lambda db: db.first("user_by_id", id=str(user_id)), write=False)
        return _user(row) if row else None

    async def default_user(self) -> User:
        row = await self._run(lambda db: db.first("user_default"), write=False)
        if row:
            return _user(row)
        try:
            return await self.create_user("default_user", is_default=True)
        except Exception as exc:  # another process created it first
            if not is_integrity_error(exc):
                raise
            return _user(await self._run(lambda db: db.first("user_default"), write=False))

    # datasets
    async def get_dataset(self, owner_id: uuid.UUID, name: str) -> Dataset | None:
        row = await self._run(lambda db: db.first("dataset_by_name", owner_id=str(owner_id), name=name), write=False)
        return _dataset(row) if row else None

    async def get_dataset_by_id(self, dataset_id: uuid.UUID) -> Dataset | None:
        row = await self._run(lambda db: db.first("dataset_by_id", id=str(dataset_id)), write=False)
        return _dataset(row) if row else None

    async def create_dataset(self, owner_id: uuid.UUID, name: str) -> Dataset:
        """Create, or return the owner's existing dataset of that name."""

        def work(db: DB) -> Dataset:
            row = db.first("dataset_by_name", owner_id=str(owner_id), name=name)
            if row:
                return _dataset(row)
            row = (str(uuid.uuid4()), name, str(owner_id), self.clock.now().isoformat())
            db.run("dataset_insert", id=row[0], name=name, owner_id=row[2], created_at=row[3])
            return _dataset(row)

        return await self._run(work, write=True)
