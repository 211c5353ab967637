"""``store.data``: the ``data`` table, a dataset's documents with their text (so a dataset can be re-cognified).

A document is keyed by its content hash within its dataset: adding one the dataset
holds already is skipped, also when two writers race on PostgreSQL.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from typing import cast

from sqlalchemy import bindparam, delete, func, select
from sqlalchemy.sql import ClauseElement

from memlab._sqlrun import DB
from memlab.metadata_tables import data
from memlab.models import DataRecord
from memlab.relational._base import Insert, Repository, binds, when

#: one document to store: ``(data_id, name, source, extension, content_hash, size_bytes, text)``
NewData = tuple[uuid.UUID, str, "str | None", str, str, int, str]

#: content hashes per ``data_by_hashes`` query (statements are compiled once, so the IN list has a fixed size)
_HASH_CHUNK = 100
_DATA_COLS = (
    data.c.id,
    data.c.dataset_id,
    data.c.name,
    data.c.source,
    data.c.extension,
    data.c.content_hash,
    data.c.size_bytes,
    data.c.tags,
    data.c.created_at,
)


def _data(row) -> DataRecord:
    return DataRecord(
        id=uuid.UUID(row[0]),
        dataset_id=uuid.UUID(row[1]),
        name=row[2],
        source=row[3],
        extension=row[4],
        content_hash=row[5],
        size_bytes=row[6],
        tags=json.loads(row[7]),
        created_at=when(row[8]),
    )


class DataRepository(Repository):
    """The documents of each dataset."""

    @staticmethod
    def statements(insert: Insert) -> dict[str, ClauseElement]:
        in_dataset = data.c.dataset_id == bindparam("dataset_id")
        columns = ("id", "dataset_id", "name", "source", "extension", "content_hash", "size_bytes", "tags", "text", "created_at")
        return {
            "data_insert": insert(data).values(**binds(*columns)).on_conflict_do_nothing(),
            "data_by_hash": select(data.c.id).where(in_dataset, data.c.content_hash == bindparam("content_hash")),
            "data_by_hashes": select(data.c.content_hash, data.c.id).where(
                in_dataset, data.c.content_hash.in_([bindparam(f"h{i}") for i in range(_HASH_CHUNK)])
            ),
            "data_by_id": select(*_DATA_COLS).where(in_dataset, data.c.id == bindparam("id")),
            "data_of_dataset": select(*_DATA_COLS).where(in_dataset).order_by(data.c.created_at, data.c.id),
            "data_count": select(func.count()).select_from(data).where(in_dataset),
            "data_delete": delete(data).where(in_dataset, data.c.id == bindparam("id")),
        }

    async def add(self, dataset_id: uuid.UUID, items: Sequence[NewData], tags: Iterable[str] = ()) -> None:
        """Store the documents whose content hash the dataset lacks, all in one transaction."""
        ids, tag_text, created = str(dataset_id), json.dumps(sorted(set(tags))), self._now()

        def work(db: DB) -> None:
            for data_id, name, source, extension, content_hash, size, text in items:
                if db.first("data_by_hash", dataset_id=ids, content_hash=content_hash) is None:
                    db.run(
                        "data_insert",
                        id=str(data_id),
                        dataset_id=ids,
                        name=name,
                        source=source,
                        extension=extension,
                        content_hash=content_hash,
                        size_bytes=size,
                        tags=tag_text,
                        text=text,
                        created_at=created,
                    )

        await self._run(work, write=True)

    async def known_hashes(self, dataset_id: uuid.UUID, hashes: Iterable[str]) -> dict[str, str]:
        """``content hash -> data id`` for the given hashes already stored in the dataset (one read)."""
        ids, wanted = str(dataset_id), list(dict.fromkeys(hashes))

        def work(db: DB) -> dict[str, str]:
            found: dict[str, str] = {}
            for start in range(0, len(wanted), _HASH_CHUNK):
                chunk = wanted[start : start + _HASH_CHUNK]
                padded = chunk + chunk[-1:] * (_HASH_CHUNK - len(chunk))
                found.update(db.rows("data_by_hashes", dataset_id=ids, **{f"h{i}": value for i, value in enumerate(padded)}))
            return found

        return await self._run(work, write=False)

    async def count(self, dataset_id: uuid.UUID) -> int:
        # a COUNT query always returns exactly one row
        row = cast(tuple, await self._run(lambda db: db.first("data_count", dataset_id=str(dataset_id)), write=False))
        return row[0]

    async def get(self, dataset_id: uuid.UUID, data_id: uuid.UUID) -> DataRecord | None:
        row = await self._run(lambda db: db.first("data_by_id", dataset_id=str(dataset_id), id=str(data_id)), write=False)
        return _data(row) if row else None

    async def of_dataset(self, dataset_id: uuid.UUID) -> list[DataRecord]:
        """The dataset's documents, oldest first."""
        rows = await self._run(lambda db: db.rows("data_of_dataset", dataset_id=str(dataset_id)), write=False)
        return [_data(row) for row in rows]

    async def delete(self, dataset_id: uuid.UUID, data_ids: Iterable[uuid.UUID]) -> None:
        """Remove those documents of the dataset (one transaction); an unknown id is no error."""
        ids = [str(data_id) for data_id in data_ids]

        def work(db: DB) -> None:
            for data_id in ids:
                db.run("data_delete", dataset_id=str(dataset_id), id=data_id)

        await self._run(work, write=True)
