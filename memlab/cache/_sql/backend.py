from __future__ import annotations

import importlib.util
import logging
import secrets
from collections.abc import Hashable
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import BigInteger, Boolean, Float, String, Text, and_, bindparam, case, delete, exists, func, or_, select, tuple_, update
from sqlalchemy.engine import make_url

from memlab._sqlrun import DB, advisory_key, is_integrity_error, resolve_url
from memlab.cache._base import DEFAULT_TTL_SECONDS, CacheBackend, PayloadChange
from memlab.cache._sql_schema import qa_entries, session_context, session_state
from memlab.exceptions import ConfigError, SessionQAEntryValidationError
from memlab.ttl import LazySlackTTL

logger = logging.getLogger("memlab.cache")

_DEAD_CURSOR = ("dead",)
_TABLES = {"qa": qa_entries, "context": session_context}
#: multi-lock transactions take session-state rows in (user, session, kind) order
_KINDS_IN_LOCK_ORDER = tuple(sorted(_TABLES))

#: ``pg_try_advisory_xact_lock`` key guarding the global sweep on PostgreSQL: one
#: sweeper per database at a time; the others skip (it is only housekeeping)
SWEEP_LOCK_KEY = advisory_key("memlab.cache.sweep")

#: PostgreSQL session settings of the cache's connections. Every statement the
#: cache runs selects rows through an index prefix; left to itself, PostgreSQL
#: plans a prepared statement from the table statistics of the moment: on a
#: small or freshly vacuumed table a sequential scan plus a sort, kept as the
#: table grows (read-last-10 at 300 rows: 0.3-0.4 ms of server time instead of
#: 0.03 ms), or a fresh custom plan on every execution (~0.1 ms of server CPU
#: each). Without sequential scans, one generic plan per statement is the index
#: scan whatever the table size, made once per connection.
PG_SESSION_SETTINGS = {"enable_seqscan": "off", "plan_cache_mode": "force_generic_plan"}


def _dt(stamp: float | None) -> datetime | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, timezone.utc)


def _new_epoch() -> int:
    return secrets.randbits(62)


