"""``store.usage``: the usage counters of ``session_records`` and the per-model ``session_model_usage`` rows.

A record's counters and per-model rows move only while it is ``running``. Reads
apply the seed's visibility rule and compute ``abandoned`` (see :mod:`memlab.usage`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from sqlalchemy import String, Text, and_, bindparam, case, func, or_, select, union, update
from sqlalchemy.sql import ClauseElement

from memlab._sqlrun import DB
from memlab.metadata_tables import dataset_permissions, datasets, session_model_usage, session_records, users
from memlab.models import ModelUsage, SessionUsage, User
from memlab.relational._base import Insert, Repository, binds, when
from memlab.relational._sessions import RECORD_COLS, record_fields

if TYPE_CHECKING:
    from memlab.llm import CallUsage

#: columns a session list may be ordered by (``stack.usage.list_sessions(order_by=...)``)
SESSION_ORDER_COLUMNS = ("last_activity_at", "started_at", "ended_at", "cost_usd", "tokens_in", "tokens_out")
#: effective statuses of a session record, in the order :meth:`UsageRepository.stats` counts them
SESSION_STATUSES = ("running", "completed", "failed", "abandoned")
#: a session record's usage counters: listed by the usage reads, summed by :meth:`UsageRepository.stats`
_COUNTERS = (
    session_records.c.tokens_in,
    session_records.c.tokens_out,
    session_records.c.cost_usd,
    session_records.c.unpriced_tokens_in,
    session_records.c.unpriced_tokens_out,
    session_records.c.embedding_tokens,
    session_records.c.embedding_cost_usd,
    session_records.c.unpriced_embedding_tokens,
    session_records.c.error_count,
)
_USAGE_COLS = (*RECORD_COLS, *_COUNTERS, session_records.c.last_model)
#: ``running`` older than the cutoff reads as ``abandoned`` (computed, never stored; strict ``<``)
_effective = case(
    (and_(session_records.c.status == "running", session_records.c.last_activity_at < bindparam("cutoff")), "abandoned"),
    else_=session_records.c.status,
)
_readable = union(
    select(datasets.c.id).where(datasets.c.owner_id.in_([bindparam("caller"), bindparam("parent")])),
    select(dataset_permissions.c.dataset_id).where(
        dataset_permissions.c.user_id.in_([bindparam("caller"), bindparam("parent")]), dataset_permissions.c.permission == "read"
    ),
)
#: the seed's visibility: the caller's sessions, its agents' (parent_user_id = caller), sessions of datasets it may read
_visible = or_(
    session_records.c.user_id == bindparam("caller"),
    session_records.c.user_id.in_(select(users.c.id).where(users.c.parent_user_id == bindparam("caller"))),
    session_records.c.dataset_id.in_(_readable),
)
_listed = and_(_visible, or_(bindparam("status", type_=String).is_(None), _effective == bindparam("status", type_=String)))
_active = session_records.c.last_activity_at >= bindparam("since")
_by_status = [func.sum(case((_effective == status, 1), else_=0)) for status in SESSION_STATUSES]
_MODEL_COLS = (
    session_model_usage.c.model,
    session_model_usage.c.kind,
    session_model_usage.c.calls,
    session_model_usage.c.tokens_in,
    session_model_usage.c.tokens_out,
    session_model_usage.c.cost_usd,
    session_model_usage.c.usage_source,
    session_model_usage.c.updated_at,
    session_model_usage.c.unpriced_tokens_in,
    session_model_usage.c.unpriced_tokens_out,
)
_joined = session_model_usage.join(
    session_records,
    and_(session_model_usage.c.session_id == session_records.c.session_id, session_model_usage.c.user_id == session_records.c.user_id),
)


def _listing_name(column: str, descending: bool) -> str:
    return f"usage_list_{column}_{'desc' if descending else 'asc'}"


def _listing(column: str, descending: bool) -> ClauseElement:
    order = getattr(session_records.c, column)
    order = order.desc() if descending else order.asc()
    tie = session_records.c.session_id.desc() if descending else session_records.c.session_id.asc()
    return select(*_USAGE_COLS, _effective).where(_listed).order_by(order, tie).limit(bindparam("limit")).offset(bindparam("offset"))


def _model_upsert(insert: Insert) -> ClauseElement:
    """Add calls to a (session, user, model, kind) row: tokens, the priced calls' cost, the unpriced calls' tokens."""
    row = insert(session_model_usage).values(
        **binds(
            "session_id", "user_id", "model", "kind", "calls", "tokens_in", "tokens_out", "cost_usd", "usage_source",
            "unpriced_tokens_in", "unpriced_tokens_out",
        ),
        updated_at=bindparam("now"),
    )
    return row.on_conflict_do_update(
        index_elements=[session_model_usage.c.session_id, session_model_usage.c.user_id, session_model_usage.c.model, session_model_usage.c.kind],
        set_={
            "calls": session_model_usage.c.calls + row.excluded.calls,
            "tokens_in": session_model_usage.c.tokens_in + row.excluded.tokens_in,
            "tokens_out": session_model_usage.c.tokens_out + row.excluded.tokens_out,
            "cost_usd": func.coalesce(session_model_usage.c.cost_usd, 0.0) + row.excluded.cost_usd,
            "unpriced_tokens_in": session_model_usage.c.unpriced_tokens_in + row.excluded.unpriced_tokens_in,
            "unpriced_tokens_out": session_model_usage.c.unpriced_tokens_out + row.excluded.unpriced_tokens_out,
            "usage_source": case(
                (session_model_usage.c.usage_source == row.excluded.usage_source, session_model_usage.c.usage_source),
                else_="mixed",
            ),
            "updated_at": row.excluded.updated_at,
        },
    )


def _visibility(caller: User, cutoff: str) -> dict[str, str]:
    """The bind parameters of the visibility rule: the caller, the parent it acts for (itself when none), the abandon cutoff."""
    return {"caller": str(caller.id), "parent": str(caller.parent_user_id or caller.id), "cutoff": cutoff}


def _usage(row) -> SessionUsage:
    return SessionUsage(
        **record_fields(row),
        tokens_in=row[7],
        tokens_out=row[8],
        cost_usd=row[9],
        unpriced_tokens_in=row[10],
        unpriced_tokens_out=row[11],
        embedding_tokens=row[12],
        embedding_cost_usd=row[13],
        unpriced_embedding_tokens=row[14],
        error_count=row[15],
        last_model=row[16],
        effective_status=row[17],
    )


def _model_usage(row) -> ModelUsage:
    return ModelUsage(
        model=row[0],
        kind=row[1],
        calls=row[2],
        tokens_in=row[3],
        tokens_out=row[4],
        cost_usd=row[5] or 0.0,
        unpriced_tokens_in=row[8],
        unpriced_tokens_out=row[9],
        usage_source=row[6],
        updated_at=when(row[7]),
    )


class UsageRepository(Repository):
    """Sessions' token and cost usage: recorded per turn, read as the caller may see it."""

    @staticmethod
    def statements(insert: Insert) -> dict[str, ClauseElement]:
        listings = {
            _listing_name(column, descending): _listing(column, descending) for column in SESSION_ORDER_COLUMNS for descending in (True, False)
        }
        return {
            **listings,
            "usage_count": select(func.count()).select_from(session_records).where(_listed),
            "usage_get": select(*_USAGE_COLS, _effective)
            .where(session_records.c.session_id == bindparam("session_id"), _visible)
            .order_by(
                case((session_records.c.user_id == bindparam("caller"), 0), else_=1),
                session_records.c.last_activity_at.desc(),
                session_records.c.user_id,
            )
            .limit(1),
            "usage_models": select(*_MODEL_COLS)
            .where(session_model_usage.c.session_id == bindparam("session_id"), session_model_usage.c.user_id == bindparam("user_id"))
            .order_by(session_model_usage.c.kind, session_model_usage.c.model),
            "usage_stats": select(func.count(), *(func.coalesce(func.sum(column), 0) for column in _COUNTERS), *_by_status)
            .select_from(session_records)
            .where(_visible, _active),
            "usage_cost_by_model": select(
                session_model_usage.c.model,
                session_model_usage.c.kind,
                func.count(),
                func.sum(session_model_usage.c.calls),
                func.sum(session_model_usage.c.tokens_in),
                func.sum(session_model_usage.c.tokens_out),
                func.coalesce(func.sum(session_model_usage.c.cost_usd), 0.0),
                func.sum(session_model_usage.c.unpriced_tokens_in),
                func.sum(session_model_usage.c.unpriced_tokens_out),
            )
            .select_from(_joined)
            .where(_visible, _active)
            .group_by(session_model_usage.c.model, session_model_usage.c.kind)
            .order_by(session_model_usage.c.kind, session_model_usage.c.model),
            # counters move only on a running row (a terminal row is frozen); record() gates the per-model rows on it too
            "usage_accumulate": update(session_records)
            .where(
                session_records.c.session_id == bindparam("session_id"),
                session_records.c.user_id == bindparam("user_id"),
                session_records.c.status == "running",
            )
            .values(
                tokens_in=session_records.c.tokens_in + bindparam("add_in"),
                tokens_out=session_records.c.tokens_out + bindparam("add_out"),
                cost_usd=session_records.c.cost_usd + bindparam("add_cost"),
                unpriced_tokens_in=session_records.c.unpriced_tokens_in + bindparam("add_unpriced_in"),
                unpriced_tokens_out=session_records.c.unpriced_tokens_out + bindparam("add_unpriced_out"),
                embedding_tokens=session_records.c.embedding_tokens + bindparam("add_embedding"),
                embedding_cost_usd=session_records.c.embedding_cost_usd + bindparam("add_embedding_cost"),
                unpriced_embedding_tokens=session_records.c.unpriced_embedding_tokens + bindparam("add_unpriced_embedding"),
                error_count=session_records.c.error_count + bindparam("add_errors"),
                last_model=func.coalesce(bindparam("model", type_=Text), session_records.c.last_model),
            ),
            "usage_model_upsert": _model_upsert(insert),
        }

    async def record(self, user_id: uuid.UUID, session_id: str, dataset_id: uuid.UUID | None, calls: Sequence["CallUsage"]) -> bool:
        """Add ``calls`` to the session's record and its per-model rows, in one transaction; False when it added nothing.

        The record is created (``running``) when missing, by the sessions repository's
        ``session_touch`` statement; its counters and its per-model rows move only while
        it is ``running``: after ``end()`` nothing moves (False), so the record, the
        per-model rows and every aggregate keep agreeing (unlike SPEC §8).
        """
        now = self._now()
        user, dataset = str(user_id), str(dataset_id) if dataset_id else None
        llm = [call for call in calls if call.kind == "llm"]
        embedding = [call for call in calls if call.kind == "embedding"]
        totals = {
            "add_in": sum(call.tokens_in for call in llm),
            "add_out": sum(call.tokens_out for call in llm),
            "add_cost": sum(call.cost_usd for call in llm if call.cost_usd is not None),
            "add_unpriced_in": sum(call.tokens_in for call in llm if call.cost_usd is None),
            "add_unpriced_out": sum(call.tokens_out for call in llm if call.cost_usd is None),
            "add_embedding": sum(call.tokens_in for call in embedding),
            "add_embedding_cost": sum(call.cost_usd for call in embedding if call.cost_usd is not None),
            "add_unpriced_embedding": sum(call.tokens_in for call in embedding if call.cost_usd is None),
            "add_errors": sum(1 for call in calls if call.error),
            "model": llm[-1].model if llm else None,
        }
        per_model: dict[tuple[str, str], list["CallUsage"]] = {}
        for call in calls:
            per_model.setdefault((call.model, call.kind), []).append(call)

        def work(db: DB) -> bool:
            db.run("session_touch", session_id=session_id, user_id=user, dataset_id=dataset, now=now)
            if not db.run("usage_accumulate", session_id=session_id, user_id=user, **totals):
                return False  # ended: frozen
            for (model, kind), group in per_model.items():
                sources = {call.source for call in group}
                unpriced = [call for call in group if call.cost_usd is None]
                db.run(
                    "usage_model_upsert",
                    session_id=session_id,
                    user_id=user,
                    model=model,
                    kind=kind,
                    calls=len(group),
                    tokens_in=sum(call.tokens_in for call in group),
                    tokens_out=sum(call.tokens_out for call in group),
                    cost_usd=sum(call.cost_usd for call in group if call.cost_usd is not None),
                    unpriced_tokens_in=sum(call.tokens_in for call in unpriced),
                    unpriced_tokens_out=sum(call.tokens_out for call in unpriced),
                    usage_source=sources.pop() if len(sources) == 1 else "mixed",
                    now=now,
                )
            return True

        return await self._run(work, write=True)

    async def page(
        self, caller: User, *, status: str | None, order_by: str, descending: bool, limit: int, offset: int, cutoff: str
    ) -> tuple[list[SessionUsage], int]:
        """One page of the sessions visible to ``caller`` and their total count (see :mod:`memlab.usage`)."""
        seen = _visibility(caller, cutoff) | {"status": status}
        name = _listing_name(order_by, descending)

        def work(db: DB) -> tuple[list[SessionUsage], int]:
            rows = db.rows(name, limit=limit, offset=offset, **seen)
            total = cast(tuple, db.first("usage_count", **seen))[0]
            return [_usage(row) for row in rows], total

        return await self._run(work, write=False)

    async def get(self, caller: User, session_id: str, cutoff: str) -> SessionUsage | None:
        """The visible session called ``session_id`` (the caller's own first, then the most recently active), with its models."""
        seen = _visibility(caller, cutoff)

        def work(db: DB) -> SessionUsage | None:
            row = db.first("usage_get", session_id=session_id, **seen)
            if row is None:
                return None
            found = _usage(row)
            found.models = [_model_usage(model) for model in db.rows("usage_models", session_id=session_id, user_id=row[1])]
            return found

        return await self._run(work, write=False)

    async def models(self, session_id: str, user_id: uuid.UUID) -> list[ModelUsage]:
        """The per-model rows of (session, user), llm first."""
        rows = await self._read("usage_models", session_id=session_id, user_id=str(user_id))
        return [_model_usage(row) for row in rows]

    async def stats(self, caller: User, since: str, cutoff: str) -> tuple:
        """``(sessions, token and cost sums..., per-status counts...)`` over the visible sessions active since ``since``."""
        return tuple((await self._read("usage_stats", since=since, **_visibility(caller, cutoff)))[0])

    async def cost_by_model(self, caller: User, since: str, cutoff: str) -> list[tuple]:
        """``(model, kind, sessions, calls, tokens in, tokens out, priced cost sum, unpriced tokens in, unpriced tokens out)`` per model."""
        return await self._read("usage_cost_by_model", since=since, **_visibility(caller, cutoff))
