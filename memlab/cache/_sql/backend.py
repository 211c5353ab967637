"""The SQL session cache on SQLite or PostgreSQL (:class:`SQLCache`); its statements are in :mod:`.statements`."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import secrets
import time
from collections.abc import Hashable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from memlab._sqlrun import DB, PostgresRunner, SQLiteRunner, advisory_key, is_integrity_error, resolve_url
from memlab._clock import Clock
from memlab.cache._base import DEFAULT_TTL_SECONDS, CacheBackend, PayloadChange, config_options
from memlab.cache._turn_lock import file_turn_lock, lock_name, lock_timeout
from memlab.cache._sql.statements import KINDS_IN_LOCK_ORDER, PG_SESSION_SETTINGS, SWEEP_LOCK_KEY, TABLES, build_statements
from memlab.exceptions import CacheConnectionError, ConfigError, SessionLockTimeout, SessionQAEntryValidationError
from memlab.ttl import LazySlackTTL, TTLPolicy

logger = logging.getLogger("memlab.cache")

_DEAD_CURSOR = ("dead",)


def _dt(stamp: float | None) -> datetime | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, timezone.utc)


def _stamp(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def _new_epoch() -> int:
    return secrets.randbits(62)



class SQLCache(CacheBackend):
    """Session cache in SQL tables: a SQLite file (default) or PostgreSQL.

    ``url`` is ``sqlite:///path`` or ``postgresql+asyncpg://user:pw@host:port/db``
    (``postgresql://`` is read as asyncpg). One statement set serves every dialect
    (:func:`build_statements`); see :mod:`memlab._sqlrun` for how each dialect
    executes it. Expiry is stored once per (session, kind), so sliding it costs
    one row write however long the session is. TTL defaults to ``lazy_slack``.

    Opening brings the schema to the newest migration (:mod:`memlab.migrations`):
    a fresh database is created and stamped, an older one is upgraded.

    PostgreSQL only: ``pool_size`` connections at most (default 4, sized for a
    2-core host), ``connect_timeout`` seconds to connect, ``command_timeout``
    seconds per statement (None: no limit). Writes lock the session's state row
    first; deadlocks and serialization failures are retried (see
    :class:`memlab._sqlrun.PostgresRunner`); the global sweep runs under
    ``pg_try_advisory_xact_lock(SWEEP_LOCK_KEY)`` and is skipped while another
    process sweeps.
    """

    default_ttl_policy = "lazy_slack"

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 4,
        connect_timeout: float = 5.0,
        command_timeout: float | None = 60.0,
        **kwargs,
    ) -> None:
        if kwargs.get("ttl") is None:  # SQL's default: re-stamp lazily, one state write per 5 % of the TTL
            kwargs["ttl"] = LazySlackTTL(DEFAULT_TTL_SECONDS)
        super().__init__(**kwargs)
        dialect, parsed = resolve_url(url)
        self.url = url
        self.dialect = dialect
        self.display_url = make_url(url).render_as_string(hide_password=True)
        #: the SQLite file (None on PostgreSQL)
        self.path: Path | None
        self.name = "sqlite" if dialect == "sqlite" else "postgres"
        if dialect == "sqlite":
            if not parsed.database or parsed.database == ":memory:":
                raise ConfigError(f"SQLCache needs a database file path, got {self.display_url!r}")
            self.path = Path(parsed.database)
        else:
            if importlib.util.find_spec("asyncpg") is None:
                raise ImportError("the postgres cache needs asyncpg: pip install 'memlab[postgres]'")
            self.path = None
        self._pool_size, self._connect_timeout, self._command_timeout = pool_size, connect_timeout, command_timeout
        self._runner: SQLiteRunner | PostgresRunner | None = None

    @classmethod
    def from_config(cls, config: Any, *, clock: Clock | None = None, ttl: TTLPolicy | None = None) -> "SQLCache":
        """``sqlite`` or ``postgres`` from the config: the URL of :func:`memlab.config.sql_cache_url`."""
        from memlab.config import sql_cache_url

        return cls(sql_cache_url(config), **config_options(config, clock, ttl))

    def __repr__(self) -> str:
        return f"SQLCache({self.display_url!r}, ttl={self.ttl.name}:{self.ttl.seconds})"

    # lifecycle
    async def _open(self) -> None:
        from memlab.migrations import upgrade_connection

        statements = build_statements(self.dialect)
        runner: SQLiteRunner | PostgresRunner
        if self.path is not None:
            runner = SQLiteRunner(self.path, statements)
        else:
            runner = PostgresRunner(
                self.url,
                statements,
                server_settings=PG_SESSION_SETTINGS,
                pool_size=self._pool_size,
                connect_timeout=self._connect_timeout,
                command_timeout=self._command_timeout,
            )
        await runner.open()
        try:
            # SQLite: through the slow path's own connection (busy timeout, BEGIN
            # IMMEDIATE), while the inline connection holds no transaction
            await runner.run_ddl(lambda conn: upgrade_connection(conn, display_url=self.display_url))
        except BaseException:
            await runner.close()
            raise
        self._runner = runner

    async def _close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.close()

    def _open_runner(self):
        if self._runner is None:
            raise RuntimeError(f"{self.name} cache at {self.display_url} is not open")
        return self._runner

    async def _run(self, fn, *, write: bool, inline: bool = True):
        return await self._open_runner().run(fn, write=write, inline=inline)

    async def _execute(self, name: str, *, write: bool, **params):
        """One statement in its own transaction (on PostgreSQL: one round trip)."""
        return await self._open_runner().execute(name, params, write=write)

    def _fast_ttl(self, now: datetime) -> tuple[str, dict]:
        """``(statement suffix, parameters)`` that let SQL apply ``self.ttl``'s re-stamp rule.

        Any policy: SQL re-stamps when ``ttl_on`` and the stored expiry is NULL or
        before ``cutoff`` (:meth:`~memlab.ttl.TTLPolicy.restamp_cutoff`).
        A policy whose cutoff is its new expiry (``sliding``) re-stamps on every
        write, so it takes the variant that re-stamps in the same statement; any
        other leaves the rare re-stamp to the general path.
        """
        cutoff, target = self.ttl.restamp_cutoff(now), self.ttl.expiry_after_write(now)
        if cutoff is None or target is None:  # the contract: a disabled policy never demands a write
            return "", {"ttl_on": False, "cutoff": 0.0}
        if cutoff >= target:
            return "_restamp", {"ttl_on": True, "cutoff": cutoff.timestamp(), "new_expiry": target.timestamp()}
        return "", {"ttl_on": True, "cutoff": cutoff.timestamp()}

    async def _write_fast(self, kind: str, user_id, session_id, key, payload, now) -> bool:
        """The one-statement write (:func:`~memlab.cache._sql.statements._fast_writes`); False when the general path must run."""
        variant, ttl = self._fast_ttl(now)
        if variant and self.dialect != "postgresql":
            return False  # a re-stamp in the same statement needs PostgreSQL's data-modifying CTE
        stamp = now.timestamp()
        params = {"user_id": user_id, "session_id": session_id, "key": key, "payload": payload, "created_at": stamp, "now": stamp}
        written = await self._open_runner().execute_write(f"{kind}_write_fast{variant}", {**params, **ttl})
        return written > 0

    # state helpers, run inside a transaction
    def _lock_state(self, db: DB, user_id: str, session_id: str, kind: str, *, create: bool):
        """``(expires_at, epoch)`` of the kind, row-locked; created when missing and ``create``."""
        ids = {"user_id": user_id, "session_id": session_id, "kind": kind}
        row = db.first("state_lock", **ids)
        if row is None and create:
            db.run("state_create", epoch=_new_epoch(), **ids)
            row = db.first("state_lock", **ids)
        return row

    def _prepare_write(self, db: DB, user_id: str, session_id: str, kind: str, now: datetime) -> tuple[float | None, int]:
        """Lock (creating) the kind and purge it when dead. Returns ``(expires_at, epoch)``."""
        expires_at, epoch = self._lock_state(db, user_id, session_id, kind, create=True)
        if expires_at is not None and expires_at <= now.timestamp():
            db.run(f"{kind}_purge", user_id=user_id, session_id=session_id)
            expires_at, epoch = None, _new_epoch()
            db.run("state_update", user_id=user_id, session_id=session_id, kind=kind, expires_at=None, epoch=epoch)
        return expires_at, epoch

    def _live_state(self, db: DB, user_id: str, session_id: str, kind: str, now: datetime):
        row = self._lock_state(db, user_id, session_id, kind, create=False)
        if row is None or not self.ttl.is_live(_dt(row[0]), now):
            return None
        return row

    def _after_change(self, db: DB, user_id, session_id, kind, state, now, *, bump: bool) -> None:
        expires_at, epoch = state
        restamp = self.ttl.needs_restamp(_dt(expires_at), now)
        if restamp or bump:
            db.run(
                "state_update",
                user_id=user_id,
                session_id=session_id,
                kind=kind,
                expires_at=_stamp(self.ttl.expiry_after_write(now)) if restamp else expires_at,
                epoch=_new_epoch() if bump else epoch,
            )

    # QA
    async def _append_qa(self, user_id, session_id, qa_id, payload, now):
        def work(db: DB) -> None:
            state = self._prepare_write(db, user_id, session_id, "qa", now)
            db.run("qa_insert", user_id=user_id, session_id=session_id, key=qa_id, payload=payload, created_at=now.timestamp())
            self._after_change(db, user_id, session_id, "qa", state, now, bump=False)

        try:
            if not await self._write_fast("qa", user_id, session_id, qa_id, payload, now):
                await self._run(work, write=True)
        except Exception as exc:
            if is_integrity_error(exc):
                raise SessionQAEntryValidationError(f"qa_id {qa_id!r} already exists in this session") from None
            raise

    async def _read_qa(self, user_id, session_id, last_n, now):
        ids = {"user_id": user_id, "session_id": session_id, "now": now.timestamp()}
        if last_n is None:
            rows = await self._execute("qa_all", write=False, **ids)
            return [row[0] for row in rows]
        rows = await self._execute("qa_last_n", write=False, last_n=last_n, **ids)
        return [row[0] for row in reversed(rows)]

    async def _read_qa_log(self, user_id, session_id, cursor: Hashable | None, now):
        known: tuple[int, int] | None = None
        if isinstance(cursor, tuple) and len(cursor) == 2 and all(type(part) is int for part in cursor):
            known = (cursor[0], cursor[1])
        rows = await self._execute(
            "qa_log",
            write=False,
            user_id=user_id,
            session_id=session_id,
            now=now.timestamp(),
            cursor_epoch=known[0] if known else None,
            after=known[1] if known else -1,
        )
        if not rows:
            return _DEAD_CURSOR, [], True
        epoch = rows[0][0]
        incremental = known is not None and known[0] == epoch
        after = known[1] if known is not None and incremental else -1
        rows = [row for row in rows if row[1] is not None]  # the outer join's empty side
        last_seq = rows[-1][1] if rows else max(after, 0)
        return (epoch, last_seq), [row[2] for row in rows], not incremental

    async def _modify(self, kind, user_id, session_id, key, change: PayloadChange, now) -> bool:
        def work(db: DB) -> bool:
            state = self._live_state(db, user_id, session_id, kind, now)
            if state is None:
                return False
            row = db.first(f"{kind}_get", user_id=user_id, session_id=session_id, key=key)
            if row is None:
                return False
            new = change(row[1])
            if new is not None:
                db.run(f"{kind}_set", seq=row[0], payload=new)
            self._after_change(db, user_id, session_id, kind, state, now, bump=kind == "qa" and new is not None)
            return True

        return await self._run(work, write=True)

    async def _modify_qa(self, user_id, session_id, qa_id, change, now):
        return await self._modify("qa", user_id, session_id, qa_id, change, now)

    async def _delete_qa(self, user_id, session_id, qa_id, now):
        def work(db: DB) -> bool:
            state = self._live_state(db, user_id, session_id, "qa", now)
            if state is None or not db.run("qa_delete", user_id=user_id, session_id=session_id, key=qa_id):
                return False
            self._after_change(db, user_id, session_id, "qa", state, now, bump=True)
            return True

        return await self._run(work, write=True)

    # context
    async def _upsert_context(self, user_id, session_id, entry_id, payload, now):
        def work(db: DB) -> None:
            state = self._prepare_write(db, user_id, session_id, "context", now)
            db.run(
                "context_upsert", user_id=user_id, session_id=session_id, key=entry_id, payload=payload, created_at=now.timestamp()
            )
            self._after_change(db, user_id, session_id, "context", state, now, bump=False)

        if not await self._write_fast("context", user_id, session_id, entry_id, payload, now):
            await self._run(work, write=True)

    async def _read_context(self, user_id, session_id, now):
        ids = {"user_id": user_id, "session_id": session_id, "now": now.timestamp()}
        rows = await self._execute("context_all", write=False, **ids)
        return [row[0] for row in rows]

    async def _modify_context(self, user_id, session_id, entry_id, change, now):
        return await self._modify("context", user_id, session_id, entry_id, change, now)

    async def _delete_context(self, user_id, session_id, entry_id, now):
        def work(db: DB) -> bool:
            if self._live_state(db, user_id, session_id, "context", now) is None:
                return False
            return bool(db.run("context_delete", user_id=user_id, session_id=session_id, key=entry_id))

        return await self._run(work, write=True)

    # session / maintenance
    async def _delete_session(self, user_id, session_id, now):
        def work(db: DB) -> bool:
            existed = False
            for kind in KINDS_IN_LOCK_ORDER:
                live = self._live_state(db, user_id, session_id, kind, now) is not None
                removed = db.run(f"{kind}_purge", user_id=user_id, session_id=session_id)
                existed = existed or (live and removed > 0)
            db.run("state_delete_session", user_id=user_id, session_id=session_id)
            return existed

        return await self._run(work, write=True)

    async def _sweep(self, now):
        stamp = now.timestamp()

        def work(db: DB) -> int:
            if self.dialect == "postgresql" and not (db.first("sweep_try_lock", key=SWEEP_LOCK_KEY) or (False,))[0]:
                logger.debug("postgres cache sweep skipped: another process is sweeping")
                return 0
            if not db.rows("sweep_lock", now=stamp):  # locks the dead sessions' state rows
                return 0
            removed = sum(db.run(f"{kind}_sweep", now=stamp) for kind in TABLES)
            db.run("sweep_state", now=stamp)
            return removed

        return await self._run(work, write=True, inline=False)

    def turn_lock(self, user_id: str, session_id: str, *, timeout: float):
        """The session's turn lock: on SQLite a ticket queue of lock files beside the database; on PostgreSQL a session advisory lock.

        PostgreSQL: the blocking ``pg_advisory_lock`` on a key of (user, session) under
        ``lock_timeout``, on a connection of its own (not the cache's pool, which the turn
        itself needs), so the server grants it to the waiters in order; released with
        ``pg_advisory_unlock``; a connection that dies drops the lock.
        """
        super().turn_lock(user_id, session_id, timeout=timeout)  # checks the ids
        if self.path is not None:
            return file_turn_lock(self.path.parent / f"{self.path.name}.turn-locks", user_id, session_id, timeout=timeout)
        return self._advisory_turn_lock(user_id, session_id, timeout)

    @contextlib.asynccontextmanager
    async def _advisory_turn_lock(self, user_id: str, session_id: str, timeout: float):
        runner = self._open_runner()
        key = advisory_key(f"memlab.turn:{lock_name(user_id, session_id)}")
        started = time.monotonic()
        def timed_out(held_for: float | None) -> SessionLockTimeout:
            return lock_timeout(
                user_id, session_id, waited=time.monotonic() - started, turns=None, held_for=held_for,
                uncounted="PostgreSQL cannot count the turns that took the lock meanwhile",
            )

        async with contextlib.AsyncExitStack() as held:
            try:
                await held.enter_async_context(runner.advisory_lock(key, timeout=timeout, timed_out=timed_out))
            except SessionLockTimeout:
                raise
            except Exception as exc:
                raise CacheConnectionError(f"postgres cache at {self.display_url}: turn lock failed: {type(exc).__name__}: {exc}") from exc
            yield

    async def _prune(self):
        def work(db: DB) -> None:
            for kind in TABLES:
                db.run(f"{kind}_prune")
            db.raw("DELETE FROM cache_session_state")

        await self._run(work, write=True, inline=False)
