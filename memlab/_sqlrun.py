"""Run SQL work in one transaction, the fastest way each dialect allows.

Statements are defined once with SQLAlchemy Core (so SQLite and PostgreSQL share
them and Alembic can migrate the tables), compiled once per dialect by
:class:`CompiledStatements`, and executed on the DBAPI cursor. Work is a plain
function ``fn(db) -> result`` that receives a :class:`DB`; a runner decides where
it executes:

* :class:`SQLiteRunner` runs it inline on the event-loop thread with
  ``busy_timeout=0``. Measured on the 2-core machine: a thread hop costs ~0.3 ms,
  SQLAlchemy's per-statement execution ~0.08-0.12 ms, and a whole local SQLite
  transaction on the DBAPI ~0.03 ms, so the uncontended path takes neither.
  When another connection holds the write lock (``database is locked``) nothing
  has been written yet (writes open with ``BEGIN IMMEDIATE``), and the work is
  re-run off the loop through SQLAlchemy's aiosqlite engine with a 30 s busy
  timeout, so a waiting writer never blocks the loop. Long jobs (sweeps) take
  that path directly.
* :class:`PostgresRunner` keeps a few SQLAlchemy ``AsyncConnection`` objects
  on asyncpg checked out (a pool checkout + checkin per call measured ~0.15 ms,
  half a loopback round trip) and runs ``fn`` with ``await conn.run_sync(...)`` on the
  DBAPI-level connection: asyncpg's adapter opens the transaction itself on the
  first statement, and the runner ends it with the adapter's ``commit()`` /
  ``rollback()``. Writes run in READ COMMITTED with explicit row locks; reads in
  REPEATABLE READ READ ONLY so a multi-statement read sees one snapshot. A
  deadlock or serialization failure re-runs the whole transaction up to
  :data:`PG_RETRIES` times (backoff ``0.05 * 2**attempt`` s). Work that is one
  statement goes through :meth:`PostgresRunner.execute`: one round trip on the
  driver connection, no BEGIN/COMMIT (a single statement is its own transaction).
  ``server_settings`` set session parameters on each of its connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import operator
import random
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy.engine import URL, make_url
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from memlab.exceptions import ConfigError

T = TypeVar("T")

BUSY_TIMEOUT_MS = 30_000

#: PostgreSQL: re-runs of a transaction after a deadlock / serialization failure
PG_RETRIES = 3
#: PostgreSQL: first backoff in seconds; attempt ``n`` waits ``PG_BACKOFF * 2**n``
PG_BACKOFF = 0.05
#: SQLSTATEs worth re-running the whole transaction for
_RETRY_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure


def resolve_url(url: str | URL) -> tuple[str, URL]:
    """``(dialect, async URL)`` for a cache/migration URL.

    ``sqlite``/``sqlite+aiosqlite`` -> ``("sqlite", sqlite+aiosqlite://...)``;
    ``postgresql``, ``postgres`` and ``postgresql+asyncpg`` -> ``("postgresql",
    postgresql+asyncpg://...)``. Anything else raises :class:`ConfigError`
    (the password is never shown).
    """
    parsed = make_url(url) if isinstance(url, str) else url
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "sqlite" and driver in ("", "aiosqlite", "pysqlite"):
        return "sqlite", parsed.set(drivername="sqlite+aiosqlite")
    if backend in ("postgresql", "postgres") and driver in ("", "asyncpg"):
        return "postgresql", parsed.set(drivername="postgresql+asyncpg")
    raise ConfigError(
        f"unsupported database URL {parsed.render_as_string(hide_password=True)!r}: "
        "use sqlite:///path or postgresql+asyncpg://user:password@host:port/db"
    )


def advisory_key(name: str) -> int:
    """A stable signed 64-bit PostgreSQL advisory-lock key: the first 8 bytes of sha256(name)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class CompiledStatements:
    """Named Core statements compiled for one dialect: ``(sql, parameter order, defaults)``."""

    def __init__(self, dialect: Any, statements: dict[str, ClauseElement]) -> None:
        self._compiled: dict[str, tuple[str, Callable[[dict[str, Any]], tuple[Any, ...]], dict[str, Any]]] = {}
        for name, statement in statements.items():
            compiled = cast(SQLCompiler, statement.compile(dialect=dialect))
            defaults = {key: value for key, value in compiled.params.items() if not compiled.binds[key].required}
            self._compiled[name] = (compiled.string, _picker(tuple(compiled.positiontup or ())), defaults)

    def bind(self, name: str, params: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
        """``(sql, positional arguments)``; a parameter missing from ``params`` and the defaults raises ``KeyError``."""
        sql, pick, defaults = self._compiled[name]
        return sql, pick({**defaults, **params} if defaults else params)


def _picker(order: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """The values of ``order``'s keys as a tuple, in that order (``operator.itemgetter``, which returns a bare value for one key)."""
    if not order:
        return lambda params: ()
    if len(order) == 1:
        key = order[0]
        return lambda params: (params[key],)
    return operator.itemgetter(*order)


class DB:
    """A DBAPI connection inside one transaction, executing named statements."""

    __slots__ = ("_conn", "_statements")

    def __init__(self, dbapi_connection: Any, statements: CompiledStatements) -> None:
        self._conn = dbapi_connection
        self._statements = statements

    def _execute(self, name: str, params: dict[str, Any]):
        cursor = self._conn.cursor()
        cursor.execute(*self._statements.bind(name, params))
        return cursor

    def rows(self, name: str, /, **params: Any) -> list[tuple]:
        return self._execute(name, params).fetchall()

    def first(self, name: str, /, **params: Any) -> tuple | None:
        return self._execute(name, params).fetchone()

    def run(self, name: str, /, **params: Any) -> int:
        """Execute a write; returns the affected row count."""
        return self._execute(name, params).rowcount

    def raw(self, sql: str) -> None:
        self._conn.cursor().execute(sql)

    @property
    def connection(self) -> Any:
        """The DBAPI connection the transaction runs on."""
        return self._conn


def is_integrity_error(exc: BaseException) -> bool:
    """True for a unique/foreign-key violation from any supported driver."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"IntegrityError", "UniqueViolationError"})


def _is_busy(exc: BaseException) -> bool:
    return "locked" in str(exc).lower() or "busy" in str(exc).lower()


def _sqlite_transaction(dbapi_connection: Any, statements: CompiledStatements, fn: Callable[[DB], T], write: bool) -> T:
    cursor = dbapi_connection.cursor()
    cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        result = fn(DB(dbapi_connection, statements))
    except BaseException:
        cursor.execute("ROLLBACK")
        raise
    cursor.execute("COMMIT")
    return result


def _counted(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> tuple[list[tuple], int]:
    """``(rows, rows changed)`` of one statement; counted by ``total_changes``, which sees
    a ``WITH ... INSERT`` too (``cursor.rowcount`` is -1 for a statement starting with ``WITH``)."""
    before = conn.total_changes
    rows = conn.execute(sql, args).fetchall()
    return rows, conn.total_changes - before


class SQLiteRunner:
    """Owns the connections to one SQLite file (WAL, synchronous=NORMAL)."""

    def __init__(self, path: Path, statements: dict[str, ClauseElement]) -> None:
        self.path = Path(path)
        self._statement_defs = statements
        self.statements: CompiledStatements | None = None
        self._inline: sqlite3.Connection | None = None
        self._async_engine: Any = None
        self._async_conn: Any = None
        self._slow_lock = asyncio.Lock()

    @staticmethod
    def _configure(dbapi_connection: Any, busy_ms: int) -> None:
        dbapi_connection.isolation_level = None  # transactions are explicit
        cursor = dbapi_connection.cursor()
        # switching a new file to WAL needs an exclusive lock: wait for it (other
        # processes may be opening the same file), then set the working timeout.
        # When two connections race for that lock SQLite refuses one at once,
        # without calling the busy handler (it would deadlock): retry it here.
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                cursor.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(random.uniform(0.002, 0.02))
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")

    def _connect_inline(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # used only from the loop thread after open(); created off it so a contended open never blocks the loop
        conn = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
        try:
            self._configure(conn, 0)
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    async def open(self) -> None:
        """Connect (creating the file) and set WAL, waiting off the loop if another process holds the file."""
        from sqlalchemy.dialects import sqlite

        self._inline = await asyncio.to_thread(self._connect_inline)
        self.statements = CompiledStatements(sqlite.dialect(), self._statement_defs)
        self._slow_lock = asyncio.Lock()  # bound to the loop that opens the store

    async def _slow_connection(self):
        if self._async_conn is None:
            from sqlalchemy import event
            from sqlalchemy.ext.asyncio import create_async_engine

            engine = create_async_engine(f"sqlite+aiosqlite:///{self.path}", connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
            event.listen(engine.sync_engine, "connect", lambda dbapi, _rec: self._configure(dbapi, BUSY_TIMEOUT_MS))
            self._async_engine = engine
            self._async_conn = await engine.connect()
        return self._async_conn

    async def run(self, fn: Callable[[DB], T], *, write: bool, inline: bool = True) -> T:
        """Run ``fn`` in one transaction: inline when uncontended, else off the loop."""
        statements = self.statements
        if self._inline is None or statements is None:
            raise RuntimeError(f"SQLite store {self.path} is not open")
        if inline:
            try:
                return _sqlite_transaction(self._inline, statements, fn, write)
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
        async with self._slow_lock:
            conn = await self._slow_connection()
            return await conn.run_sync(
                lambda sync_conn: _sqlite_transaction(sync_conn.connection.dbapi_connection, statements, fn, write)
            )

    async def execute(self, name: str, params: dict[str, Any], *, write: bool) -> list[tuple]:
        """One named statement in its own transaction; its rows.

        Uncontended, the statement runs alone in autocommit mode: SQLite makes one
        statement its own transaction (one snapshot for a read; all or nothing for a
        write), so no ``BEGIN``/``COMMIT`` is sent (each costs a statement execution).
        """
        return (await self._single(name, params, write))[0]

    async def execute_write(self, name: str, params: dict[str, Any]) -> int:
        """One named write in its own transaction; the affected row count."""
        return (await self._single(name, params, True))[1]

    async def _single(self, name: str, params: dict[str, Any], write: bool) -> tuple[list[tuple], int]:
        statements = self.statements
        if self._inline is None or statements is None:
            raise RuntimeError(f"SQLite store {self.path} is not open")
        try:
            return _counted(self._inline, *statements.bind(name, params))
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):  # busy: nothing was written; wait for the lock off the loop
                raise

        def work(db: DB) -> tuple[list[tuple], int]:  # on the slow path's DBAPI adapter: count with changes()
            rows = db.connection.cursor()
            rows.execute(*statements.bind(name, params))
            found = rows.fetchall()
            counter = db.connection.cursor()
            counter.execute("SELECT changes()")
            return found, counter.fetchone()[0]

        return await self.run(work, write=write, inline=False)

    async def run_ddl(self, fn: Callable[[Any], T]) -> T:
        """Run schema work (``fn(sync_connection)``) through SQLAlchemy, off the loop.

        Then the inline connection reads the new schema: a statement it prepares for
        the first time is compiled against the schema it last read, and an
        ``ON CONFLICT`` target that only the new schema has would fail at prepare
        (SQLite re-prepares on a changed schema only once a statement runs).
        """
        async with self._slow_lock:
            conn = await self._slow_connection()
            result = await conn.run_sync(fn)
            await conn.commit()
        if self._inline is not None:
            self._inline.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return result

    async def close(self) -> None:
        if self._async_conn is not None:
            await self._async_conn.close()
            await self._async_engine.dispose()
            self._async_conn = self._async_engine = None
        if self._inline is not None:
            self._inline.close()
            self._inline = None


# -- PostgreSQL ----------------------------------------------------------------------


def _error_chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _sqlstate(exc: BaseException) -> str | None:
    for err in _error_chain(exc):
        state = getattr(err, "sqlstate", None)
        if isinstance(state, str):
            return state
    return None


def is_retryable(exc: BaseException) -> bool:
    """True for a deadlock or serialization failure: re-running the transaction may succeed."""
    return _sqlstate(exc) in _RETRY_SQLSTATES


def is_connection_error(exc: BaseException) -> bool:
    """True when ``exc`` says the database connection itself failed (not one statement): unreachable, lost, shut down."""
    for err in _error_chain(exc):
        state = getattr(err, "sqlstate", None)
        # 08: connection exception; 57P: operator intervention (shutdown, crash, cannot connect now)
        if isinstance(state, str) and state.startswith(("08", "57P")):
            return True
        if isinstance(err, (OSError, TimeoutError, asyncio.TimeoutError)):
            return True
        if type(err).__name__ in ("InterfaceError", "ConnectionDoesNotExistError", "InternalClientError"):
            return True
    return False


class _Lease:
    """One checked-out connection: the SQLAlchemy AsyncConnection, its DBAPI adapter and asyncpg connection."""

    __slots__ = ("conn", "dbapi", "driver", "broken")

    def __init__(self, conn: Any, dbapi: Any, driver: Any) -> None:
        self.conn, self.dbapi, self.driver = conn, dbapi, driver
        self.broken = False


def _pg_transaction(_sync_conn: Any, lease: _Lease, statements: CompiledStatements, fn: Callable[[DB], T], write: bool) -> T:
    dbapi = lease.dbapi
    saved = dbapi.isolation_level, dbapi.readonly
    if not write:  # one snapshot for the whole read; read-only never fails serialization
        dbapi.isolation_level, dbapi.readonly = "repeatable_read", True
    try:
        try:
            result = fn(DB(dbapi, statements))  # the adapter sends BEGIN before the first statement
        except BaseException:
            try:
                dbapi.rollback()
            except BaseException:
                lease.broken = True
            raise
        dbapi.commit()
        return result
    finally:
        dbapi.isolation_level, dbapi.readonly = saved


#: idle advisory-lock connections a :class:`PostgresRunner` keeps for the next turn lock
LOCK_CONNECTIONS_KEPT = 4
#: how long the holder of an advisory lock has held it (s): its session went idle when its lock statement ended
_ADVISORY_HOLDER = (
    "SELECT EXTRACT(EPOCH FROM clock_timestamp() - a.state_change)::float8 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1::oid AND l.objid = $2::oid AND l.objsubid = 1 LIMIT 1"
)


class PostgresRunner:
    """Runs work on a PostgreSQL database through SQLAlchemy's asyncpg dialect.

    Holds at most ``pool_size`` connections (2-core default: 4), checked out of
    the engine once and reused, so a call costs no pool bookkeeping. A connection
    that failed at the connection level is dropped together with every idle one
    (they are likely dead too) and replaced on the next call.
    """

    def __init__(
        self,
        url: str | URL,
        statements: dict[str, ClauseElement],
        *,
        pool_size: int = 4,
        connect_timeout: float = 5.0,
        command_timeout: float | None = 60.0,
        server_settings: dict[str, str] | None = None,
    ) -> None:
        _, self.url = resolve_url(url)
        self.server_settings = dict(server_settings or {})
        self._statement_defs = statements
        self.statements: CompiledStatements | None = None
        self.pool_size = max(1, int(pool_size))
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self._engine: Any = None
        self._idle: list[_Lease] = []
        self._slots = asyncio.Semaphore(self.pool_size)
        #: idle connections of :meth:`advisory_lock`, holding no lock
        self._lock_conns: list[Any] = []

    @property
    def display_url(self) -> str:
        return self.url.render_as_string(hide_password=True)

    async def open(self) -> None:
        """Create the engine and connect once, so a bad URL or a down server fails here."""
        from sqlalchemy.ext.asyncio import create_async_engine

        connect_args: dict[str, Any] = {"timeout": self.connect_timeout, "server_settings": self.server_settings}
        if self.command_timeout:
            connect_args["command_timeout"] = self.command_timeout
        # leases hold at most pool_size connections; the overflow is slack for one whose close failed
        self._engine = create_async_engine(
            self.url, pool_size=self.pool_size, max_overflow=2, pool_recycle=1800, connect_args=connect_args
        )
        self.statements = CompiledStatements(self._engine.dialect, self._statement_defs)
        self._slots = asyncio.Semaphore(self.pool_size)  # bound to the loop that opens the store
        try:
            self._checkin(await self._checkout())
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for lease in idle:
            await self._close_lease(lease, invalidate=False)
        locks, self._lock_conns = self._lock_conns, []
        for conn in locks:
            await conn.close()
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await engine.dispose()

    # connections
    async def _checkout(self) -> _Lease:
        if self._engine is None:
            raise RuntimeError(f"PostgreSQL store {self.display_url} is not open")
        await self._slots.acquire()
        try:
            while self._idle:
                lease = self._idle.pop()
                if not lease.driver.is_closed():
                    return lease
                await self._close_lease(lease, invalidate=True)
            conn = await self._engine.connect()
            try:
                fairy = await conn.get_raw_connection()
                return _Lease(conn, fairy.dbapi_connection, fairy.driver_connection)
            except BaseException:
                await conn.close()
                raise
        except BaseException:
            self._slots.release()
            raise

    def _checkin(self, lease: _Lease) -> None:
        if self._engine is None:  # closed while this call ran: nothing will reuse the connection
            lease.driver.terminate()
        else:
            self._idle.append(lease)
        self._slots.release()

    @staticmethod
    async def _close_lease(lease: _Lease, *, invalidate: bool) -> None:
        try:
            if invalidate:
                lease.driver.terminate()  # immediate; a graceful close could wait on a dead server
                await lease.conn.invalidate()
            await lease.conn.close()
        except Exception:  # closing a broken connection may fail; it is gone either way
            pass

    async def _release_after(self, lease: _Lease, exc: BaseException) -> None:
        """Return ``lease`` after a failed call, or drop it when its state is unknown."""
        cancelled = not isinstance(exc, Exception)  # mid-protocol: the connection cannot be reused
        lost = not cancelled and is_connection_error(exc)
        if not (cancelled or lost or lease.broken or lease.driver.is_closed()):
            self._checkin(lease)
            return
        try:
            await self._close_lease(lease, invalidate=True)
            if lost:  # a lost connection usually means every idle one is lost too
                idle, self._idle = self._idle, []
                for other in idle:
                    await self._close_lease(other, invalidate=True)
        finally:
            self._slots.release()

    # work
    def _statements(self) -> CompiledStatements:
        if self.statements is None:
            raise RuntimeError(f"PostgreSQL store {self.display_url} is not open")
        return self.statements

    async def _attempts(self, call: Callable[[_Lease], Awaitable[T]]) -> T:
        """``await call(lease)``; on a deadlock / serialization failure, again (whole) after a backoff."""
        attempt = 0
        while True:
            lease = await self._checkout()
            try:
                result = await call(lease)
            except BaseException as exc:
                await self._release_after(lease, exc)
                if attempt < PG_RETRIES and is_retryable(exc):
                    await asyncio.sleep(PG_BACKOFF * 2**attempt)
                    attempt += 1
                    continue
                raise
            self._checkin(lease)
            return result

    async def run(self, fn: Callable[[DB], T], *, write: bool, inline: bool = True) -> T:
        """Run ``fn`` in one transaction (``inline`` is accepted for interface parity)."""
        statements = self._statements()
        return await self._attempts(lambda lease: lease.conn.run_sync(_pg_transaction, lease, statements, fn, write))

    async def execute(self, name: str, params: dict[str, Any], *, write: bool) -> list:
        """One named statement, autocommitted: one round trip on the asyncpg connection."""
        sql, args = self._statements().bind(name, params)
        return await self._attempts(lambda lease: lease.driver.fetch(sql, *args))

    async def execute_write(self, name: str, params: dict[str, Any]) -> int:
        """One named write, autocommitted in one round trip; the affected row count (no rows sent back)."""
        sql, args = self._statements().bind(name, params)
        status = await self._attempts(lambda lease: lease.driver.execute(sql, *args))
        return int(status.rpartition(" ")[2])

    @contextlib.asynccontextmanager
    async def advisory_lock(
        self, key: int, *, timeout: float, timed_out: Callable[[float | None], BaseException] | None = None
    ) -> AsyncIterator[None]:
        """Hold the session-level advisory lock ``key`` on a connection of its own (not the pool's).

        After ``timeout`` s it raises ``timed_out(held_for)`` (default: ``TimeoutError``),
        ``held_for`` being how long the holder has held the lock (s), None when not seen.

        A free lock is taken with ``pg_try_advisory_lock``; a held one with the blocking
        ``pg_advisory_lock`` under ``SET lock_timeout`` (one round trip), so the server's
        lock manager queues the
        waiters and grants the lock in the order they asked for it (a releasing
        process asking again queues behind them); a wait that times out ends the
        statement's implicit transaction and leaves the connection reusable. The lock
        is released with ``pg_advisory_unlock``, and with the connection if that dies
        first. A connection whose unlock (or timed-out wait) went through is kept for
        the next lock (at most :data:`LOCK_CONNECTIONS_KEPT` idle: a connect per turn
        costs ~5.6 ms on loopback, a lock and unlock on an open connection ~0.15 ms);
        any other error closes it instead.
        """
        import asyncpg

        if self._engine is None:
            raise RuntimeError(f"PostgreSQL store {self.display_url} is not open")
        deadline = time.monotonic() + timeout
        conn = await self._lock_connection(timeout)
        clean = False
        try:
            wait_ms = max(1, int((deadline - time.monotonic()) * 1000))
            try:  # free (the server hands a released lock straight to its first waiter): one prepared round trip
                if not await conn.fetchval("SELECT pg_try_advisory_lock($1::bigint)", key):
                    # the key is an int: formatted, so both statements go in one simple query
                    await conn.execute(f"SET lock_timeout = {wait_ms}; SELECT pg_advisory_lock({int(key)}::bigint)", timeout=wait_ms / 1000 + 30)
            except asyncpg.exceptions.LockNotAvailableError:
                held_for = await conn.fetchval(_ADVISORY_HOLDER, (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF)
                clean = True  # it holds no lock
                if timed_out is not None:
                    raise timed_out(held_for) from None
                raise TimeoutError(f"advisory lock {key} still held after {timeout:g} s") from None
            try:
                yield
            finally:
                if not conn.is_closed():
                    await conn.execute("SELECT pg_advisory_unlock($1::bigint)", key)
                    clean = True
        finally:
            if clean and self._engine is not None and not conn.is_closed() and len(self._lock_conns) < LOCK_CONNECTIONS_KEPT:
                self._lock_conns.append(conn)
            else:
                await conn.close()

    async def _lock_connection(self, timeout: float) -> Any:
        """An idle lock connection, else a new one (a session-level advisory lock needs a session of its own)."""
        import asyncpg

        while self._lock_conns:
            conn = self._lock_conns.pop()
            if not conn.is_closed():
                return conn
        url = self.url.set(drivername="postgresql")
        return await asyncpg.connect(url.render_as_string(hide_password=False), timeout=min(self.connect_timeout, max(timeout, 0.1)))

    async def run_ddl(self, fn: Callable[[Any], T]) -> T:
        """Run schema work (``fn(sync_connection)``) through SQLAlchemy and commit."""
        lease = await self._checkout()
        try:
            result = await lease.conn.run_sync(fn)
            await lease.conn.commit()
        except BaseException as exc:
            try:
                await lease.conn.rollback()
            except BaseException:
                lease.broken = True
            await self._release_after(lease, exc)
            raise
        self._checkin(lease)
        return result
