"""memlab's own metadata database: ``{data_root}/memlab.db``.

Users, datasets, dataset permissions, documents (``data``, with their text so a
dataset can be re-cognified), ``pipeline_runs``, ``session_records`` (one row per
(session, user): the dataset the session is attributed to, its status, activity
times and usage counters; touched on every stored turn), ``session_model_usage``
(per model) and ``api_keys``. Small tables; the same inline SQLite runner as the
cache. The schema is Alembic-managed (:data:`memlab.migrations.METADATA`): a fresh
database is created at head inside one ``BEGIN IMMEDIATE`` transaction (so many
processes opening a fresh data root at once serialise on it), and an older
memlab.db is adopted and upgraded in place on open.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from sqlalchemy import (
    String,
    Text,
    bindparam,
    delete,
    and_,
    case,
    exists,
    func,
    or_,
    select,
    union,
    update,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.sql import ClauseElement

from memlab._sqlrun import DB, PostgresRunner, SQLiteRunner, is_connection_error, is_integrity_error, resolve_url
from memlab.exceptions import BackendError, ConfigError, MemlabError, StackStateError, ValidationError
from memlab.metadata_tables import (
    api_keys,
    data,
    dataset_permissions,
    datasets,
    pipeline_runs,
    session_datasets,
    session_model_usage,
    session_records,
    users,
)
from memlab.migrations import METADATA, upgrade_connection
from memlab.models import DataRecord, Dataset, ModelUsage, PipelineRun, SessionRecord, SessionUsage, User

if TYPE_CHECKING:
    from memlab.llm import CallUsage

T = TypeVar("T")

#: how many ``session_datasets`` rows a store remembers having written before it forgets them all (and writes again)
READS_REMEMBERED = 10_000
#: ``pipeline_runs.pipeline_name`` of a remember() run's staging step (records documents, builds nothing)
ADD_PIPELINE = "add_pipeline"
#: ``pipeline_runs.pipeline_name`` of the step that builds a dataset's graph
COGNIFY_PIPELINE = "cognify_pipeline"

_USER_COLS = (users.c.id, users.c.name, users.c.parent_user_id, users.c.is_default, users.c.created_at)
_DATASET_COLS = (datasets.c.id, datasets.c.name, datasets.c.owner_id, datasets.c.created_at)
_DATA_COLS = (
    data.c.id,
    data.c.dataset_id,
    data.c.name,
    data.c.source,
    data.c.extension,
    data.c.content_hash,
    data.c.size_bytes,
    data.c.tags,
    data.c.created_at,
)
_RUN_COLS = tuple(pipeline_runs.c)
_RECORD_COLS = (
    session_records.c.session_id,
    session_records.c.user_id,
    session_records.c.dataset_id,
    session_records.c.status,
    session_records.c.started_at,
    session_records.c.last_activity_at,
    session_records.c.ended_at,
)


def _binds(*names: str) -> dict[str, Any]:
    """``{name: bindparam(name)}``: the values of a statement whose columns take bind parameters of the same names."""
    return {name: bindparam(name) for name in names}


def _session_touch(insert: Callable[..., Any]) -> ClauseElement:
    """Create a ``running`` record, or (a running one only: terminal rows are frozen) bump it and back-fill its dataset."""
    touch = insert(session_records).values(
        **_binds("session_id", "user_id", "dataset_id"),
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
    )
    return touch.on_conflict_do_update(
        index_elements=[session_records.c.session_id, session_records.c.user_id],
        set_={
            "last_activity_at": touch.excluded.last_activity_at,
            "dataset_id": func.coalesce(session_records.c.dataset_id, touch.excluded.dataset_id),
        },
        where=session_records.c.status == "running",
    )


def _session_read(insert: Callable[..., Any]) -> ClauseElement:
    """Record that a session read a dataset (nothing when it is recorded already)."""
    return insert(session_datasets).values(**_binds("session_id", "user_id", "dataset_id")).on_conflict_do_nothing()


def _data_insert(insert: Callable[..., Any]) -> ClauseElement:
    """Store a document; one whose content hash the dataset already holds is skipped (two writers may race on PostgreSQL)."""
    return (
        insert(data)
        .values(**_binds("id", "dataset_id", "name", "source", "extension", "content_hash", "size_bytes", "tags", "text", "created_at"))
        .on_conflict_do_nothing()
    )


def _permission_insert(insert: Callable[..., Any]) -> ClauseElement:
    """Grant a permission; granting it again changes nothing."""
    return (
        insert(dataset_permissions)
        .values(**_binds("dataset_id", "user_id", "permission"))
        .on_conflict_do_nothing()
    )


#: content hashes per ``data_by_hashes`` query (statements are compiled once, so the IN list has a fixed size)
_HASH_CHUNK = 100
_building = (pipeline_runs.c.dataset_id == bindparam("dataset_id"), pipeline_runs.c.pipeline_name != bindparam("staging"))

STATEMENTS: dict[str, ClauseElement] = {
    "user_insert": users.insert().values(**_binds("id", "name", "parent_user_id", "is_default", "created_at")),
    "user_by_id": select(*_USER_COLS).where(users.c.id == bindparam("id")),
    "user_default": select(*_USER_COLS).where(users.c.is_default.is_(True)),
    "dataset_insert": datasets.insert().values(**_binds("id", "name", "owner_id", "created_at")),
    "dataset_by_name": select(*_DATASET_COLS).where(datasets.c.owner_id == bindparam("owner_id"), datasets.c.name == bindparam("name")),
    "dataset_by_id": select(*_DATASET_COLS).where(datasets.c.id == bindparam("id")),
    "datasets_of_owner": select(*_DATASET_COLS).where(datasets.c.owner_id == bindparam("owner_id")).order_by(datasets.c.created_at),
    "datasets_granted": select(*_DATASET_COLS)
    .join(dataset_permissions, dataset_permissions.c.dataset_id == datasets.c.id)
    .where(dataset_permissions.c.user_id == bindparam("user_id"), dataset_permissions.c.permission == bindparam("permission"))
    .order_by(datasets.c.created_at),
    "dataset_delete": delete(datasets).where(datasets.c.id == bindparam("id")),
    "permission_insert": _permission_insert(sqlite_insert),
    "permissions_of": select(dataset_permissions.c.permission).where(
        dataset_permissions.c.dataset_id == bindparam("dataset_id"), dataset_permissions.c.user_id == bindparam("user_id")
    ),
    "permissions_delete": delete(dataset_permissions).where(dataset_permissions.c.dataset_id == bindparam("dataset_id")),
    "data_insert": _data_insert(sqlite_insert),
    "data_by_hash": select(data.c.id).where(data.c.dataset_id == bindparam("dataset_id"), data.c.content_hash == bindparam("content_hash")),
    "data_by_hashes": select(data.c.content_hash, data.c.id).where(
        data.c.dataset_id == bindparam("dataset_id"), data.c.content_hash.in_([bindparam(f"h{i}") for i in range(_HASH_CHUNK)])
    ),
    "data_by_id": select(*_DATA_COLS).where(data.c.dataset_id == bindparam("dataset_id"), data.c.id == bindparam("id")),
    "data_of_dataset": select(*_DATA_COLS).where(data.c.dataset_id == bindparam("dataset_id")).order_by(data.c.created_at, data.c.id),
    "data_count": select(func.count()).select_from(data).where(data.c.dataset_id == bindparam("dataset_id")),
    "data_delete": delete(data).where(data.c.dataset_id == bindparam("dataset_id"), data.c.id == bindparam("id")),
    "data_delete_all": delete(data).where(data.c.dataset_id == bindparam("dataset_id")),
    "run_insert": pipeline_runs.insert().values(**_binds("id", "dataset_id", "pipeline_name", "status", "data_count", "started_at")),
    "run_finish": update(pipeline_runs)
    .where(pipeline_runs.c.id == bindparam("id"))
    .values(**_binds("status", "error_class", "error_message", "finished_at")),
    "run_latest_build": select(*_RUN_COLS)
    .where(*_building)
    .order_by(pipeline_runs.c.started_at.desc(), pipeline_runs.c.id.desc())
    .limit(1),
    "build_summary": select(
        select(func.count()).select_from(data).where(data.c.dataset_id == bindparam("dataset_id")).scalar_subquery(),
        exists().where(pipeline_runs.c.dataset_id == bindparam("dataset_id")),
        exists().where(*_building, pipeline_runs.c.status == "completed"),
    ),
    "runs_of_dataset": select(*_RUN_COLS)
    .where(pipeline_runs.c.dataset_id == bindparam("dataset_id"))
    .order_by(pipeline_runs.c.started_at, pipeline_runs.c.id),
    "runs_delete": delete(pipeline_runs).where(pipeline_runs.c.dataset_id == bindparam("dataset_id")),
    # a terminal row is frozen: only a running one is touched, and a missing dataset_id is back-filled
    "session_touch": _session_touch(sqlite_insert),
    "session_read": _session_read(sqlite_insert),
    "sessions_reading_dataset": select(session_datasets.c.user_id, session_datasets.c.session_id)
    .where(session_datasets.c.dataset_id == bindparam("dataset_id"))
    .order_by(session_datasets.c.user_id, session_datasets.c.session_id),
    "sessions_of_dataset": select(*_RECORD_COLS)
    .where(or_(session_records.c.dataset_id == bindparam("dataset_id"), session_records.c.session_id == bindparam("default_name")))
    .order_by(session_records.c.started_at, session_records.c.user_id, session_records.c.session_id),
    "sessions_of_dataset_or_none": select(*_RECORD_COLS)
    .where(
        or_(
            session_records.c.dataset_id == bindparam("dataset_id"),
            session_records.c.dataset_id.is_(None),
            session_records.c.session_id == bindparam("default_name"),
        )
    )
    .order_by(session_records.c.started_at, session_records.c.user_id, session_records.c.session_id),
    "sessions_of_user": select(*_RECORD_COLS)
    .where(session_records.c.user_id == bindparam("user_id"))
    .order_by(session_records.c.started_at, session_records.c.session_id),
    # API keys (memlab.users): only the SHA-256 of a key is stored, and a key is found by that hash
    "users_by_name": select(*_USER_COLS).where(users.c.name == bindparam("name")).order_by(users.c.created_at, users.c.id),
    "api_key_insert": api_keys.insert().values(**_binds("id", "user_id", "key_hash", "prefix", "created_at")),
    "api_key_user": select(*_USER_COLS)
    .join(api_keys, api_keys.c.user_id == users.c.id)
    .where(api_keys.c.key_hash == bindparam("key_hash"), api_keys.c.revoked_at.is_(None)),
    "api_key_revoke": update(api_keys)
    .where(api_keys.c.key_hash == bindparam("key_hash"), api_keys.c.revoked_at.is_(None))
    .values(revoked_at=bindparam("revoked_at")),
}


# -- session usage (memlab.usage) ---------------------------------------------------------
#: columns a session list may be ordered by (``stack.usage.list_sessions(order_by=...)``)
SESSION_ORDER_COLUMNS = ("last_activity_at", "started_at", "ended_at", "cost_usd", "tokens_in", "tokens_out")
#: effective statuses of a session record, in the order ``usage_stats`` counts them
SESSION_STATUSES = ("running", "completed", "failed", "abandoned")
#: a session record's usage counters: listed by ``usage_*`` reads, summed by ``usage_stats``
_COUNTERS = (
    session_records.c.tokens_in,
    session_records.c.tokens_out,
    session_records.c.cost_usd,
    session_records.c.unpriced_tokens_in,
    session_records.c.unpriced_tokens_out,
    session_records.c.embedding_tokens,
    session_records.c.embedding_cost_usd,
    session_records.c.error_count,
)
_USAGE_COLS = (*_RECORD_COLS, *_COUNTERS, session_records.c.last_model)
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
_listed = and_(_visible, or_(bindparam("status", type_=String) .is_(None), _effective == bindparam("status", type_=String)))
_active = session_records.c.last_activity_at >= bindparam("since")


def _listing(column: str, descending: bool) -> ClauseElement:
    order = getattr(session_records.c, column)
    order = order.desc() if descending else order.asc()
    tie = session_records.c.session_id.desc() if descending else session_records.c.session_id.asc()
    return select(*_USAGE_COLS, _effective).where(_listed).order_by(order, tie).limit(bindparam("limit")).offset(bindparam("offset"))


_by_status = [func.sum(case((_effective == status, 1), else_=0)) for status in SESSION_STATUSES]
_model_cols = (
    session_model_usage.c.model,
    session_model_usage.c.kind,
    session_model_usage.c.calls,
    session_model_usage.c.tokens_in,
    session_model_usage.c.tokens_out,
    session_model_usage.c.cost_usd,
    session_model_usage.c.usage_source,
    session_model_usage.c.updated_at,
)


def _model_upsert(insert: Callable[..., Any]) -> ClauseElement:
    """Add calls to a (session, user, model, kind) row; its cost stays NULL (unpriced) once any call was unpriced."""
    row = insert(session_model_usage).values(
        **_binds("session_id", "user_id", "model", "kind", "calls", "tokens_in", "tokens_out", "cost_usd", "usage_source"),
        updated_at=bindparam("now"),
    )
    return row.on_conflict_do_update(
        index_elements=[session_model_usage.c.session_id, session_model_usage.c.user_id, session_model_usage.c.model, session_model_usage.c.kind],
        set_={
            "calls": session_model_usage.c.calls + row.excluded.calls,
            "tokens_in": session_model_usage.c.tokens_in + row.excluded.tokens_in,
            "tokens_out": session_model_usage.c.tokens_out + row.excluded.tokens_out,
            "cost_usd": session_model_usage.c.cost_usd + row.excluded.cost_usd,
            "usage_source": case(
                (session_model_usage.c.usage_source == row.excluded.usage_source, session_model_usage.c.usage_source),
                else_="mixed",
            ),
            "updated_at": row.excluded.updated_at,
        },
    )


_joined = session_model_usage.join(
    session_records,
    and_(session_model_usage.c.session_id == session_records.c.session_id, session_model_usage.c.user_id == session_records.c.user_id),
)

STATEMENTS.update(
    {
        f"usage_list_{column}_{'desc' if descending else 'asc'}": _listing(column, descending)
        for column in SESSION_ORDER_COLUMNS
        for descending in (True, False)
    }
)
STATEMENTS.update(
    {
        "usage_count": select(func.count()).select_from(session_records).where(_listed),
        "usage_get": select(*_USAGE_COLS, _effective)
        .where(session_records.c.session_id == bindparam("session_id"), _visible)
        .order_by(
            case((session_records.c.user_id == bindparam("caller"), 0), else_=1),
            session_records.c.last_activity_at.desc(),
            session_records.c.user_id,
        )
        .limit(1),
        "usage_models": select(*_model_cols)
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
            func.sum(session_model_usage.c.cost_usd),
            func.count(session_model_usage.c.cost_usd),
        )
        .select_from(_joined)
        .where(_visible, _active)
        .group_by(session_model_usage.c.model, session_model_usage.c.kind)
        .order_by(session_model_usage.c.kind, session_model_usage.c.model),
        # counters move only on a running row (a terminal row is frozen); record_usage gates the per-model rows on it too
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
            error_count=session_records.c.error_count + bindparam("add_errors"),
            last_model=func.coalesce(bindparam("model", type_=Text), session_records.c.last_model),
        ),
        "usage_model_upsert": _model_upsert(sqlite_insert),
        "session_end": update(session_records)
        .where(session_records.c.session_id == bindparam("session_id"), session_records.c.user_id == bindparam("user_id"))
        .values(status=bindparam("new_status"), ended_at=bindparam("now")),
    }
)


def statements_for(dialect: str) -> dict[str, ClauseElement]:
    """:data:`STATEMENTS` for ``dialect`` (``sqlite`` | ``postgresql``): the upserts built with that dialect's ``insert``."""
    if dialect == "sqlite":
        return STATEMENTS
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    return {
        **STATEMENTS,
        "session_touch": _session_touch(pg_insert),
        "session_read": _session_read(pg_insert),
        "permission_insert": _permission_insert(pg_insert),
        "data_insert": _data_insert(pg_insert),
        "usage_model_upsert": _model_upsert(pg_insert),
    }


