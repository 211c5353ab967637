"""``store.sessions``: ``session_records`` (one row per (session, user)) and ``session_datasets`` (what it read).

A record is ``running`` until ended ``completed`` / ``failed``; a terminal record is
frozen (activity never resurrects it). ``session_datasets`` rows are never deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, func, or_, select, update
from sqlalchemy.sql import ClauseElement

from memlab._clock import Clock
from memlab._sqlrun import DB
from memlab.metadata_tables import session_datasets, session_records
from memlab.models import SessionRecord
from memlab.relational._base import Insert, Repository, Run, binds, when

#: how many ``session_datasets`` rows a store remembers having written before it forgets them all (and writes again)
READS_REMEMBERED = 10_000
#: the columns of a :class:`SessionRecord`, leading every record and usage row
RECORD_COLS = (
    session_records.c.session_id,
    session_records.c.user_id,
    session_records.c.dataset_id,
    session_records.c.status,
    session_records.c.started_at,
    session_records.c.last_activity_at,
    session_records.c.ended_at,
)


def record_fields(row) -> dict[str, Any]:
    """The fields of a row's leading :data:`RECORD_COLS` (shared by :class:`SessionRecord` and ``SessionUsage``)."""
    return {
        "session_id": row[0],
        "user_id": uuid.UUID(row[1]),
        "dataset_id": uuid.UUID(row[2]) if row[2] else None,
        "status": row[3],
        "started_at": when(row[4]),
        "last_activity_at": when(row[5]),
        "ended_at": when(row[6]) if row[6] else None,
    }


def _record(row) -> SessionRecord:
    return SessionRecord(**record_fields(row))


def _touch(insert: Insert) -> ClauseElement:
    """Create a ``running`` record, or (a running one only: terminal rows are frozen) bump it and back-fill its dataset."""
    touch = insert(session_records).values(
        **binds("session_id", "user_id", "dataset_id"),
        status="running",
        started_at=bindparam("now"),
        last_activity_at=bindparam("now"),
        tokens_in=0,
        tokens_out=0,
        cost_usd=0.0,
        embedding_tokens=0,
        embedding_cost_usd=0.0,
        error_count=0,
        unpriced_tokens_in=0,
        unpriced_tokens_out=0,
        unpriced_embedding_tokens=0,
    )
    return touch.on_conflict_do_update(
        index_elements=[session_records.c.session_id, session_records.c.user_id],
        set_={
            "last_activity_at": touch.excluded.last_activity_at,
            "dataset_id": func.coalesce(session_records.c.dataset_id, touch.excluded.dataset_id),
        },
        where=session_records.c.status == "running",
    )


def _ordered_by_start(*where: Any) -> ClauseElement:
    return (
        select(*RECORD_COLS)
        .where(*where)
        .order_by(session_records.c.started_at, session_records.c.user_id, session_records.c.session_id)
    )


