"""``store.datasets``: the ``datasets`` and ``dataset_permissions`` tables.

A dataset name is unique per owner (creating it twice returns the first); a grant is
idempotent. Deleting a dataset removes its documents, grants and pipeline runs with it.
"""

from __future__ import annotations

import uuid

from sqlalchemy import bindparam, delete, select
from sqlalchemy.sql import ClauseElement

from memlab._sqlrun import DB, is_integrity_error
from memlab.metadata_tables import data, dataset_permissions, datasets, pipeline_runs
from memlab.models import Dataset
from memlab.relational._base import Insert, Repository, binds, when

_DATASET_COLS = (datasets.c.id, datasets.c.name, datasets.c.owner_id, datasets.c.created_at)
#: what :meth:`DatasetRepository.delete` removes before the dataset row, in this order
_CASCADE = ("dataset_data_delete", "dataset_permissions_delete", "dataset_runs_delete")


def _dataset(row) -> Dataset:
    return Dataset(id=uuid.UUID(row[0]), name=row[1], owner_id=uuid.UUID(row[2]), created_at=when(row[3]))


class DatasetRepository(Repository):
    """Datasets per owner and the permissions granted on them."""

    @staticmethod
    def statements(insert: Insert) -> dict[str, ClauseElement]:
        return {
            "dataset_insert": datasets.insert().values(**binds("id", "name", "owner_id", "created_at")),
            "dataset_by_name": select(*_DATASET_COLS).where(datasets.c.owner_id == bindparam("owner_id"), datasets.c.name == bindparam("name")),
            "dataset_by_id": select(*_DATASET_COLS).where(datasets.c.id == bindparam("id")),
            "datasets_of_owner": select(*_DATASET_COLS).where(datasets.c.owner_id == bindparam("owner_id")).order_by(datasets.c.created_at),
            "datasets_granted": select(*_DATASET_COLS)
            .join(dataset_permissions, dataset_permissions.c.dataset_id == datasets.c.id)
            .where(dataset_permissions.c.user_id == bindparam("user_id"), dataset_permissions.c.permission == bindparam("permission"))
            .order_by(datasets.c.created_at),
            "dataset_delete": delete(datasets).where(datasets.c.id == bindparam("id")),
            "dataset_data_delete": delete(data).where(data.c.dataset_id == bindparam("dataset_id")),
            "dataset_permissions_delete": delete(dataset_permissions).where(dataset_permissions.c.dataset_id == bindparam("dataset_id")),
            "dataset_runs_delete": delete(pipeline_runs).where(pipeline_runs.c.dataset_id == bindparam("dataset_id")),
            # granting a permission again changes nothing
            "permission_insert": insert(dataset_permissions).values(**binds("dataset_id", "user_id", "permission")).on_conflict_do_nothing(),
            "permissions_of": select(dataset_permissions.c.permission).where(
                dataset_permissions.c.dataset_id == bindparam("dataset_id"), dataset_permissions.c.user_id == bindparam("user_id")
            ),
        }

    async def get(self, owner_id: uuid.UUID, name: str) -> Dataset | None:
        """The owner's dataset called ``name``, or None."""
        row = await self._run(lambda db: db.first("dataset_by_name", owner_id=str(owner_id), name=name), write=False)
        return _dataset(row) if row else None

    async def by_id(self, dataset_id: uuid.UUID) -> Dataset | None:
        row = await self._run(lambda db: db.first("dataset_by_id", id=str(dataset_id)), write=False)
        return _dataset(row) if row else None

    async def create(self, owner_id: uuid.UUID, name: str) -> Dataset:
        """Create, or return the owner's existing dataset of that name."""

        def work(db: DB) -> Dataset:
            row = db.first("dataset_by_name", owner_id=str(owner_id), name=name)
            if row:
                return _dataset(row)
            row = (str(uuid.uuid4()), name, str(owner_id), self._now())
            db.run("dataset_insert", id=row[0], name=name, owner_id=row[2], created_at=row[3])
            return _dataset(row)

        try:
            return await self._run(work, write=True)
        except Exception as exc:  # another process created it first (PostgreSQL; SQLite serialises writers)
            if not is_integrity_error(exc):
                raise
            found = await self.get(owner_id, name)
            if found is None:
                raise
            return found

    async def of_owner(self, owner_id: uuid.UUID) -> list[Dataset]:
        """The owner's datasets, oldest first."""
        rows = await self._run(lambda db: db.rows("datasets_of_owner", owner_id=str(owner_id)), write=False)
        return [_dataset(row) for row in rows]

    async def granted(self, user_id: uuid.UUID, permission: str) -> list[Dataset]:
        """The datasets on which ``user_id`` was granted ``permission``, oldest first."""
        rows = await self._run(lambda db: db.rows("datasets_granted", user_id=str(user_id), permission=permission), write=False)
        return [_dataset(row) for row in rows]

    async def delete(self, dataset_id: uuid.UUID) -> None:
        """Remove the dataset row with its documents, permissions and pipeline runs (one transaction)."""
        ids = str(dataset_id)

        def work(db: DB) -> None:
            for name in _CASCADE:
                db.run(name, dataset_id=ids)
            db.run("dataset_delete", id=ids)

        await self._run(work, write=True)

    async def grant(self, dataset_id: uuid.UUID, user_id: uuid.UUID, permission: str) -> None:
        await self._run(
            lambda db: db.run("permission_insert", dataset_id=str(dataset_id), user_id=str(user_id), permission=permission), write=True
        )

    async def permissions(self, dataset_id: uuid.UUID, user_id: uuid.UUID) -> set[str]:
        """The permissions granted to ``user_id`` on the dataset (ownership is not one of them)."""
        rows = await self._run(lambda db: db.rows("permissions_of", dataset_id=str(dataset_id), user_id=str(user_id)), write=False)
        return {row[0] for row in rows}
