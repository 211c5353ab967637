"""Storage probes: how many bytes a store holds right now, measured the store's own way.

Each probe's :meth:`~_Probe.measure` returns a :class:`Usage`. The benchmark
takes one before the first append and more along the run and reports deltas,
so what was in the store before (another tenant's keys, another run's rows)
does not count. The redis probe counts only the run's own keys; the postgres
probe measures whole tables, so another writer active at the same time would
count too (run it on a server nobody else writes to, as ``make bench`` does).

=========  =====================================================================
files      SQLite files (``cache.db``, a diskcache directory): ``page_count *
           page_size`` read on a separate connection, which includes what still
           sits in the WAL, plus any other file in the directory (diskcache's
           value files); the physical ``db`` and ``-wal`` file sizes ride along.
redis      the sum of ``MEMORY USAGE key SAMPLES 0`` (exact for lists and
           hashes) over the keys matching the probe's patterns (``SCAN``).
postgres   the sum of ``pg_total_relation_size`` (heap, TOAST, indexes) of the
           probe's tables.
=========  =====================================================================
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncpg

__all__ = ["FileProbe", "PostgresProbe", "RedisProbe", "Usage", "asyncpg_dsn", "sqlite_logical_bytes"]


@dataclass(frozen=True)
class Usage:
    """Bytes held by a store; ``db_bytes`` / ``wal_bytes`` are physical file sizes (file stores only)."""

    bytes: int
    db_bytes: int | None = None
    wal_bytes: int | None = None


def sqlite_logical_bytes(path: Path) -> int:
    """``page_count * page_size`` of a SQLite database, committed WAL content included."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        page_count = conn.execute("PRAGMA page_count").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return int(page_count) * int(page_size)


class FileProbe:
    """A SQLite file (``cache.db``) or a directory holding one (diskcache's ``cache.db``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _database(self) -> Path | None:
        if self.path.is_dir():
            db = self.path / "cache.db"
            return db if db.is_file() else None
        return self.path if self.path.is_file() else None

    async def measure(self) -> Usage:
        db = self._database()
        others = 0
        if self.path.is_dir():  # value files beside the database (diskcache writes big values to files)
            skip = set() if db is None else {db.name, f"{db.name}-wal", f"{db.name}-shm"}
            others = sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file() and p.name not in skip)
        if db is None:
            return Usage(others, others, 0)
        wal = Path(f"{db}-wal")
        return Usage(
            sqlite_logical_bytes(db) + others,
            db_bytes=db.stat().st_size + others,
            wal_bytes=wal.stat().st_size if wal.exists() else 0,
        )

    async def close(self) -> None:
        pass


class RedisProbe:
    """``MEMORY USAGE`` summed over the keys matching ``patterns`` (glob, as ``SCAN MATCH``)."""

    def __init__(self, connection_kwargs: dict[str, Any], patterns: Sequence[str]) -> None:
        import redis.asyncio as aioredis

        self.patterns = tuple(patterns)
        self._client = aioredis.Redis(**connection_kwargs)

    async def keys(self) -> list[str]:
        found: list[str] = []
        for pattern in self.patterns:
            found.extend([key async for key in self._client.scan_iter(match=pattern, count=1000)])
        return found

    async def measure(self) -> Usage:
        total = 0
        for key in await self.keys():
            total += await self._client.memory_usage(key, samples=0) or 0  # the key may have just expired
        return Usage(total)

    async def close(self) -> None:
        await self._client.aclose()


def asyncpg_dsn(url: str) -> str:
    """A SQLAlchemy ``postgresql[+asyncpg]://`` URL as a DSN asyncpg accepts."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class PostgresProbe:
    """``pg_total_relation_size`` summed over ``tables`` (missing tables count 0)."""

    _SQL = "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0)::bigint FROM unnest($1::text[]) AS t"

    def __init__(self, url: str, tables: Sequence[str]) -> None:
        self.url = url
        self.tables = list(tables)
        self._conn: asyncpg.Connection | None = None

    async def measure(self) -> Usage:
        conn = self._conn
        if conn is None:
            import asyncpg

            conn = self._conn = await asyncpg.connect(asyncpg_dsn(self.url), timeout=10)
        return Usage(int(await conn.fetchval(self._SQL, self.tables)))

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()
