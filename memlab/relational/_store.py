"""``RelationalStore``: the one runner of ``memlab.db`` (open, close, run) and the repositories over it.

The schema is Alembic-managed (:data:`memlab.migrations.METADATA`): a fresh database
is created at head inside one ``BEGIN IMMEDIATE`` transaction (so many processes
opening a fresh data root at once serialise on it), and an older memlab.db is adopted
and upgraded in place on open.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.sql import ClauseElement

from memlab._clock import Clock
from memlab._sqlrun import DB, PostgresRunner, SQLiteRunner, is_connection_error, resolve_url
from memlab.exceptions import BackendError, ConfigError, MemlabError, StackStateError
from memlab.migrations import METADATA, upgrade_connection
from memlab.relational._base import Insert, Repository
from memlab.relational._data import DataRepository
from memlab.relational._datasets import DatasetRepository
from memlab.relational._feedback import FeedbackWeightRepository
from memlab.relational._runs import RunRepository
from memlab.relational._sessions import SessionRecordRepository
from memlab.relational._usage import UsageRepository
from memlab.relational._users import UserRepository

T = TypeVar("T")

#: every repository of the store; their statements share the runner's one namespace
REPOSITORIES: tuple[type[Repository], ...] = (
    UserRepository,
    DatasetRepository,
    DataRepository,
    SessionRecordRepository,
    UsageRepository,
    RunRepository,
    FeedbackWeightRepository,
)


@functools.cache
def statements_for(dialect: str) -> dict[str, ClauseElement]:
    """Every repository's statements for ``dialect`` (``sqlite`` | ``postgresql``), the upserts built with its ``insert``."""
    insert: Insert = sqlite_insert
    if dialect != "sqlite":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        insert = pg_insert
    merged: dict[str, ClauseElement] = {}
    for repository in REPOSITORIES:
        own = repository.statements(insert)
        clash = merged.keys() & own.keys()
        if clash:
            raise RuntimeError(f"{repository.__name__} redefines the statements {sorted(clash)}")
        merged.update(own)
    return merged


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
    on any later call; the next call reconnects once it is back. The queries live in the
    repositories ``users``, ``datasets``, ``data``, ``sessions``, ``usage`` and ``runs``,
    which all run through this store's one runner.
    """

    def __init__(self, path: Path | None, clock: Clock, *, url: str | None = None) -> None:
        if path is None and url is None:
            raise ValueError("give the metadata database a path or a url")
        self.path = Path(path) if path is not None else None
        self.url = url
        self.clock = clock
        self._runner: SQLiteRunner | PostgresRunner | None = None
        #: ``(dialect, URL)`` of ``url``, parsed once (None: the SQLite file at ``path``)
        self._resolved = resolve_url(url) if url is not None else None
        self.where = str(self.path) if self._resolved is None else self._resolved[1].render_as_string(hide_password=True)
        #: users (agents) and their API keys
        self.users = UserRepository(self._run, clock, self._read)
        #: datasets and the permissions granted on them
        self.datasets = DatasetRepository(self._run, clock)
        #: the documents of each dataset
        self.data = DataRepository(self._run, clock)
        #: session records (activity, end) and the datasets each session read
        self.sessions = SessionRecordRepository(self._run, clock)
        #: sessions' token and cost usage
        self.usage = UsageRepository(self._run, clock, self._read)
        #: pipeline runs and each dataset's build state
        self.runs = RunRepository(self._run, clock)
        #: graph elements' feedback weights (memlab.flows.feedback)
        self.feedback = FeedbackWeightRepository(self._run, clock)

    def _new_runner(self) -> SQLiteRunner | PostgresRunner:
        if self._resolved is None:
            assert self.path is not None
            return SQLiteRunner(self.path, statements_for("sqlite"))
        dialect, parsed = self._resolved
        if dialect == "sqlite":
            if not parsed.database:
                raise ConfigError(f"MEMLAB_DB_URL {self.where!r} names no SQLite database file (use sqlite:///path)")
            return SQLiteRunner(Path(parsed.database), statements_for("sqlite"))
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
        """``fn(db)`` in one transaction on the runner; a lost connection raises ``BackendError`` naming the database."""
        return await self._named_errors(self._open_runner().run(fn, write=write))

    async def _read(self, name: str, params: dict[str, Any]) -> list:
        """The rows of the one read statement ``name``, run alone (errors as :meth:`_run`).

        On PostgreSQL one round trip on the driver connection instead of BEGIN, the
        statement and COMMIT (a single statement reads one snapshot by itself); on
        SQLite the same transaction as :meth:`_run`.
        """
        return await self._named_errors(self._open_runner().execute(name, params, write=False))

    async def _named_errors(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except MemlabError:
            raise
        except Exception as exc:
            if is_connection_error(exc):
                raise BackendError(f"metadata database {self.where}: {self._describe(exc)}") from exc
            raise
