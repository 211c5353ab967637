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
    ``(user_id, session_id, seq)``, dropped at the end. None of the cache
    contract's work (no TTL state, no ordering lock, no unique ``qa_id``): the
    gap between a backend and this ceiling is what the contract costs.
``raw-postgres-equal-work``
    asyncpg on one connection, hand-written SQL text doing the work memlab's
    contract needs on memlab's table layout in a schema of its own: per append
    the session state row's liveness check and ``FOR NO KEY UPDATE`` ordering
    lock and the insert under the unique ``(user_id, session_id, qa_id)``, in one
    autocommitted statement; per read the liveness check and ``ORDER BY seq DESC
    LIMIT 10``. See :class:`RawPostgresEqualWork`.
``raw-diskcache``
    :class:`diskcache.Cache` with its default settings: one ``set`` per append
    (key ``{user}:{session}:{index}``), ten ``get`` calls per read; which keys
    are a session's last 10 is kept in a Python list (a ceiling: no index
    lookup at all).
"""

from __future__ import annotations

import abc
import secrets
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
    "RAW_POSTGRES_EQUAL_WORK",
    "RAW_REDIS",
    "RAW_SQLITE",
    "RawDiskcache",
    "RawPostgres",
    "RawPostgresEqualWork",
    "RawRedis",
    "RawSQLite",
    "Subject",
]

RAW_SQLITE = "raw-sqlite"
RAW_REDIS = "raw-redis"
RAW_POSTGRES = "raw-postgres"
RAW_POSTGRES_EQUAL_WORK = "raw-postgres-equal-work"
RAW_DISKCACHE = "raw-diskcache"

#: raw-redis keys: ``{RAW_REDIS_PREFIX}{user}:{session}``
RAW_REDIS_PREFIX = "bench_raw:"
#: raw-redis ``EXPIRE`` seconds (memlab's default session TTL)
RAW_TTL_SECONDS = 604800
#: raw-postgres-equal-work re-stamps a session's expiry once it lags by more than this share of
#: the TTL (memlab's SQL default, ``lazy_slack`` with slack 0.05)
RAW_TTL_SLACK = 0.05


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

    def _opened(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"{self.name} store at {self.path} is not open")
        return self._conn

    async def append(self, session: str, index: int, question: str, answer: str, payload: str) -> None:
        self._opened().execute(self._INSERT, (self.user, session, str(index), payload, time.time()))

    async def read_last_10(self, session: str) -> list:
        rows = self._opened().execute(self._LAST, (self.user, session)).fetchall()
        rows.reverse()
        return rows

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()
        await super().close()


class RawRedis(Subject):
    """Plain ``redis.asyncio`` lists, one per session, on the same client the backend uses.

    The client is built as :class:`~memlab.cache.RedisCache` builds its own
    (:func:`memlab.cache.redis_client`: the same connection settings on a blocking
    pool), so the ceiling differs from the backend only in the commands it sends.
    """

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
        from memlab.cache import redis_client

        self._client = redis_client(self._kwargs)
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


def _qa_id(payload: str) -> str:
    """The ``qa_id`` inside a turn's JSON payload (a UUID4, as memlab draws one per append)."""
    at = payload.find('"qa_id":"')
    if at < 0:
        return str(uuid.uuid4())
    start = at + 9
    return payload[start : payload.index('"', start)]


