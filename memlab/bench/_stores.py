"""What one benchmark repeat drives: a memlab backend or a raw store, behind the same calls.

A :class:`Subject` appends one turn, reads a session's last 10 turns and (memlab
backends only) answers a keyword query; it holds a storage probe and cleans up
after itself. The raw stores are the ceilings the benchmark prints beside each
backend: the plainest client code that does the same work on the same store,
with the byte-identical JSON payloads and no memlab code in the loop.

``raw-sqlite``
    :mod:`sqlite3`, WAL + ``synchronous=NORMAL`` (memlab's pragmas), one
    ``INSERT`` per append in autocommit mode (its own transaction), index on
    ``(user_id, session_id, seq)``; the last 10 read by that index.
``raw-redis``
    ``redis.asyncio`` (memlab's backend is async, so is its ceiling), one awaited
    call at a time: ``RPUSH`` + ``EXPIRE`` per append sent as one pipeline
    (one round trip, no ``MULTI``), ``LRANGE key -10 -1`` per read. Keys
    ``bench_raw:{user}:{session}``, deleted at the end.
``raw-postgres``
    asyncpg on one connection: one ``INSERT`` per append, autocommitted (its own
    transaction, one round trip), ``SELECT payload ... ORDER BY seq DESC LIMIT
    10`` per read, on its own table ``bench_raw_qa_<random>`` with an index on
    ``(user_id, session_id, seq)``, dropped at the end.
``raw-diskcache``
    :class:`diskcache.Cache` with its default settings: one ``set`` per append
    (key ``{user}:{session}:{index}``), ten ``get`` calls per read; which keys
    are a session's last 10 is kept in a Python list (a ceiling: no index
    lookup at all).
"""

from __future__ import annotations

import abc
import sqlite3
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memlab.bench._usage import FileProbe, PostgresProbe, RedisProbe, asyncpg_dsn

__all__ = [
    "BackendSubject",
    "RAW_DISKCACHE",
    "RAW_POSTGRES",
    "RAW_REDIS",
    "RAW_SQLITE",
    "RawDiskcache",
    "RawPostgres",
    "RawRedis",
    "RawSQLite",
    "Subject",
]

RAW_SQLITE = "raw-sqlite"
RAW_REDIS = "raw-redis"
RAW_POSTGRES = "raw-postgres"
RAW_DISKCACHE = "raw-diskcache"

#: raw-redis keys: ``{RAW_REDIS_PREFIX}{user}:{session}``
RAW_REDIS_PREFIX = "bench_raw:"
#: raw-redis ``EXPIRE`` seconds (memlab's default session TTL)
RAW_TTL_SECONDS = 604800


class Subject(abc.ABC):
    """One store under test. ``probe`` (or None) measures its bytes; see :mod:`memlab.bench._usage`."""

    name: str = ""
    #: how ``probe`` counts bytes, for the report
    method: str = ""
    #: False: no keyword recall (the raw stores)
    has_recall: bool = False

    def __init__(self, user: str) -> None:
        self.user = user
        self.probe: Any = None

    async def open(self) -> None:
        """Connect / create what the run needs."""

    @abc.abstractmethod
    async def append(self, session: str, index: int, question: str, answer: str, payload: str) -> None:
        """Store one turn, committed before returning."""

    @abc.abstractmethod
    async def read_last_10(self, session: str) -> list:
        """The session's last 10 turns."""

    async def recall(self, session: str, query: str, top_k: int) -> int:
        """Keyword recall; only subjects with ``has_recall`` implement it."""
        raise TypeError(f"{type(self).__name__} has no keyword recall")

    async def cleanup(self, sessions: Iterable[str]) -> None:
        """Remove what the run wrote, where it would outlive the run (servers)."""

    async def close(self) -> None:
        """Disconnect (after :meth:`cleanup`); also releases the probe."""
        if self.probe is not None:
            await self.probe.close()


class BackendSubject(Subject):
    """A memlab :class:`~memlab.cache.CacheBackend`, called the way the session layer calls it."""

    has_recall = True

    def __init__(self, name: str, backend: Any, user: str, *, probe: Any, method: str, networked: bool) -> None:
        from memlab.session import SessionManager

        super().__init__(user)
        self.name = name
        self.backend = backend
        self.probe = probe
        self.method = method
        self.networked = networked
        self._manager = SessionManager(backend)

    async def open(self) -> None:
        await self.backend.open()

    async def append(self, session: str, index: int, question: str, answer: str, payload: str) -> None:
        await self.backend.create_qa_entry(self.user, session, question=question, answer=answer)

    async def read_last_10(self, session: str) -> list:
        return await self.backend.get_latest_qa_entries(self.user, session, 10)

    async def recall(self, session: str, query: str, top_k: int) -> int:
        return len(await self._manager.search(self.user, query, session_id=session, top_k=top_k))

    async def cleanup(self, sessions: Iterable[str]) -> None:
        if self.networked:  # a server outlives the run: leave it as we found it
            for session in sessions:
                await self.backend.delete_session(self.user, session)

    async def close(self) -> None:
        try:
            await self.backend.close()
        finally:
            await super().close()


