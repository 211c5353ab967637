"""The SQL cache's statements, built once per dialect with SQLAlchemy Core (see :func:`build_statements`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import BigInteger, Boolean, Float, String, Text, and_, bindparam, case, delete, exists, func, or_, select, true, tuple_, update

from memlab._sqlrun import advisory_key
from memlab.cache._sql.schema import qa_entries, session_context, session_state

TABLES = {"qa": qa_entries, "context": session_context}
#: multi-lock transactions take session-state rows in (user, session, kind) order
KINDS_IN_LOCK_ORDER = tuple(sorted(TABLES))

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


def build_statements(dialect_name: str) -> dict:
    """Every statement the SQL cache runs, with named bind parameters.

    PostgreSQL keeps prepared statements and, once it judges them no worse than
    the custom ones, reuses a *generic* plan made without the parameter values.
    A plain ``user_id = $1 AND session_id = $2 ORDER BY seq DESC LIMIT 10`` is a
    trap there: when statistics say one session (or one user) holds most rows,
    the generic plan walks the ``seq`` primary key backwards filtering rows, and a
    small session's read takes milliseconds (10-13 ms measured for an 11-turn
    session beside a 100,000-turn one of the same user, against ~0.04 ms). So on
    PostgreSQL every predicate selecting one session's rows adds ``user_id BETWEEN
    $1 AND $1``, which the planner estimates as a narrow range (0.5 % of the
    table) whatever the statistics, and ordered results follow the whole index
    key ``(user_id, session_id, seq)``: the generic plan is the session index
    scan, chosen and cached at once. The cache's own connections also force
    generic plans and rule out sequential scans (:data:`PG_SESSION_SETTINGS`), so
    a plan made while the tables are tiny is the index scan too. An earlier form,
    row-value ranges over the index (``(user_id, session_id, seq) > ($1, $2,
    -1) AND (user_id, session_id) <= ($1, $2)``), was as safe but cost the server
    more per read (read-last-10 round trip on a 1,000-turn session: ~73 µs vs
    ~44 µs for this form, ~39 µs for the unsafe plain one).
    ``tests/cache/test_postgres_backend.py`` checks the generic plans.
    """
    pg = dialect_name == "postgresql"
    from sqlalchemy.dialects import postgresql, sqlite

    insert: Callable[..., Any] = postgresql.insert if pg else sqlite.insert

    u, s = bindparam("user_id", type_=String), bindparam("session_id", type_=String)
    st = session_state
    in_state = (st.c.user_id == u, st.c.session_id == s, st.c.kind == bindparam("kind"))

    def session_rows(table, user=u, session=s, after=None):
        """``table``'s rows of one session (with ``seq > after`` when given)."""
        rows = and_(table.c.user_id == user, table.c.session_id == session)
        if pg:  # estimated as a narrow range (0.5 %), not 1/n_distinct(user_id) of the table
            rows = and_(rows, table.c.user_id.between(user, user))
        return rows if after is None else and_(rows, table.c.seq > after)

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
    for kind, table in TABLES.items():
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
    if pg:
        stmts["sweep_try_lock"] = select(func.pg_try_advisory_xact_lock(bindparam("key", type_=BigInteger)))
    stmts.update(_fast_writes(insert, with_restamp=pg))
    return stmts


def _fast_writes(insert, *, with_restamp: bool) -> dict:
    """The common write of each kind as ONE statement.

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

    SQLite takes the first variant only (``with_restamp`` False: it has no data-modifying
    CTEs). There the row lock is moot: one statement in autocommit mode holds the
    database's write lock from its read of the state row to its insert.
    """
    st = session_state
    u, s = bindparam("user_id", type_=String), bindparam("session_id", type_=String)
    fast = {}
    for kind, table in TABLES.items():
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
            ).select_from(locked).where(true())  # SQLite: a WHERE keeps ON CONFLICT from parsing as a join's ON
            stmt = insert(table).from_select(["user_id", "session_id", key, "payload", "created_at"], row)
            if kind == "context":
                stmt = stmt.on_conflict_do_update(
                    index_elements=["user_id", "session_id", "entry_id"], set_={"payload": stmt.excluded.payload}
                )
            return stmt

        quiet = select(st.c.expires_at).where(*mine, live, ~due).with_for_update(key_share=True).cte(f"{kind}_locked")
        fast[f"{kind}_write_fast"] = write_from(quiet)
        if not with_restamp:
            continue

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