class RawPostgresEqualWork(Subject):
    """Hand-written SQL on a bare asyncpg connection doing the work memlab's cache contract needs.

    The ceiling memlab's ``postgres`` backend is judged against: what a
    competent hand-written client must send for the same guarantees, with no
    SQLAlchemy and no memlab code (only asyncpg and SQL text here).

    **Tables.** Memlab's QA tables, column for column and index for index
    (``memlab.cache.SQL_SCHEMA``, the cache tables at the newest migration), in a schema of
    their own (``bench_eq_<random>``, dropped with ``CASCADE`` by :meth:`close`),
    so memlab's tables are never touched: ``cache_qa_entries`` (``seq bigserial``
    primary key, ``varchar(255)`` ids, ``text`` payload, ``double precision``
    ``created_at``, ``UNIQUE (user_id, session_id, qa_id)``, index ``(user_id,
    session_id, seq)``) and ``cache_session_state`` (primary key ``(user_id,
    session_id, kind)``, ``double precision`` ``expires_at``, ``bigint``
    ``epoch``, index on ``expires_at``).

    **Rows.** The byte-identical JSON payloads memlab stores, with the payload's
    own ``qa_id`` (a random UUID4 string, as memlab draws per append, so the
    unique index grows at random positions as memlab's does) and ``time.time()``
    as ``created_at``. One state row per session, ``kind = 'qa'``, a random
    62-bit ``epoch`` (as memlab draws) and a real expiry: ``now + RAW_TTL_SECONDS`` (7 days).

    **Append** (one autocommitted statement, one round trip, as memlab's
    PostgreSQL fast path)::

        WITH live AS (SELECT 1 FROM state WHERE user_id = $1 AND session_id = $2 AND kind = 'qa'
                      AND expires_at > $5 AND expires_at >= $6 FOR NO KEY UPDATE)
        INSERT INTO qa (user_id, session_id, qa_id, payload, created_at) SELECT $1, $2, $3, $4, $5 FROM live

    ``expires_at > now`` is the liveness check; ``expires_at >= cutoff`` (``cutoff =
    now + (1 - RAW_TTL_SLACK)·TTL``) says no re-stamp is due under memlab's SQL
    default policy (``lazy_slack``, slack 0.05); ``FOR NO KEY UPDATE`` is the
    per-session ordering lock taken the way memlab takes it (in the CTE, before
    ``seq`` is drawn), and the insert is checked by the unique ``qa_id`` index.
    When it inserts nothing (the state row is missing, dead or due a re-stamp:
    once per session here) the same transaction memlab's general path runs
    follows: create the state row if missing, lock it ``FOR UPDATE``, purge the
    session's rows when it is dead, insert, stamp the expiry.

    **Read last 10** (one autocommitted statement)::

        SELECT payload FROM qa WHERE user_id = $1 AND session_id = $2
          AND EXISTS (SELECT 1 FROM state WHERE user_id = $1 AND session_id = $2 AND kind = 'qa'
                      AND (expires_at IS NULL OR expires_at > $3))
        ORDER BY seq DESC LIMIT 10

    **Differences from memlab** (each one either leaves the database work as it
    is or is work memlab's contract does not need here):

    * Plain equality predicates. memlab adds ``user_id BETWEEN $1 AND $1`` to each
      session predicate and orders by the whole index key, so that PostgreSQL's
      generic plan stays on the session index when statistics are skewed (one
      session or user holding most rows: there the plain form's generic plan walks
      the ``seq`` primary key and a small session's read takes milliseconds). On
      this benchmark's even table both forms get the same plans (the state row by
      its primary key, the last 10 by a backward scan of ``(user_id, session_id,
      seq)``), touching the same buffers; the extra range qual costs the server a
      few µs per read.
    * The kind, ``LIMIT 10`` and the TTL policy are literals or fixed (memlab
      binds them, and computes the policy's cutoff per call).
    * The read returns asyncpg records; memlab parses them into
      ``SessionQAEntry`` objects (memlab's cost, not the database's).
    * No ``cache_session_context`` table (the QA workload never touches it) and
      no expiry sweep (memlab sweeps after the first write of each instance, then
      every 15 minutes: one call per repeat).
    * The once-per-session general path is leaner (memlab locks, creates and
      re-locks the state row, then stamps it in a second update).
    """

    name = RAW_POSTGRES_EQUAL_WORK
    method = "pg_total_relation_size"
    #: session settings of the connection: the ones memlab's cache connections use
    #: (``memlab.cache._sql.PG_SESSION_SETTINGS``), written out, so both plan alike
    SERVER_SETTINGS = {"enable_seqscan": "off", "plan_cache_mode": "force_generic_plan"}

    def __init__(self, url: str, user: str, *, server_settings: dict[str, str] | None = None) -> None:
        super().__init__(user)
        self.url = url
        self.schema = f"bench_eq_{uuid.uuid4().hex[:12]}"
        self.server_settings = dict(self.SERVER_SETTINGS if server_settings is None else server_settings)
        qa, state = f"{self.schema}.cache_qa_entries", f"{self.schema}.cache_session_state"
        self.tables = (qa, state)
        self.probe = PostgresProbe(url, list(self.tables))
        self._conn: Any = None
        self._ttl = float(RAW_TTL_SECONDS)
        self._keep = (1.0 - RAW_TTL_SLACK) * self._ttl  # a write at `now` re-stamps an expiry before now + _keep
        self._ddl = (
            f"CREATE SCHEMA {self.schema}",
            f"CREATE TABLE {qa} (seq bigserial PRIMARY KEY, user_id varchar(255) NOT NULL, session_id varchar(255) NOT NULL, "
            "qa_id varchar(255) NOT NULL, payload text NOT NULL, created_at double precision NOT NULL, "
            "CONSTRAINT uq_cache_qa_entries_qa UNIQUE (user_id, session_id, qa_id))",
            f"CREATE INDEX ix_cache_qa_entries_session_seq ON {qa} (user_id, session_id, seq)",
            f"CREATE TABLE {state} (user_id varchar(255) NOT NULL, session_id varchar(255) NOT NULL, kind varchar(16) NOT NULL, "
            "expires_at double precision, epoch bigint NOT NULL, PRIMARY KEY (user_id, session_id, kind))",
            f"CREATE INDEX ix_cache_session_state_expiry ON {state} (expires_at)",
        )
        mine = "user_id = $1 AND session_id = $2 AND kind = 'qa'"
        self._append = (
            f"WITH live AS (SELECT 1 FROM {state} WHERE {mine} AND expires_at > $5 AND expires_at >= $6 FOR NO KEY UPDATE) "
            f"INSERT INTO {qa} (user_id, session_id, qa_id, payload, created_at) SELECT $1, $2, $3, $4, $5 FROM live"
        )
        self._last = (
            f"SELECT payload FROM {qa} WHERE user_id = $1 AND session_id = $2 "
            f"AND EXISTS (SELECT 1 FROM {state} WHERE {mine} AND (expires_at IS NULL OR expires_at > $3)) "
            "ORDER BY seq DESC LIMIT 10"
        )
        # the general path: a missing, dead or lagging state row
        self._state_create = (
            f"INSERT INTO {state} (user_id, session_id, kind, expires_at, epoch) VALUES ($1, $2, 'qa', NULL, $3) ON CONFLICT DO NOTHING"
        )
        self._state_lock = f"SELECT expires_at FROM {state} WHERE {mine} FOR UPDATE"
        self._purge = f"DELETE FROM {qa} WHERE user_id = $1 AND session_id = $2"
        self._insert = f"INSERT INTO {qa} (user_id, session_id, qa_id, payload, created_at) VALUES ($1, $2, $3, $4, $5)"
        self._stamp = f"UPDATE {state} SET expires_at = $3, epoch = coalesce($4, epoch) WHERE {mine}"
        self._forget = (
            f"DELETE FROM {qa} WHERE user_id = $1 AND session_id = ANY($2::varchar[])",
            f"DELETE FROM {state} WHERE user_id = $1 AND session_id = ANY($2::varchar[])",
        )

    async def open(self) -> None:
        import asyncpg

        self._conn = await asyncpg.connect(asyncpg_dsn(self.url), timeout=10, server_settings=self.server_settings)
        async with self._conn.transaction():
            for statement in self._ddl:
                await self._conn.execute(statement)

    async def append(self, session: str, index: int, question: str, answer: str, payload: str) -> None:
        now = time.time()
        qa_id = _qa_id(payload)
        status = await self._conn.execute(self._append, self.user, session, qa_id, payload, now, now + self._keep)
        if status == "INSERT 0 0":
            await self._append_slow(session, qa_id, payload, now)

    async def _append_slow(self, session: str, qa_id: str, payload: str, now: float) -> None:
        conn, user = self._conn, self.user
        async with conn.transaction():
            await conn.execute(self._state_create, user, session, secrets.randbits(62))
            expires_at = await conn.fetchval(self._state_lock, user, session)
            epoch = None
            if expires_at is not None and expires_at <= now:  # dead: scoped purge, a fresh epoch
                await conn.execute(self._purge, user, session)
                expires_at, epoch = None, secrets.randbits(62)
            await conn.execute(self._insert, user, session, qa_id, payload, now)
            if expires_at is None or expires_at < now + self._keep:  # missing, purged or lagging
                await conn.execute(self._stamp, user, session, now + self._ttl, epoch)

    async def read_last_10(self, session: str) -> list:
        rows = await self._conn.fetch(self._last, self.user, session, time.time())
        rows.reverse()
        return rows

    async def cleanup(self, sessions: Iterable[str]) -> None:
        names = list(sessions)
        for statement in self._forget:
            await self._conn.execute(statement, self.user, names)

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                await conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
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
