"""Where permanent memory keeps each dataset's snapshots: local files, or PostgreSQL shared by every machine.

:class:`FileSnapshots` (the default) is the directory layout of :mod:`memlab.graph._snapshot`
under ``{data_root}/graph``, with an ``fcntl`` lock per dataset serialising writers of one
machine. :class:`PostgresSnapshots` (``MEMLAB_DB_URL=postgresql+asyncpg://...``) keeps the
same files as rows of ``graph_snapshot_files``, one version per save, the committed version
and its token in ``graph_snapshots``:

* a **save** runs in one transaction under ``pg_advisory_xact_lock`` on the dataset: it
  checks that the committed token is still the one the writer started from (else
  :class:`SnapshotConflict`: the caller reloads and applies its change again), inserts the
  new version's files, moves the head, and deletes the older versions;
* a **reader** compares the committed token (one indexed read) with the one it loaded and
  reloads on a change, so a ``remember()`` or ``forget()`` on one machine is what the next
  ``recall()`` on another sees.

Tokens are fresh UUIDs (file store: the pointer's version, inode and mtime), so a dataset
deleted and rebuilt never repeats one.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import fcntl
import os
import uuid
from collections.abc import AsyncIterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import BigInteger, bindparam, delete, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from memlab._sqlrun import DB, PostgresRunner, advisory_key, is_connection_error, resolve_url
from memlab.exceptions import BackendError, MemlabError, SnapshotConflict
from memlab.graph._graph import KnowledgeGraph
from memlab.graph._snapshot import delete_snapshot, load_snapshot, save_snapshot, snapshot_files, snapshot_from_files
from memlab.graph._vectors import VectorStore
from memlab.metadata_tables import graph_snapshot_files, graph_snapshots

__all__ = ["FileSnapshots", "PostgresSnapshots", "SnapshotStore"]

Snapshot = tuple[KnowledgeGraph, VectorStore, dict[str, Any]]


class SnapshotStore(abc.ABC):
    """The committed snapshot of each dataset: its token, load, save (against an expected token), delete."""

    #: where the snapshots are, for messages
    where: str

    async def close(self) -> None:
        """Release connections (a no-op for files)."""

    @abc.abstractmethod
    async def token(self, dataset_id: uuid.UUID) -> str | None:
        """The committed version's token (None: no snapshot); a new one after every save."""

    @abc.abstractmethod
    async def load(self, dataset_id: uuid.UUID) -> tuple[str, Snapshot] | None:
        """``(token, (graph, vectors, meta))`` of the committed version, or None."""

    @abc.abstractmethod
    async def save(self, dataset_id: uuid.UUID, graph: KnowledgeGraph, vectors: VectorStore, meta: Mapping[str, Any], *, expected: str | None) -> str:
        """Commit a new version; returns its token. :class:`SnapshotConflict` when the committed token is not ``expected``."""

    @abc.abstractmethod
    async def delete(self, dataset_id: uuid.UUID) -> bool:
        """Remove every version of the dataset; True when there was one."""

    @abc.abstractmethod
    def writer(self, dataset_id: uuid.UUID) -> contextlib.AbstractAsyncContextManager[None]:
        """Held around a load-change-save of one dataset (files: the cross-process lock; PostgreSQL: nothing, saves check tokens)."""