def build_statements(dialect_name: str) -> dict:
    """Every statement the SQL cache runs, with named bind parameters.

    PostgreSQL keeps prepared statements and, once it judges them no worse than
    the custom ones, reuses a *generic* plan made without the parameter values. A
    plain ``user_id = $1 AND session_id = $2 ORDER BY seq DESC LIMIT $3`` is a bad
    fit either way: its generic plan looks costlier, so it is re-planned on every
    execution (read-last-10 measured 0.36 ms vs 0.19 ms for a literal-LIMIT
    query), and when statistics say one session holds most rows the generic plan
    becomes a scan of the whole table (28 ms instead of 0.2 ms for a small session
    beside a 100,000-turn one). So on PostgreSQL every predicate selecting one
    session's rows is a range over the leading columns of that table's index,
    ``(user_id, session_id, k) > ($1, $2, floor) AND (user_id, session_id) <= ($1,
    $2)`` (the scan starts and stops exactly at the session), plus ``user_id
    BETWEEN $1 AND $1`` (estimated as a narrow range), and ordered results follow
    the index key: the generic plan is the index scan, chosen and cached at once
    (0.23 ms). The cache's own connections also force generic plans and rule
    out sequential scans (:data:`PG_SESSION_SETTINGS`), so a plan
    made while the tables are tiny is the index scan too.
    ``tests/cache/test_postgres_backend.py`` checks the generic plans.
    """
    pg = dialect_name == "postgresql"
    if pg:
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert

    u, s = bindparam("user_id", type_=String), bindparam("session_id", type_=String)
    st = session_state
    in_state = (st.c.user_id == u, st.c.session_id == s, st.c.kind == bindparam("kind"))

    def session_rows(table, user=u, session=s, after=None):
        """``table``'s rows of one session (with ``seq > after`` when given)."""
        if not pg:
            rows = and_(table.c.user_id == user, table.c.session_id == session)
            return rows if after is None else and_(rows, table.c.seq > after)
        # the index column after (user_id, session_id), and a value below all of its own:
        # qa (user_id, session_id, seq) with seq >= 1; state (user_id, session_id, kind);
        # context unique (user_id, session_id, entry_id), entry ids never empty
        third, floor = (table.c.seq, -1) if table is qa_entries else (table.c.kind if table is st else table.c.entry_id, "")
        if after is not None:
            floor = after
        return and_(
            tuple_(table.c.user_id, table.c.session_id, third) > tuple_(user, session, floor),  # index start
            tuple_(table.c.user_id, table.c.session_id) <= tuple_(user, session),  # index stop
            table.c.user_id.between(user, user),  # estimated as a narrow range (0.5 %), not 1/9 of the table
        )

    def in_index_order(table, *, descending=False):
        keys = (table.c.user_id, table.c.session_id, table.c.seq) if pg else (table.c.seq,)
        return [key.desc() for key in keys] if descending else list(keys)

    def live(kind: str):
        return exists().where(
            st.c.user_id == u,
            st.c.session_id == s,
            st.c.kind == kind,
            or_(st.c.expires_at.is_(None), st.c.expires_at > bindparam("now")),
        )

    stmts = {
        "state_lock": select(st.c.expires_at, st.c.epoch).where(*in_state).with_for_update(),
        "state_create": insert(st)
        .values(user_id=u, session_id=s, kind=bindparam("kind"), expires_at=None, epoch=bindparam("epoch"))
        .on_conflict_do_nothing(),
        "state_update": update(st).where(*in_state).values(expires_at=bindparam("expires_at"), epoch=bindparam("epoch")),
        "state_delete_session": delete(st).where(session_rows(st)),
        # the sweep locks dead state rows first, in the same order every other transaction uses
        "sweep_lock": select(st.c.user_id)
        .where(st.c.expires_at <= bindparam("now"))
        .order_by(st.c.user_id, st.c.session_id, st.c.kind)
        .with_for_update(),
        "sweep_state": delete(st).where(st.c.expires_at <= bindparam("now")),
    }
    for kind, table in _TABLES.items():
        key = table.c.qa_id if kind == "qa" else table.c.entry_id
        mine = session_rows(table)
        exact = (table.c.user_id == u, table.c.session_id == s, key == bindparam("key"))  # a unique-index lookup
        dead = select(st.c.user_id, st.c.session_id).where(st.c.kind == kind, st.c.expires_at <= bindparam("now"))
        stmts.update(
            {
                f"{kind}_purge": delete(table).where(mine),
                f"{kind}_all": select(table.c.payload)
                .where(mine, live(kind))
                .order_by(*(in_index_order(table) if kind == "qa" else [table.c.seq])),
                f"{kind}_get": select(table.c.seq, table.c.payload).where(*exact).with_for_update(),
                f"{kind}_set": update(table).where(table.c.seq == bindparam("seq")).values(payload=bindparam("payload")),
                f"{kind}_delete": delete(table).where(*exact),
                f"{kind}_sweep": delete(table).where(tuple_(table.c.user_id, table.c.session_id).in_(dead)),
                f"{kind}_prune": delete(table),
            }
        )
    qa = qa_entries
    ctx_insert = insert(session_context).values(
        user_id=u, session_id=s, entry_id=bindparam("key"), payload=bindparam("payload"), created_at=bindparam("created_at")
    )
    after_cursor = case(
        (st.c.epoch == bindparam("cursor_epoch", type_=BigInteger), bindparam("after", type_=BigInteger)), else_=-1
    )
    stmts.update(
        {
            "qa_insert": qa.insert().values(
                user_id=u, session_id=s, qa_id=bindparam("key"), payload=bindparam("payload"), created_at=bindparam("created_at")
            ),
            "qa_last_n": select(qa.c.payload)
            .where(session_rows(qa), live("qa"))
            .order_by(*in_index_order(qa, descending=True))
            .limit(bindparam("last_n")),
            # one statement: the live state's epoch, and the rows after the cursor when the
            # cursor's epoch still matches (else all rows); no row at all = dead or missing
            "qa_log": select(st.c.epoch, qa.c.seq, qa.c.payload)
            .select_from(
                st.outerjoin(qa, session_rows(qa, user=st.c.user_id, session=st.c.session_id, after=after_cursor))
            )
            .where(
                st.c.user_id == u,
                st.c.session_id == s,
                st.c.kind == "qa",
                or_(st.c.expires_at.is_(None), st.c.expires_at > bindparam("now")),
            )
            .order_by(*in_index_order(qa)),
            "context_upsert": ctx_insert.on_conflict_do_update(
                index_elements=["user_id", "session_id", "entry_id"], set_={"payload": ctx_insert.excluded.payload}
            ),
        }
    )
    if dialect_name == "postgresql":
        stmts["sweep_try_lock"] = select(func.pg_try_advisory_xact_lock(bindparam("key", type_=BigInteger)))
        stmts.update(_postgres_fast_writes(insert))
    return stmts