def _when(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _user(row) -> User:
    return User(
        id=uuid.UUID(row[0]),
        name=row[1],
        parent_user_id=uuid.UUID(row[2]) if row[2] else None,
        is_default=bool(row[3]),
        created_at=_when(row[4]),
    )


def _dataset(row) -> Dataset:
    return Dataset(id=uuid.UUID(row[0]), name=row[1], owner_id=uuid.UUID(row[2]), created_at=_when(row[3]))


def _data(row) -> DataRecord:
    return DataRecord(
        id=uuid.UUID(row[0]),
        dataset_id=uuid.UUID(row[1]),
        name=row[2],
        source=row[3],
        extension=row[4],
        content_hash=row[5],
        size_bytes=row[6],
        tags=json.loads(row[7]),
        created_at=_when(row[8]),
    )


def _run(row) -> PipelineRun:
    return PipelineRun(
        id=uuid.UUID(row[0]),
        dataset_id=uuid.UUID(row[1]),
        pipeline_name=row[2],
        status=row[3],
        error_class=row[4],
        error_message=row[5],
        data_count=row[6],
        started_at=_when(row[7]),
        finished_at=_when(row[8]) if row[8] else None,
    )


def _record_fields(row) -> dict[str, Any]:
    """The fields of a row's leading :data:`_RECORD_COLS` (shared by :class:`SessionRecord` and :class:`SessionUsage`)."""
    return {
        "session_id": row[0],
        "user_id": uuid.UUID(row[1]),
        "dataset_id": uuid.UUID(row[2]) if row[2] else None,
        "status": row[3],
        "started_at": _when(row[4]),
        "last_activity_at": _when(row[5]),
        "ended_at": _when(row[6]) if row[6] else None,
    }


def _record(row) -> SessionRecord:
    return SessionRecord(**_record_fields(row))


def _visibility(caller: User, cutoff: str) -> dict[str, str]:
    """The bind parameters of the visibility rule: the caller, the parent it acts for (itself when none), the abandon cutoff."""
    return {"caller": str(caller.id), "parent": str(caller.parent_user_id or caller.id), "cutoff": cutoff}


def _usage(row) -> SessionUsage:
    return SessionUsage(
        **_record_fields(row),
        tokens_in=row[7],
        tokens_out=row[8],
        cost_usd=row[9],
        unpriced_tokens_in=row[10],
        unpriced_tokens_out=row[11],
        embedding_tokens=row[12],
        embedding_cost_usd=row[13],
        error_count=row[14],
        last_model=row[15],
        effective_status=row[16],
    )


def _model_usage(row) -> ModelUsage:
    return ModelUsage(
        model=row[0],
        kind=row[1],
        calls=row[2],
        tokens_in=row[3],
        tokens_out=row[4],
        cost_usd=row[5],
        priced=row[5] is not None,
        usage_source=row[6],
        updated_at=_when(row[7]),
    )


class BuildState(NamedTuple):
    """A dataset's document count, whether it has any run, any completed build, and its latest build run."""

    documents: int
    any_run: bool
    built: bool
    latest_build: PipelineRun | None


#: one document to store: ``(data_id, name, source, extension, content_hash, size_bytes, text)``
NewData = tuple[uuid.UUID, str, "str | None", str, str, int, str]


def _create_schema(connection) -> None:
    """Bring the schema to head (:data:`memlab.migrations.METADATA`), under the database's write lock."""
    upgrade_connection(connection, lineage=METADATA)


class RelationalStore:
    """memlab's metadata: in SQLite at ``path`` (the data root's ``memlab.db``), or in the database at ``url``.

    ``url`` (``MEMLAB_DB_URL``): ``postgresql+asyncpg://...`` shares users, datasets,
    grants, documents, runs, session records and API keys among every stack pointed at
    it; a ``sqlite:///path`` URL is the same as ``path``. Open brings the schema to head
    (:data:`memlab.migrations.METADATA`). A database that cannot be reached raises
    :class:`~memlab.exceptions.BackendError` naming it (never its password), at open and
    on any later call; the next call reconnects once it is back.
    """

    def __init__(self, path: Path | None, clock, *, url: str | None = None) -> None:
        if path is None and url is None:
            raise ValueError("give the metadata database a path or a url")
        self.path = Path(path) if path is not None else None
        self.url = url
        self.clock = clock
        self._runner: SQLiteRunner | PostgresRunner | None = None
        #: ``(dialect, URL)`` of ``url``, parsed once (None: the SQLite file at ``path``)
        self._resolved = resolve_url(url) if url is not None else None
        self.where = str(self.path) if self._resolved is None else self._resolved[1].render_as_string(hide_password=True)
        #: (session, user, dataset) rows of ``session_datasets`` this store wrote (rows are never deleted, so each is
        #: written once per process, not on every turn); bounded: cleared past :data:`READS_REMEMBERED`
        self._reads: set[tuple[str, str, str]] = set()

    def _new_runner(self) -> SQLiteRunner | PostgresRunner:
        if self._resolved is None:
            assert self.path is not None
            return SQLiteRunner(self.path, STATEMENTS)
        dialect, parsed = self._resolved
        if dialect == "sqlite":
            if not parsed.database:
                raise ConfigError(f"MEMLAB_DB_URL {self.where!r} names no SQLite database file (use sqlite:///path)")
            return SQLiteRunner(Path(parsed.database), STATEMENTS)
        return PostgresRunner(parsed, statements_for("postgresql"), pool_size=4)

    async def open(self) -> None:
        runner = self._new_runner()
        try:
            await runner.open()
        except MemlabError:
            raise
        except Exception as exc:
            raise BackendError(f"metadata database {self.where} unreachable: {self._describe(exc)}") from None
        try:
            await runner.run_ddl(_create_schema)
        except BaseException:
            await runner.close()
            raise
        self._runner = runner

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.close()

    def require_open(self) -> None:
        """``StackStateError`` unless the store is open."""
        self._open_runner()

    def _open_runner(self) -> SQLiteRunner | PostgresRunner:
        """The runner; ``StackStateError`` unless the store is open."""
        if self._runner is None:
            raise StackStateError(f"the metadata store {self.where} is not open; use 'async with stack:' or 'await stack.open()'")
        return self._runner

    def _describe(self, exc: BaseException) -> str:
        """``Type: message`` of a driver error, with the URL's password masked if a driver put it there."""
        text = f"{type(exc).__name__}: {exc}"
        if self._resolved is not None:
            password = self._resolved[1].password
            if password:
                text = text.replace(str(password), "***")
        return text

    async def _run(self, fn: Callable[[DB], T], *, write: bool) -> T:
        try:
            return await self._open_runner().run(fn, write=write)
        except MemlabError:
            raise
        except Exception as exc:
            if is_connection_error(exc):
                raise BackendError(f"metadata database {self.where}: {self._describe(exc)}") from exc
            raise

    # users
    async def create_user(self, name: str, parent_user_id: uuid.UUID | None = None, *, is_default: bool = False) -> User:
        def work(db: DB) -> User:
            if parent_user_id is not None and db.first("user_by_id", id=str(parent_user_id)) is None:
                raise ValidationError(f"parent_user_id {parent_user_id} is not a known user")
            row = (str(uuid.uuid4()), name, str(parent_user_id) if parent_user_id else None, is_default, self.clock.now().isoformat())
            db.run("user_insert", id=row[0], name=name, parent_user_id=row[2], is_default=is_default, created_at=row[4])
            return _user(row)

        return await self._run(work, write=True)

    async def get_user(self, user_id: uuid.UUID) -> User | None:
        row = await self._run(lambda db: db.first("user_by_id", id=str(user_id)), write=False)
        return _user(row) if row else None

    async def default_user(self) -> User:
        row = await self._run(lambda db: db.first("user_default"), write=False)
        if row:
            return _user(row)
        try:
            return await self.create_user("default_user", is_default=True)
        except Exception as exc:  # another process created it first
            if not is_integrity_error(exc):
                raise
            return _user(await self._run(lambda db: db.first("user_default"), write=False))

    # datasets
    async def get_dataset(self, owner_id: uuid.UUID, name: str) -> Dataset | None:
        row = await self._run(lambda db: db.first("dataset_by_name", owner_id=str(owner_id), name=name), write=False)
        return _dataset(row) if row else None

    async def get_dataset_by_id(self, dataset_id: uuid.UUID) -> Dataset | None:
        row = await self._run(lambda db: db.first("dataset_by_id", id=str(dataset_id)), write=False)
        return _dataset(row) if row else None

    async def create_dataset(self, owner_id: uuid.UUID, name: str) -> Dataset:
        """Create, or return the owner's existing dataset of that name."""

        def work(db: DB) -> Dataset:
            row = db.first("dataset_by_name", owner_id=str(owner_id), name=name)
            if row:
                return _dataset(row)
            row = (str(uuid.uuid4()), name, str(owner_id), self.clock.now().isoformat())
            db.run("dataset_insert", id=row[0], name=name, owner_id=row[2], created_at=row[3])
            return _dataset(row)

        try:
            return await self._run(work, write=True)
        except Exception as exc:  # another process created it first (PostgreSQL; SQLite serialises writers)
            if not is_integrity_error(exc):
                raise
            found = await self.get_dataset(owner_id, name)
            if found is None:
                raise
            return found

    async def datasets_of_owner(self, owner_id: uuid.UUID) -> list[Dataset]:
        rows = await self._run(lambda db: db.rows("datasets_of_owner", owner_id=str(owner_id)), write=False)
        return [_dataset(row) for row in rows]

    async def datasets_granted(self, user_id: uuid.UUID, permission: str) -> list[Dataset]:
        rows = await self._run(lambda db: db.rows("datasets_granted", user_id=str(user_id), permission=permission), write=False)
        return [_dataset(row) for row in rows]

    async def delete_dataset(self, dataset_id: uuid.UUID) -> None:
        """Remove the dataset row with its documents, permissions and pipeline runs (one transaction)."""
        ids = str(dataset_id)

        def work(db: DB) -> None:
            for name in ("data_delete_all", "permissions_delete", "runs_delete"):
                db.run(name, dataset_id=ids)
            db.run("dataset_delete", id=ids)

        await self._run(work, write=True)

    # permissions
    async def grant(self, dataset_id: uuid.UUID, user_id: uuid.UUID, permission: str) -> None:
        await self._run(
            lambda db: db.run("permission_insert", dataset_id=str(dataset_id), user_id=str(user_id), permission=permission), write=True
        )

    async def permissions(self, dataset_id: uuid.UUID, user_id: uuid.UUID) -> set[str]:
        rows = await self._run(lambda db: db.rows("permissions_of", dataset_id=str(dataset_id), user_id=str(user_id)), write=False)
        return {row[0] for row in rows}

    # documents
    async def add_data(self, dataset_id: uuid.UUID, items: Sequence[NewData], tags: Iterable[str] = ()) -> None:
        """Store the documents whose content hash the dataset lacks, all in one transaction."""
        ids, tag_text, created = str(dataset_id), json.dumps(sorted(set(tags))), self.clock.now().isoformat()

        def work(db: DB) -> None:
            for data_id, name, source, extension, content_hash, size, text in items:
                if db.first("data_by_hash", dataset_id=ids, content_hash=content_hash) is None:
                    db.run(
                        "data_insert",
                        id=str(data_id),
                        dataset_id=ids,
                        name=name,
                        source=source,
                        extension=extension,
                        content_hash=content_hash,
                        size_bytes=size,
                        tags=tag_text,
                        text=text,
                        created_at=created,
                    )

        await self._run(work, write=True)

    async def known_hashes(self, dataset_id: uuid.UUID, hashes: Iterable[str]) -> dict[str, str]:
        """``content hash -> data id`` for the given hashes already stored in the dataset (one read)."""
        ids, wanted = str(dataset_id), list(dict.fromkeys(hashes))

        def work(db: DB) -> dict[str, str]:
            found: dict[str, str] = {}
            for start in range(0, len(wanted), _HASH_CHUNK):
                chunk = wanted[start : start + _HASH_CHUNK]
                padded = chunk + chunk[-1:] * (_HASH_CHUNK - len(chunk))
                found.update(db.rows("data_by_hashes", dataset_id=ids, **{f"h{i}": value for i, value in enumerate(padded)}))
            return found

        return await self._run(work, write=False)

    async def count_data(self, dataset_id: uuid.UUID) -> int:
        # a COUNT query always returns exactly one row
        row = cast(tuple, await self._run(lambda db: db.first("data_count", dataset_id=str(dataset_id)), write=False))
        return row[0]

    async def get_data(self, dataset_id: uuid.UUID, data_id: uuid.UUID) -> DataRecord | None:
        row = await self._run(lambda db: db.first("data_by_id", dataset_id=str(dataset_id), id=str(data_id)), write=False)
        return _data(row) if row else None

    async def list_data(self, dataset_id: uuid.UUID) -> list[DataRecord]:
        rows = await self._run(lambda db: db.rows("data_of_dataset", dataset_id=str(dataset_id)), write=False)
        return [_data(row) for row in rows]

    async def delete_data(self, dataset_id: uuid.UUID, data_ids: Iterable[uuid.UUID]) -> None:
        ids = [str(data_id) for data_id in data_ids]

        def work(db: DB) -> None:
            for data_id in ids:
                db.run("data_delete", dataset_id=str(dataset_id), id=data_id)

        await self._run(work, write=True)

    # session records
    async def touch_session(
        self, user_id: uuid.UUID | str, session_id: str, dataset_id: uuid.UUID | None, *, read: Sequence[uuid.UUID] = ()
    ) -> None:
        """Record activity of (session, user): create a ``running`` row, or bump a running row's ``last_activity_at``.

        A row that is ``completed`` / ``failed`` is never changed (never resurrected);
        a row without a dataset takes ``dataset_id`` when one is given. ``read``: the
        datasets the session's turn reads, kept in ``session_datasets`` (in the same
        transaction). A user id that is not a UUID (not a memlab user) is not recorded.
        """
        try:
            user_id = uuid.UUID(str(user_id))
        except ValueError:
            return
        now = self.clock.now().isoformat()
        user, dataset = str(user_id), str(dataset_id) if dataset_id else None

        reads = [key for key in dict.fromkeys((session_id, user, str(item)) for item in read) if key not in self._reads]

        def work(db: DB) -> None:
            db.run("session_touch", session_id=session_id, user_id=user, dataset_id=dataset, now=now)
            for _, _, read_id in reads:
                db.run("session_read", session_id=session_id, user_id=user, dataset_id=read_id)

        await self._run(work, write=True)
        if len(self._reads) + len(reads) > READS_REMEMBERED:
            self._reads.clear()
        self._reads.update(reads)

    async def sessions_reading(self, dataset_id: uuid.UUID) -> list[tuple[str, str]]:
        """``(user_id, session_id)`` of every session whose turns read ``dataset_id`` (``session_datasets``)."""
        rows = await self._run(lambda db: db.rows("sessions_reading_dataset", dataset_id=str(dataset_id)), write=False)
        return [(str(row[0]), str(row[1])) for row in rows]

    async def sessions_of_dataset(self, dataset_id: uuid.UUID, default_name: str, *, include_unattributed: bool = False) -> list[SessionRecord]:
        """Sessions attributed to the dataset (its recorded ``dataset_id`` or the name ``default_name``), every user's.

        ``include_unattributed`` adds the sessions recorded without a dataset.
        """
        name = "sessions_of_dataset_or_none" if include_unattributed else "sessions_of_dataset"
        rows = await self._run(lambda db: db.rows(name, dataset_id=str(dataset_id), default_name=default_name), write=False)
        return [_record(row) for row in rows]

    async def sessions_of_user(self, user_id: uuid.UUID) -> list[SessionRecord]:
        """The sessions recorded for ``user_id``, oldest first."""
        rows = await self._run(lambda db: db.rows("sessions_of_user", user_id=str(user_id)), write=False)
        return [_record(row) for row in rows]

    # session usage (memlab.usage)
    async def record_usage(self, user_id: uuid.UUID, session_id: str, dataset_id: uuid.UUID | None, calls: Sequence["CallUsage"]) -> bool:
        """Add ``calls`` to the session's record and its per-model rows, in one transaction; False when it added nothing.

        The record is created (``running``) when missing; its counters and its per-model
        rows move only while it is ``running``: after ``end()`` nothing moves (False), so
        the record, the per-model rows and every aggregate keep agreeing (unlike SPEC §8).
        """
        now = self.clock.now().isoformat()
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
                priced = [call.cost_usd for call in group if call.cost_usd is not None]
                db.run(
                    "usage_model_upsert",
                    session_id=session_id,
                    user_id=user,
                    model=model,
                    kind=kind,
                    calls=len(group),
                    tokens_in=sum(call.tokens_in for call in group),
                    tokens_out=sum(call.tokens_out for call in group),
                    cost_usd=sum(priced) if len(priced) == len(group) else None,
                    usage_source=sources.pop() if len(sources) == 1 else "mixed",
                    now=now,
                )
            return True

        return await self._run(work, write=True)

    async def end_session(self, user_id: uuid.UUID, session_id: str, status: str) -> bool:
        """Mark the session ``completed`` / ``failed`` with ``ended_at`` now; False when it has no record."""
        now = self.clock.now().isoformat()
        changed = await self._run(
            lambda db: db.run("session_end", session_id=session_id, user_id=str(user_id), new_status=status, now=now), write=True
        )
        return changed > 0

    async def usage_page(
        self, caller: User, *, status: str | None, order_by: str, descending: bool, limit: int, offset: int, cutoff: str
    ) -> tuple[list[SessionUsage], int]:
        """One page of the sessions visible to ``caller`` and their total count (see :mod:`memlab.usage`)."""
        seen = _visibility(caller, cutoff) | {"status": status}
        name = f"usage_list_{order_by}_{'desc' if descending else 'asc'}"

        def work(db: DB) -> tuple[list[SessionUsage], int]:
            rows = db.rows(name, limit=limit, offset=offset, **seen)
            total = cast(tuple, db.first("usage_count", **seen))[0]
            return [_usage(row) for row in rows], total

        return await self._run(work, write=False)

    async def usage_of(self, caller: User, session_id: str, cutoff: str) -> SessionUsage | None:
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

    async def usage_models(self, session_id: str, user_id: uuid.UUID) -> list[ModelUsage]:
        """The per-model rows of (session, user), llm first."""
        rows = await self._run(lambda db: db.rows("usage_models", session_id=session_id, user_id=str(user_id)), write=False)
        return [_model_usage(row) for row in rows]

    async def usage_stats(self, caller: User, since: str, cutoff: str) -> tuple:
        """``(sessions, token and cost sums..., per-status counts...)`` over the visible sessions active since ``since``."""
        return cast(tuple, await self._run(lambda db: db.first("usage_stats", since=since, **_visibility(caller, cutoff)), write=False))

    async def usage_cost_by_model(self, caller: User, since: str, cutoff: str) -> list[tuple]:
        """``(model, kind, sessions, calls, tokens in, tokens out, priced cost sum, priced rows)`` per model."""
        return await self._run(lambda db: db.rows("usage_cost_by_model", since=since, **_visibility(caller, cutoff)), write=False)

    # API keys
    async def users_by_name(self, name: str) -> list[User]:
        """Every user called ``name`` (names are not unique), oldest first."""
        rows = await self._run(lambda db: db.rows("users_by_name", name=name), write=False)
        return [_user(row) for row in rows]

    async def insert_api_key(self, user_id: uuid.UUID, key_hash: str, prefix: str) -> None:
        """Store an API key of ``user_id`` by its SHA-256 hex digest and its displayable ``prefix``."""
        created = self.clock.now().isoformat()

        def work(db: DB) -> None:
            if db.first("user_by_id", id=str(user_id)) is None:
                raise ValidationError(f"user {user_id} does not exist")
            db.run("api_key_insert", id=str(uuid.uuid4()), user_id=str(user_id), key_hash=key_hash, prefix=prefix, created_at=created)

        await self._run(work, write=True)

    async def user_for_api_key_hash(self, key_hash: str) -> User | None:
        """The user owning the unrevoked key whose SHA-256 hex digest is ``key_hash``, or None."""
        row = await self._run(lambda db: db.first("api_key_user", key_hash=key_hash), write=False)
        return _user(row) if row else None

    async def revoke_api_key_hash(self, key_hash: str) -> bool:
        """Revoke the key with that hash; False when no unrevoked key has it."""
        revoked = self.clock.now().isoformat()
        count = await self._run(lambda db: db.run("api_key_revoke", key_hash=key_hash, revoked_at=revoked), write=True)
        return count > 0

    # pipeline runs
    async def start_run(self, dataset_id: uuid.UUID, pipeline_name: str, data_count: int) -> PipelineRun:
        row = (str(uuid.uuid4()), str(dataset_id), pipeline_name, "started", None, None, data_count, self.clock.now().isoformat(), None)
        await self._run(
            lambda db: db.run(
                "run_insert", id=row[0], dataset_id=row[1], pipeline_name=pipeline_name, status="started", data_count=data_count,
                started_at=row[7],
            ),
            write=True,
        )
        return _run(row)

    async def finish_run(self, run_id: uuid.UUID, status: str, *, error_class: str | None = None, error_message: str | None = None) -> None:
        """Mark a run ``completed`` / ``errored``; ``error_message`` must already be scrubbed."""
        finished = self.clock.now().isoformat()
        await self._run(
            lambda db: db.run(
                "run_finish", id=str(run_id), status=status, error_class=error_class, error_message=error_message, finished_at=finished
            ),
            write=True,
        )

    async def runs(self, dataset_id: uuid.UUID) -> list[PipelineRun]:
        rows = await self._run(lambda db: db.rows("runs_of_dataset", dataset_id=str(dataset_id)), write=False)
        return [_run(row) for row in rows]

    async def build_state(self, dataset_id: uuid.UUID, staging_pipeline: str) -> BuildState:
        """What the recall warm-up probe needs of a dataset, in one read; runs of ``staging_pipeline`` build nothing."""
        ids = str(dataset_id)

        def work(db: DB) -> BuildState:
            # a SELECT of aggregates always returns exactly one row
            documents, any_run, built = cast(tuple, db.first("build_summary", dataset_id=ids, staging=staging_pipeline))
            latest = db.first("run_latest_build", dataset_id=ids, staging=staging_pipeline)
            return BuildState(documents, bool(any_run), bool(built), _run(latest) if latest else None)

        return await self._run(work, write=False)
