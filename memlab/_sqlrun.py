"""Run SQLAlchemy Core work in one transaction, the fastest way each dialect allows.

Work is a plain function ``fn(connection) -> result`` written once against a
synchronous SQLAlchemy :class:`~sqlalchemy.engine.Connection`; a runner decides
where it executes:

* :class:`SQLiteRunner` runs it inline on the event-loop thread with
  ``busy_timeout=0``. On this machine a thread hop costs ~0.3 ms, several times
  a whole local SQLite transaction, so the uncontended path takes none. When
  another connection holds the write lock (``database is locked``) nothing has
  been written, and the work is re-run off the loop through aiosqlite with a
  30 s busy timeout, so a waiting writer never blocks the loop. Long jobs
  (sweeps) go straight to that path.

Writes open with ``BEGIN IMMEDIATE`` (SQLite) so two writers never deadlock
upgrading a read lock.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

T = TypeVar("T")

BUSY_TIMEOUT_MS = 30_000


def _is_busy(exc: BaseException) -> bool:
    orig = getattr(exc, "orig", exc)
    return isinstance(orig, sqlite3.OperationalError) and "locked" in str(orig).lower()


def _transaction(conn: Connection, fn: Callable[[Connection], T], write: bool) -> T:
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        result = fn(conn)
    except BaseException:
        conn.exec_driver_sql("ROLLBACK")
        conn.rollback()
        raise
    conn.exec_driver_sql("COMMIT")
    conn.commit()
    return result


class SQLiteRunner:
    """Owns the connections to one SQLite file (WAL, synchronous=NORMAL)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._inline: Connection | None = None
        self._engine = None
        self._async_engine = None
        self._async_conn = None
        self._slow_lock: asyncio.Lock | None = None

    @staticmethod
    def _pragmas(busy_ms: int) -> Callable[[Any, Any], None]:
        def on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # we issue BEGIN/COMMIT ourselves
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return on_connect

    def open(self) -> None:
        """Connect (creating the file). Synchronous; call from the event-loop thread."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._engine = create_engine(f"sqlite:///{self.path}", connect_args={"timeout": 0})
        event.listen(self._engine, "connect", self._pragmas(0))
        self._inline = self._engine.connect()
        self._slow_lock = asyncio.Lock()

    async def _slow_connection(self):
        if self._async_conn is None:
            from sqlalchemy.ext.asyncio import create_async_engine

            self._async_engine = create_async_engine(
                f"sqlite+aiosqlite:///{self.path}", connect_args={"timeout": BUSY_TIMEOUT_MS / 1000}
            )
            event.listen(self._async_engine.sync_engine, "connect", self._pragmas(BUSY_TIMEOUT_MS))
            self._async_conn = await self._async_engine.connect()
        return self._async_conn

    def run_sync(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        """Run inline; raises OperationalError('database is locked') when contended."""
        return _transaction(self._inline, fn, write)

    async def run(self, fn: Callable[[Connection], T], *, write: bool, inline: bool = True) -> T:
        """Run ``fn`` in one transaction; inline when uncontended, else off the loop."""
        if self._inline is None:
            raise RuntimeError(f"SQLite store {self.path} is not open")
        if inline:
            try:
                return _transaction(self._inline, fn, write)
            except OperationalError as exc:
                if not _is_busy(exc):
                    raise
        async with self._slow_lock:
            conn = await self._slow_connection()
            return await conn.run_sync(lambda sync_conn: _transaction(sync_conn, fn, write))

    async def close(self) -> None:
        if self._async_conn is not None:
            await self._async_conn.close()
            await self._async_engine.dispose()
            self._async_conn = self._async_engine = None
        if self._inline is not None:
            self._inline.close()
            self._engine.dispose()
            self._inline = self._engine = None