class RawSQLite(Subject):
    """Plain :mod:`sqlite3` on ``directory/raw.db``."""

    name = RAW_SQLITE
    method = "files"
    _INSERT = "INSERT INTO qa (user_id, session_id, qa_id, payload, created_at) VALUES (?, ?, ?, ?, ?)"
    _LAST = "SELECT payload FROM qa WHERE user_id = ? AND session_id = ? ORDER BY seq DESC LIMIT 10"

    def __init__(self, directory: Path, user: str) -> None:
        super().__init__(user)
        self.path = Path(directory) / "raw.db"
        self.probe = FileProbe(self.path)
        self._conn: sqlite3.Connection | None = None

    async def open(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS qa (seq INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL, "
            "session_id TEXT NOT NULL, qa_id TEXT NOT NULL, payload TEXT NOT NULL, created_at REAL NOT NULL)"
        )
        conn.execute("CREATE INDEX IF NOT EXISTS ix_qa_session_seq ON qa (user_id, session_id, seq)")
        self._conn = conn

    async def append(self, session: str, index: int, question: str, answer: str, payload: str) -> None:
        self._conn.execute(self._INSERT, (self.user, session, str(index), payload, time.time()))

    async def read_last_10(self, session: str) -> list:
        rows = self._conn.execute(self._LAST, (self.user, session)).fetchall()
        rows.reverse()
        return rows

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()
        await super().close()


class RawRedis(Subject):
    """Plain ``redis.asyncio`` lists, one per session."""

    name = RAW_REDIS
    method = "MEMORY USAGE"

    def __init__(self, connection_kwargs: dict[str, Any], user: str) -> None:
        super().__init__(user)
        self._kwargs = connection_kwargs
        self._client: Any = None
        self.probe = RedisProbe(connection_kwargs, [f"{RAW_REDIS_PREFIX}{user}:*"])

    def key(self, session: str) -> str:
        return f"{RAW_REDIS_PREFIX}{self.user}:{session}"

    async def open(self) -> None:
        import redis.asyncio as aioredis

        self._client = aioredis.Redis(**self._kwargs)
        await self._client.ping()

    async def append(self, session: str, index: int, question: str, answer: str, payload: str) -> None:
        key = self.key(session)
        pipe = self._client.pipeline(transaction=False)
        pipe.rpush(key, payload)
        pipe.expire(key, RAW_TTL_SECONDS)
        await pipe.execute()

    async def read_last_10(self, session: str) -> list:
        return await self._client.lrange(self.key(session), -10, -1)

    async def cleanup(self, sessions: Iterable[str]) -> None:
        keys = [self.key(session) for session in sessions]
        for start in range(0, len(keys), 500):
            await self._client.delete(*keys[start : start + 500])

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
        await super().close()


class RawPostgres(Subject):
    """Plain asyncpg on its own table, dropped by :meth:`close`."""

    name = RAW_POSTGRES
    method = "pg_total_relation_size"

    def __init__(self, url: str, user: str) -> None:
        super().__init__(user)
        self.url = url
        self.table = f"bench_raw_qa_{uuid.uuid4().hex[:12]}"
        self.probe = PostgresProbe(url, [self.table])
        self._conn: Any = None
        self._insert = f"INSERT INTO {self.table} (user_id, session_id, qa_id, payload, created_at) VALUES ($1, $2, $3, $4, $5)"
        self._last = f"SELECT payload FROM {self.table} WHERE user_id = $1 AND session_id = $2 ORDER BY seq DESC LIMIT 10"

    async def open(self) -> None:
        import asyncpg

        self._conn = await asyncpg.connect(asyncpg_dsn(self.url), timeout=10)
        await self._conn.execute(
            f"CREATE TABLE {self.table} (seq bigserial PRIMARY KEY, user_id text NOT NULL, session_id text NOT NULL, "
            "qa_id text NOT NULL, payload text NOT NULL, created_at double precision NOT NULL)"
        )
        await self._conn.execute(f"CREATE INDEX ix_{self.table}_session_seq ON {self.table} (user_id, session_id, seq)")

    async def append(self, session: str, index: int, question: str, answer: str, payload: str) -> None:
        await self._conn.execute(self._insert, self.user, session, str(index), payload, time.time())

    async def read_last_10(self, session: str) -> list:
        rows = await self._conn.fetch(self._last, self.user, session)
        rows.reverse()
        return rows

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                await conn.execute(f"DROP TABLE IF EXISTS {self.table}")
            finally:
                await conn.close()
        await super().close()


class RawDiskcache(Subject):
    """Plain :class:`diskcache.Cache` (default settings) in ``directory``."""

    name = RAW_DISKCACHE
    method = "files"

    def __init__(self, directory: Path, user: str) -> None:
        super().__init__(user)
        self.path = Path(directory) / "raw-diskcache"
        self.probe = FileProbe(self.path)
        self._cache: Any = None
        self._keys: dict[str, list[str]] = {}

    async def open(self) -> None:
        import diskcache

        self._cache = diskcache.Cache(str(self.path))

    async def append(self, session: str, index: int, question: str, answer: str, payload: str) -> None:
        key = f"{self.user}:{session}:{index:012d}"
        self._cache.set(key, payload)
        self._keys.setdefault(session, []).append(key)

    async def read_last_10(self, session: str) -> list:
        get = self._cache.get
        return [get(key) for key in self._keys.get(session, [])[-10:]]

    async def close(self) -> None:
        if self._cache is not None:
            cache, self._cache = self._cache, None
            cache.close()
        await super().close()