class SessionRecordRepository(Repository):
    """Session records: activity, end, and which sessions a delete must clean."""

    def __init__(self, run: Run, clock: Clock) -> None:
        super().__init__(run, clock)
        #: (session, user, dataset) rows of ``session_datasets`` this store wrote (rows are never deleted, so each is
        #: written once per process, not on every turn); bounded: cleared past :data:`READS_REMEMBERED`
        self._reads: set[tuple[str, str, str]] = set()
        #: (session, user) rows this store touched -> whether the row's dataset is known to be set (bounded as ``_reads``)
        self._rows: dict[tuple[str, str], bool] = {}

    @staticmethod
    def statements(insert: Insert) -> dict[str, ClauseElement]:
        of_dataset = session_records.c.dataset_id == bindparam("dataset_id")
        named_default = session_records.c.session_id == bindparam("default_name")
        return {
            # also run by UsageRepository.record, in its transaction
            "session_touch": _touch(insert),
            # a read already recorded changes nothing
            "session_read": insert(session_datasets).values(**binds("session_id", "user_id", "dataset_id")).on_conflict_do_nothing(),
            "session_end": update(session_records)
            .where(session_records.c.session_id == bindparam("session_id"), session_records.c.user_id == bindparam("user_id"))
            .values(status=bindparam("new_status"), ended_at=bindparam("now")),
            "sessions_reading_dataset": select(session_datasets.c.user_id, session_datasets.c.session_id)
            .where(session_datasets.c.dataset_id == bindparam("dataset_id"))
            .order_by(session_datasets.c.user_id, session_datasets.c.session_id),
            "sessions_of_dataset": _ordered_by_start(or_(of_dataset, named_default)),
            "sessions_of_dataset_or_none": _ordered_by_start(or_(of_dataset, session_records.c.dataset_id.is_(None), named_default)),
            "sessions_of_user": select(*RECORD_COLS)
            .where(session_records.c.user_id == bindparam("user_id"))
            .order_by(session_records.c.started_at, session_records.c.session_id),
        }

    async def touch(
        self, user_id: uuid.UUID | str, session_id: str, dataset_id: uuid.UUID | None, *, read: Sequence[uuid.UUID] = (),
        only_new: bool = False,
    ) -> bool:
        """Record activity of (session, user): create a ``running`` row, or bump a running row's ``last_activity_at``.

        A row that is ``completed`` / ``failed`` is never changed (never resurrected);
        a row without a dataset takes ``dataset_id`` when one is given. ``read``: the
        datasets the session's turn reads, kept in ``session_datasets`` (in the same
        transaction). A user id that is not a UUID (not a memlab user) is not recorded.

        ``only_new``: write nothing when this store has already written the row and every
        read in ``read`` (and the row's dataset is set, or none is given), so the touch would
        only move ``last_activity_at``; then False (the caller moves it later, in a write of
        its own). Rows are never deleted, so what this store wrote is still there. True otherwise.
        """
        try:
            user_id = uuid.UUID(str(user_id))
        except ValueError:
            return True
        user, dataset = str(user_id), str(dataset_id) if dataset_id else None
        reads = [key for key in dict.fromkeys((session_id, user, str(item)) for item in read) if key not in self._reads]
        key = (session_id, user)
        if only_new and not reads and key in self._rows and (dataset is None or self._rows[key]):
            return False
        now = self._now()

        def work(db: DB) -> None:
            db.run("session_touch", session_id=session_id, user_id=user, dataset_id=dataset, now=now)
            for _, _, read_id in reads:
                db.run("session_read", session_id=session_id, user_id=user, dataset_id=read_id)

        await self._run(work, write=True)
        if len(self._reads) + len(reads) > READS_REMEMBERED:
            self._reads.clear()
        self._reads.update(reads)
        if len(self._rows) >= READS_REMEMBERED:
            self._rows.clear()
        self._rows[key] = self._rows.get(key, False) or dataset is not None
        return True

    async def end(self, user_id: uuid.UUID, session_id: str, status: str) -> bool:
        """Mark the session ``completed`` / ``failed`` with ``ended_at`` now; False when it has no record."""
        now = self._now()
        changed = await self._run(
            lambda db: db.run("session_end", session_id=session_id, user_id=str(user_id), new_status=status, now=now), write=True
        )
        return changed > 0

    async def reading(self, dataset_id: uuid.UUID) -> list[tuple[str, str]]:
        """``(user_id, session_id)`` of every session whose turns read ``dataset_id`` (``session_datasets``)."""
        rows = await self._run(lambda db: db.rows("sessions_reading_dataset", dataset_id=str(dataset_id)), write=False)
        return [(str(row[0]), str(row[1])) for row in rows]

    async def of_dataset(self, dataset_id: uuid.UUID, default_name: str, *, include_unattributed: bool = False) -> list[SessionRecord]:
        """Sessions attributed to the dataset (its recorded ``dataset_id`` or the name ``default_name``), every user's.

        ``include_unattributed`` adds the sessions recorded without a dataset.
        """
        name = "sessions_of_dataset_or_none" if include_unattributed else "sessions_of_dataset"
        rows = await self._run(lambda db: db.rows(name, dataset_id=str(dataset_id), default_name=default_name), write=False)
        return [_record(row) for row in rows]

    async def of_user(self, user_id: uuid.UUID) -> list[SessionRecord]:
        """The sessions recorded for ``user_id``, oldest first."""
        rows = await self._run(lambda db: db.rows("sessions_of_user", user_id=str(user_id)), write=False)
        return [_record(row) for row in rows]
