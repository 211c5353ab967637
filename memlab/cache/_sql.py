from __future__ import annotations

import secrets
from collections.abc import Hashable
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import delete, exists, or_, select, tuple_, update
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import IntegrityError

from memlab.cache._base import CacheBackend, PayloadChange
from memlab.cache._sql_schema import KIND_TABLES, metadata, qa_entries, session_context, session_state
from memlab.exceptions import ConfigError, SessionQAEntryValidationError

_DEAD_CURSOR = ("dead",)


def _ts(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def _dt(stamp: float | None) -> datetime | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, timezone.utc)


def _new_epoch() -> int:
    return secrets.randbits(62)


def _dialect_insert(conn: Connection, table):
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(table)


def _session(table, user_id: str, session_id: str):
    return (table.c.user_id == user_id, table.c.session_id == session_id)


def _live_state(user_id: str, session_id: str, kind: str, now_ts: float):
    """EXISTS clause: the kind of this session is alive at ``now_ts``."""
    return exists().where(
        *_session(session_state, user_id, session_id),
        session_state.c.kind == kind,
        or_(session_state.c.expires_at.is_(None), session_state.c.expires_at > now_ts),
    )


class SQLCache(CacheBackend):
    """Session cache in SQL tables (SQLite file by default).

    One statement set serves every SQL dialect; see :mod:`memlab._sqlrun` for how
    each dialect executes it. TTL defaults to ``lazy_slack``.
    """

    default_ttl_policy = "lazy_slack"

    def __init__(self, url: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.url = url
        parsed = make_url(url)
        if parsed.get_backend_name() != "sqlite":
            raise ConfigError(f"SQLCache supports sqlite URLs in this build, got {parsed.render_as_string(hide_password=True)!r}")
        if not parsed.database or parsed.database == ":memory:":
            raise ConfigError(f"SQLCache needs a file path, got {url!r}")
        self.name = "sqlite"
        self.path = Path(parsed.database)
        self._runner = None

    # lifecycle
    async def _open(self) -> None:
        from memlab._sqlrun import SQLiteRunner

        runner = SQLiteRunner(self.path)
        runner.open()
        try:
            await runner.run(lambda conn: metadata.create_all(conn, checkfirst=True), write=True)
        except BaseException:
            await runner.close()
            raise
        self._runner = runner

    async def _close(self) -> None:
        if self._runner is not None:
            await self._runner.close()
            self._runner = None

    async def _run(self, fn, *, write: bool, inline: bool = True):
        if self._runner is None:
            raise RuntimeError(f"{self.name} cache at {self.path} is not open")
        return await self._runner.run(fn, write=write, inline=inline)

    # state helpers (run inside a transaction)
    def _lock_state(self, conn: Connection, user_id: str, session_id: str, kind: str, *, create: bool):
        """(expires_at, epoch) of the kind, row-locked; created when missing and ``create``."""
        query = (
            select(session_state.c.expires_at, session_state.c.epoch)
            .where(*_session(session_state, user_id, session_id), session_state.c.kind == kind)
            .with_for_update()
        )
        row = conn.execute(query).first()
        if row is None and create:
            stmt = _dialect_insert(conn, session_state).values(
                user_id=user_id, session_id=session_id, kind=kind, expires_at=None, epoch=_new_epoch()
            )
            conn.execute(stmt.on_conflict_do_nothing())
            row = conn.execute(query).first()
        return row

    def _set_state(self, conn: Connection, user_id: str, session_id: str, kind: str, **values) -> None:
        conn.execute(
            update(session_state)
            .where(*_session(session_state, user_id, session_id), session_state.c.kind == kind)
            .values(**values)
        )

    def _prepare_write(self, conn: Connection, user_id: str, session_id: str, kind: str, now: datetime):
        """Lock (creating) the kind; purge it if dead. Returns the current expiry stamp."""
        expires_at, _epoch = self._lock_state(conn, user_id, session_id, kind, create=True)
        if expires_at is not None and expires_at <= now.timestamp():
            table = KIND_TABLES[kind]
            conn.execute(delete(table).where(*_session(table, user_id, session_id)))
            self._set_state(conn, user_id, session_id, kind, expires_at=None, epoch=_new_epoch())
            expires_at = None
        return expires_at

    def _live_stamp(self, conn: Connection, user_id: str, session_id: str, kind: str, now: datetime):
        """The locked state row when the kind is alive, else None."""
        row = self._lock_state(conn, user_id, session_id, kind, create=False)
        if row is None or not self.ttl.is_live(_dt(row.expires_at), now):
            return None
        return row

    def _after_change(self, conn, user_id, session_id, kind, expires_at, now, *, bump: bool) -> None:
        values = {}
        if self.ttl.needs_restamp(_dt(expires_at), now):
            values["expires_at"] = _ts(self.ttl.expiry_after_write(now))
        if bump:
            values["epoch"] = _new_epoch()
        if values:
            self._set_state(conn, user_id, session_id, kind, **values)

    # QA
    async def _append_qa(self, user_id, session_id, qa_id, payload, now):
        def work(conn: Connection) -> None:
            expires_at = self._prepare_write(conn, user_id, session_id, "qa", now)
            conn.execute(
                qa_entries.insert().values(
                    user_id=user_id, session_id=session_id, qa_id=qa_id, payload=payload, created_at=now.timestamp()
                )
            )
            self._after_change(conn, user_id, session_id, "qa", expires_at, now, bump=False)

        try:
            await self._run(work, write=True)
        except IntegrityError:
            raise SessionQAEntryValidationError(f"qa_id {qa_id!r} already exists in this session") from None

    async def _read_qa(self, user_id, session_id, last_n, now):
        query = (
            select(qa_entries.c.payload)
            .where(*_session(qa_entries, user_id, session_id), _live_state(user_id, session_id, "qa", now.timestamp()))
            .order_by(qa_entries.c.seq.desc())
        )
        if last_n is not None:
            query = query.limit(last_n)
        rows = await self._run(lambda conn: conn.execute(query).scalars().all(), write=False)
        return rows[::-1]

    async def _read_qa_log(self, user_id, session_id, cursor: Hashable | None, now):
        def work(conn: Connection):
            state = conn.execute(
                select(session_state.c.expires_at, session_state.c.epoch).where(
                    *_session(session_state, user_id, session_id), session_state.c.kind == "qa"
                )
            ).first()
            if state is None or not self.ttl.is_live(_dt(state.expires_at), now):
                return _DEAD_CURSOR, [], True
            incremental = isinstance(cursor, tuple) and len(cursor) == 2 and cursor[0] == state.epoch
            query = select(qa_entries.c.seq, qa_entries.c.payload).where(*_session(qa_entries, user_id, session_id))
            if incremental:
                query = query.where(qa_entries.c.seq > cursor[1])
            rows = conn.execute(query.order_by(qa_entries.c.seq)).all()
            last_seq = rows[-1].seq if rows else (cursor[1] if incremental else 0)
            return (state.epoch, last_seq), [row.payload for row in rows], not incremental

        return await self._run(work, write=False)

    async def _modify_qa(self, user_id, session_id, qa_id, change: PayloadChange, now):
        def work(conn: Connection) -> bool:
            state = self._live_stamp(conn, user_id, session_id, "qa", now)
            if state is None:
                return False
            row = conn.execute(
                select(qa_entries.c.seq, qa_entries.c.payload)
                .where(*_session(qa_entries, user_id, session_id), qa_entries.c.qa_id == qa_id)
                .with_for_update()
            ).first()
            if row is None:
                return False
            new = change(row.payload)
            if new is not None:
                conn.execute(update(qa_entries).where(qa_entries.c.seq == row.seq).values(payload=new))
            self._after_change(conn, user_id, session_id, "qa", state.expires_at, now, bump=new is not None)
            return True

        return await self._run(work, write=True)

    async def _delete_qa(self, user_id, session_id, qa_id, now):
        def work(conn: Connection) -> bool:
            state = self._live_stamp(conn, user_id, session_id, "qa", now)
            if state is None:
                return False
            deleted = conn.execute(
                delete(qa_entries).where(*_session(qa_entries, user_id, session_id), qa_entries.c.qa_id == qa_id)
            ).rowcount
            if deleted:
                self._after_change(conn, user_id, session_id, "qa", state.expires_at, now, bump=True)
            return bool(deleted)

        return await self._run(work, write=True)

    # context
    async def _upsert_context(self, user_id, session_id, entry_id, payload, now):
        def work(conn: Connection) -> None:
            expires_at = self._prepare_write(conn, user_id, session_id, "context", now)
            stmt = _dialect_insert(conn, session_context).values(
                user_id=user_id, session_id=session_id, entry_id=entry_id, payload=payload, created_at=now.timestamp()
            )
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["user_id", "session_id", "entry_id"], set_={"payload": stmt.excluded.payload}
                )
            )
            self._after_change(conn, user_id, session_id, "context", expires_at, now, bump=False)

        await self._run(work, write=True)

    async def _read_context(self, user_id, session_id, now):
        query = (
            select(session_context.c.payload)
            .where(
                *_session(session_context, user_id, session_id),
                _live_state(user_id, session_id, "context", now.timestamp()),
            )
            .order_by(session_context.c.seq)
        )
        return await self._run(lambda conn: conn.execute(query).scalars().all(), write=False)

    async def _modify_context(self, user_id, session_id, entry_id, change, now):
        def work(conn: Connection) -> bool:
            state = self._live_stamp(conn, user_id, session_id, "context", now)
            if state is None:
                return False
            row = conn.execute(
                select(session_context.c.seq, session_context.c.payload)
                .where(*_session(session_context, user_id, session_id), session_context.c.entry_id == entry_id)
                .with_for_update()
            ).first()
            if row is None:
                return False
            new = change(row.payload)
            if new is not None:
                conn.execute(update(session_context).where(session_context.c.seq == row.seq).values(payload=new))
            self._after_change(conn, user_id, session_id, "context", state.expires_at, now, bump=False)
            return True

        return await self._run(work, write=True)

    async def _delete_context(self, user_id, session_id, entry_id, now):
        def work(conn: Connection) -> bool:
            if self._live_stamp(conn, user_id, session_id, "context", now) is None:
                return False
            return bool(
                conn.execute(
                    delete(session_context).where(
                        *_session(session_context, user_id, session_id), session_context.c.entry_id == entry_id
                    )
                ).rowcount
            )

        return await self._run(work, write=True)

    # session / maintenance
    async def _delete_session(self, user_id, session_id, now):
        def work(conn: Connection) -> bool:
            existed = False
            for kind, table in KIND_TABLES.items():
                live = self._live_stamp(conn, user_id, session_id, kind, now) is not None
                removed = conn.execute(delete(table).where(*_session(table, user_id, session_id))).rowcount
                existed = existed or (live and removed > 0)
            conn.execute(delete(session_state).where(*_session(session_state, user_id, session_id)))
            return existed

        return await self._run(work, write=True)

    async def _sweep(self, now):
        now_ts = now.timestamp()

        def work(conn: Connection) -> int:
            removed = 0
            for kind, table in KIND_TABLES.items():
                dead = select(session_state.c.user_id, session_state.c.session_id).where(
                    session_state.c.kind == kind, session_state.c.expires_at <= now_ts
                )
                removed += conn.execute(delete(table).where(tuple_(table.c.user_id, table.c.session_id).in_(dead))).rowcount
            conn.execute(delete(session_state).where(session_state.c.expires_at <= now_ts))
            return removed

        return await self._run(work, write=True, inline=False)

    async def _prune(self):
        def work(conn: Connection) -> None:
            for table in (qa_entries, session_context, session_state):
                conn.execute(delete(table))

        await self._run(work, write=True, inline=False)