def _postgres_fast_writes(insert) -> dict:
    """The common write of each kind as ONE statement (PostgreSQL only).

    ``WITH locked AS (SELECT ... FROM cache_session_state ... FOR NO KEY UPDATE)``
    takes the live session's state-row lock (it conflicts with the general path's
    ``FOR UPDATE``); the INSERT reads its row from ``locked``, so ``seq`` is drawn
    only once the lock is held and seq order equals commit order within a session
    (what ``read_qa_log`` cursors rely on). Two variants:

    * ``{kind}_write_fast``: writes only when no re-stamp is due (``ttl_on`` and
      the stored expiry lags ``cutoff``), so the state row is locked, never
      rewritten. Used with expiry off and by policies with slack (``lazy_slack``:
      a re-stamp is due once per slack window).
    * ``{kind}_write_fast_restamp``: also sets ``new_expiry`` when due, in a
      second CTE. Used when the cutoff is the new expiry (``sliding``), which
      re-stamps on every write.

    No row is written when the state is missing or dead (or, in the first
    variant, a re-stamp is due): the row count is 0 and the caller runs the full
    transaction (create / scoped purge / re-stamp).
    """
    st = session_state
    u, s = bindparam("user_id", type_=String), bindparam("session_id", type_=String)
    fast = {}
    for kind, table in _TABLES.items():
        mine = (st.c.user_id == u, st.c.session_id == s, st.c.kind == kind)
        live = or_(st.c.expires_at.is_(None), st.c.expires_at > bindparam("now", type_=Float))
        due = and_(
            bindparam("ttl_on", type_=Boolean),
            or_(st.c.expires_at.is_(None), st.c.expires_at < bindparam("cutoff", type_=Float)),
        )
        key = "qa_id" if kind == "qa" else "entry_id"

        def write_from(locked):
            row = select(
                u,
                s,
                bindparam("key", type_=String),
                bindparam("payload", type_=Text),
                bindparam("created_at", type_=Float),
            ).select_from(locked)
            stmt = insert(table).from_select(["user_id", "session_id", key, "payload", "created_at"], row)
            if kind == "context":
                stmt = stmt.on_conflict_do_update(
                    index_elements=["user_id", "session_id", "entry_id"], set_={"payload": stmt.excluded.payload}
                )
            return stmt

        quiet = select(st.c.expires_at).where(*mine, live, ~due).with_for_update(key_share=True).cte(f"{kind}_locked")
        fast[f"{kind}_write_fast"] = write_from(quiet)

        locked = select(st.c.expires_at).where(*mine, live).with_for_update(key_share=True).cte(f"{kind}_locked")
        lagging = select(locked.c.expires_at).where(
            or_(locked.c.expires_at.is_(None), locked.c.expires_at < bindparam("cutoff", type_=Float))
        )
        restamp = (
            update(st)
            .where(*mine, bindparam("ttl_on", type_=Boolean), lagging.exists())
            .values(expires_at=bindparam("new_expiry", type_=Float))
            .cte(f"{kind}_restamp")
        )
        fast[f"{kind}_write_fast_restamp"] = write_from(locked).add_cte(restamp)
    return fast


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
        if dialect == "sqlite":
            if not parsed.database or parsed.database == ":memory:":
                raise ConfigError(f"SQLCache needs a database file path, got {self.display_url!r}")
            self.name = "sqlite"
            self.path = Path(parsed.database)
        else:
            if importlib.util.find_spec("asyncpg") is None:
                raise ImportError("the postgres cache needs asyncpg: pip install 'memlab[postgres]'")
            self.name = "postgres"
            self.path = None
        self._pg_options = {"pool_size": pool_size, "connect_timeout": connect_timeout, "command_timeout": command_timeout}
        self._runner = None

    def __repr__(self) -> str:
        return f"SQLCache({self.display_url!r}, ttl={self.ttl.name}:{self.ttl.seconds})"

    # lifecycle
    async def _open(self) -> None:
        from memlab._sqlrun import PostgresRunner, SQLiteRunner
        from memlab.migrations import upgrade_connection

        statements = build_statements(self.dialect)
        if self.dialect == "sqlite":
            runner = SQLiteRunner(self.path, statements)
        else:
            runner = PostgresRunner(self.url, statements, server_settings=PG_SESSION_SETTINGS, **self._pg_options)
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
        """PostgreSQL's one-statement write; False when the general path must run."""
        if self.dialect != "postgresql":
            return False
        variant, ttl = self._fast_ttl(now)
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
                expires_at=self.ttl.expiry_after_write(now).timestamp() if restamp else expires_at,
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
        ours = isinstance(cursor, tuple) and len(cursor) == 2 and all(type(part) is int for part in cursor)
        rows = await self._execute(
            "qa_log",
            write=False,
            user_id=user_id,
            session_id=session_id,
            now=now.timestamp(),
            cursor_epoch=cursor[0] if ours else None,
            after=cursor[1] if ours else -1,
        )
        if not rows:
            return _DEAD_CURSOR, [], True
        epoch = rows[0][0]
        incremental = ours and cursor[0] == epoch
        after = cursor[1] if incremental else -1
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
            for kind in _KINDS_IN_LOCK_ORDER:
                live = self._live_state(db, user_id, session_id, kind, now) is not None
                removed = db.run(f"{kind}_purge", user_id=user_id, session_id=session_id)
                existed = existed or (live and removed > 0)
            db.run("state_delete_session", user_id=user_id, session_id=session_id)
            return existed

        return await self._run(work, write=True)

    async def _sweep(self, now):
        stamp = now.timestamp()

        def work(db: DB) -> int:
            if self.dialect == "postgresql" and not db.first("sweep_try_lock", key=SWEEP_LOCK_KEY)[0]:
                logger.debug("postgres cache sweep skipped: another process is sweeping")
                return 0
            if not db.rows("sweep_lock", now=stamp):  # locks the dead sessions' state rows
                return 0
            removed = sum(db.run(f"{kind}_sweep", now=stamp) for kind in _TABLES)
            db.run("sweep_state", now=stamp)
            return removed

        return await self._run(work, write=True, inline=False)

    async def _prune(self):
        def work(db: DB) -> None:
            for kind in _TABLES:
                db.run(f"{kind}_prune")
            db.raw("DELETE FROM cache_session_state")

        await self._run(work, write=True, inline=False)