class FileSnapshots(SnapshotStore):
    """Snapshots under ``root/{dataset_id}/`` (see :mod:`memlab.graph._snapshot`), writers serialised by ``root/{dataset_id}.lock``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.where = str(self.root)

    def _dir(self, dataset_id: uuid.UUID) -> Path:
        return self.root / str(dataset_id)

    def _pointer_token(self, dataset_id: uuid.UUID) -> str | None:
        pointer = self._dir(dataset_id) / "CURRENT"
        try:
            with open(pointer, "rb") as handle:
                stat = os.fstat(handle.fileno())
                return f"{handle.read().decode('ascii', 'replace').strip()}:{stat.st_ino}:{stat.st_mtime_ns}"
        except FileNotFoundError:
            return None

    async def token(self, dataset_id: uuid.UUID) -> str | None:
        return self._pointer_token(dataset_id)

    async def load(self, dataset_id: uuid.UUID) -> tuple[str, Snapshot] | None:
        token = self._pointer_token(dataset_id)
        if token is None:
            return None
        snapshot = await asyncio.to_thread(load_snapshot, self._dir(dataset_id))
        return None if snapshot is None else (token, snapshot)

    async def save(self, dataset_id: uuid.UUID, graph: KnowledgeGraph, vectors: VectorStore, meta: Mapping[str, Any], *, expected: str | None) -> str:
        # the writer lock is held: nobody else can have committed since the load
        await asyncio.to_thread(save_snapshot, self._dir(dataset_id), graph, vectors, meta)
        token = self._pointer_token(dataset_id)
        assert token is not None  # just committed
        return token

    async def delete(self, dataset_id: uuid.UUID) -> bool:
        return await asyncio.to_thread(delete_snapshot, self._dir(dataset_id))

    @contextlib.asynccontextmanager
    async def writer(self, dataset_id: uuid.UUID) -> AsyncIterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        handle = open(self.root / f"{dataset_id}.lock", "a+b")
        try:
            await asyncio.to_thread(fcntl.flock, handle.fileno(), fcntl.LOCK_EX)
            yield
        finally:
            handle.close()  # releases the flock


_head, _files = graph_snapshots, graph_snapshot_files


def _head_upsert() -> Any:
    row = pg_insert(_head).values(
        dataset_id=bindparam("dataset_id"), version=bindparam("version"), token=bindparam("token"), updated_at=bindparam("now")
    )
    return row.on_conflict_do_update(
        index_elements=[_head.c.dataset_id],
        set_={"version": row.excluded.version, "token": row.excluded.token, "updated_at": row.excluded.updated_at},
    )


_STATEMENTS = {
    "lock": select(func.pg_advisory_xact_lock(bindparam("key", type_=BigInteger))),
    "head": select(_head.c.version, _head.c.token).where(_head.c.dataset_id == bindparam("dataset_id")),
    "files": select(_files.c.name, _files.c.data).where(_files.c.dataset_id == bindparam("dataset_id"), _files.c.version == bindparam("version")),
    "file_insert": _files.insert().values(
        dataset_id=bindparam("dataset_id"), version=bindparam("version"), name=bindparam("name"), data=bindparam("data")
    ),
    "head_upsert": _head_upsert(),
    "older_files_delete": delete(_files).where(_files.c.dataset_id == bindparam("dataset_id"), _files.c.version < bindparam("version")),
    "files_delete": delete(_files).where(_files.c.dataset_id == bindparam("dataset_id")),
    "head_delete": delete(_head).where(_head.c.dataset_id == bindparam("dataset_id")),
}


class PostgresSnapshots(SnapshotStore):
    """Snapshots as rows of the metadata database at ``url`` (``MEMLAB_DB_URL``), shared by every stack pointed at it.

    The tables come with the metadata migrations (opened by the stack first). A database
    that cannot be reached raises :class:`~memlab.exceptions.BackendError`; the next call
    reconnects.
    """

    def __init__(self, url: str, *, pool_size: int = 2) -> None:
        self.url = url
        self.where = resolve_url(url)[1].render_as_string(hide_password=True)
        self._runner = PostgresRunner(url, _STATEMENTS, pool_size=pool_size)
        self._opened = False
        self._opening = asyncio.Lock()

    async def close(self) -> None:
        if self._opened:
            self._opened = False
            await self._runner.close()

    async def _run(self, fn: Any, *, write: bool) -> Any:
        try:
            if not self._opened:
                async with self._opening:
                    if not self._opened:
                        await self._runner.open()
                        self._opened = True
            return await self._runner.run(fn, write=write)
        except MemlabError:
            raise
        except Exception as exc:
            if is_connection_error(exc) or not self._opened:
                raise BackendError(f"permanent memory in {self.where}: {type(exc).__name__}: {exc}") from exc
            raise

    async def token(self, dataset_id: uuid.UUID) -> str | None:
        row = await self._run(lambda db: db.first("head", dataset_id=str(dataset_id)), write=False)
        return None if row is None else row[1]

    async def load(self, dataset_id: uuid.UUID) -> tuple[str, Snapshot] | None:
        def work(db: DB) -> tuple[str, dict[str, bytes]] | None:
            row = db.first("head", dataset_id=str(dataset_id))
            if row is None:
                return None
            version, token = row
            return token, {name: bytes(data) for name, data in db.rows("files", dataset_id=str(dataset_id), version=version)}

        found = await self._run(work, write=False)  # one snapshot: head and files read together
        if found is None:
            return None
        token, files = found
        where = f"{self.where} dataset {dataset_id} version {token}"

        def read(name: str) -> bytes:
            if name not in files:
                raise BackendError(f"graph snapshot {where} has no file {name}")
            return files[name]

        return token, await asyncio.to_thread(snapshot_from_files, read, where)

    async def save(self, dataset_id: uuid.UUID, graph: KnowledgeGraph, vectors: VectorStore, meta: Mapping[str, Any], *, expected: str | None) -> str:
        files = {name: bytes(data) for name, data in (await asyncio.to_thread(snapshot_files, graph, vectors, meta)).items()}
        token = str(uuid.uuid4())
        ids = str(dataset_id)

        def work(db: DB) -> None:
            db.first("lock", key=advisory_key(f"memlab.graph:{ids}"))
            row = db.first("head", dataset_id=ids)
            if (row[1] if row else None) != expected:
                raise SnapshotConflict(f"dataset {ids} changed since it was loaded (another writer committed)")
            version = (row[0] if row else 0) + 1
            for name, data in files.items():
                db.run("file_insert", dataset_id=ids, version=version, name=name, data=data)
            db.run("head_upsert", dataset_id=ids, version=version, token=token, now=datetime.now(timezone.utc).isoformat())
            db.run("older_files_delete", dataset_id=ids, version=version)

        await self._run(work, write=True)
        return token

    async def delete(self, dataset_id: uuid.UUID) -> bool:
        ids = str(dataset_id)

        def work(db: DB) -> bool:
            db.first("lock", key=advisory_key(f"memlab.graph:{ids}"))
            db.run("files_delete", dataset_id=ids)
            return db.run("head_delete", dataset_id=ids) > 0

        return await self._run(work, write=True)

    @contextlib.asynccontextmanager
    async def writer(self, dataset_id: uuid.UUID) -> AsyncIterator[None]:
        yield  # saves check the committed token under an advisory lock instead
