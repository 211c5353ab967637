"""Schema migrations (Alembic, shipped inside the package): two lineages.

**cache** (this directory, ``versions/``), the SQL session cache:

* ``0001_initial`` - the cache tables as first released: ``cache_session_context``
  has **no** unique index on ``(user_id, session_id, entry_id)``, so session-context
  writes appended duplicates.
* ``0002_context_upsert_index`` - merges those duplicates (see that file for
  which row survives) and creates the unique index ``ux_cache_session_context_entry``
  that the context upsert needs.

**metadata** (``metadata/``), memlab's own database (``memlab.db``):

* ``m0001_initial`` - users, datasets, dataset permissions, documents, pipeline runs,
  as created before migrations existed;
* ``m0002_sessions_usage`` - ``session_records``, ``session_model_usage`` and ``api_keys``;
* ``m0003_graph_snapshots`` - ``graph_snapshots`` and ``graph_snapshot_files`` (permanent
  memory shared through PostgreSQL);
* ``m0004_session_datasets`` - ``session_datasets``: every dataset a session's turns read
  (the delete cleaner's candidates beyond the attributed dataset);
* ``m0005_unpriced_split`` - unpriced tokens beside the priced cost on every usage row
  (``session_model_usage.unpriced_tokens_in/out``, ``session_records.unpriced_embedding_tokens``);
* ``m0006_feedback_weights`` - ``element_feedback_weights``: the feedback weight of each graph element.

Each lineage keeps its version in its own table (``memlab_cache_alembic_version``,
``memlab_metadata_alembic_version``), so a database shared with an application's own
Alembic history (or holding both lineages) is left alone.

Entry points:

* ``await run_migrations(url)`` - bring the cache database at ``url`` to head; returns
  the head revision.
* :meth:`memlab.cache.SQLCache.open` and the metadata store's open do the same on
  every open (a cheap version check when already current).
* ``alembic upgrade head`` with an ini holding ``script_location = memlab:migrations``
  (cache) or ``memlab:migrations/metadata`` and ``sqlalchemy.url`` (or ``-x url=...``,
  or ``CACHE_DB_URL`` / ``MEMLAB_DB_URL``).

How a database is brought to head (:func:`upgrade_connection`), under a lock
(PostgreSQL: ``pg_advisory_xact_lock`` on a key per lineage; SQLite: ``BEGIN
IMMEDIATE``) so two processes opening the same fresh database do not race:

* none of the lineage's tables: ``create_all`` from the current schema, then stamp head;
* its tables but no version table (created before migrations existed): stamp the
  revision the schema matches, then upgrade;
* an older revision: ``alembic upgrade``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func, inspect, select, text

from memlab._sqlrun import advisory_key, resolve_url
from memlab.exceptions import MemlabError, MigrationError

__all__ = [
    "CACHE",
    "HEAD",
    "METADATA",
    "REVISIONS",
    "VERSION_TABLE",
    "Lineage",
    "MigrationError",
    "alembic_config",
    "run_alembic_env",
    "run_migrations",
    "upgrade_connection",
]

logger = logging.getLogger("memlab.migrations")

#: every revision of the cache lineage, oldest first; the last is the head
REVISIONS = ("0001_initial", "0002_context_upsert_index")
HEAD = REVISIONS[-1]
VERSION_TABLE = "memlab_cache_alembic_version"
MIGRATIONS_DIR = Path(__file__).resolve().parent
#: ``pg_advisory_xact_lock`` key serialising cache schema changes across processes
MIGRATION_LOCK_KEY = advisory_key("memlab.cache.migrations")

_CACHE_TABLES = ("cache_qa_entries", "cache_session_context", "cache_session_state")
_CONTEXT_INDEX = "ux_cache_session_context_entry"


def _context_has_unique_index(connection: Any) -> bool:
    inspector = inspect(connection)
    wanted = ["user_id", "session_id", "entry_id"]
    indexes = inspector.get_indexes("cache_session_context")
    if any(ix.get("unique") and list(ix["column_names"]) == wanted for ix in indexes):
        return True
    return any(list(uc["column_names"]) == wanted for uc in inspector.get_unique_constraints("cache_session_context"))


def _cache_schema() -> Any:
    from memlab.cache import SQL_SCHEMA

    return SQL_SCHEMA


def _metadata_schema() -> Any:
    from memlab.metadata_tables import metadata

    return metadata


@dataclass(frozen=True)
class Lineage:
    """One migration history: its scripts, version table, revisions and lock.

    ``tables`` are the tables whose presence without a version table means the schema
    was created before migrations existed; ``adopt(connection)`` says which revision
    such a schema matches; ``schema()`` is the current SQLAlchemy ``MetaData``.
    """

    name: str
    directory: Path
    version_table: str
    revisions: tuple[str, ...]
    tables: tuple[str, ...]
    lock_key: int
    adopt: Callable[[Any], str]
    schema: Callable[[], Any]

    @property
    def head(self) -> str:
        return self.revisions[-1]


CACHE = Lineage(
    name="cache",
    directory=MIGRATIONS_DIR,
    version_table=VERSION_TABLE,
    revisions=REVISIONS,
    tables=_CACHE_TABLES,
    lock_key=MIGRATION_LOCK_KEY,
    adopt=lambda connection: HEAD if _context_has_unique_index(connection) else REVISIONS[0],
    schema=_cache_schema,
)

_METADATA_REVISIONS = ("m0001_initial", "m0002_sessions_usage", "m0003_graph_snapshots", "m0004_session_datasets", "m0005_unpriced_split",
                       "m0006_feedback_weights")
METADATA = Lineage(
    name="metadata",
    directory=MIGRATIONS_DIR / "metadata",
    version_table="memlab_metadata_alembic_version",
    revisions=_METADATA_REVISIONS,
    tables=("users", "datasets", "dataset_permissions", "data", "pipeline_runs"),
    lock_key=advisory_key("memlab.metadata.migrations"),
    adopt=lambda connection: _METADATA_REVISIONS[0],  # only the first release's tables were ever made without a version
    schema=_metadata_schema,
)


def alembic_config(connection: Any = None, *, lineage: Lineage = CACHE):
    """An Alembic ``Config`` for a lineage's shipped scripts, built in code (no ini file)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(lineage.directory))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def current_revision(connection: Any, *, lineage: Lineage = CACHE) -> str | None:
    """The stamped revision, or None when the version table is missing or empty."""
    if not inspect(connection).has_table(lineage.version_table):
        return None
    rows = connection.execute(text(f"SELECT version_num FROM {lineage.version_table}")).scalars().all()
    return rows[0] if len(rows) == 1 else None


@contextmanager
def exclusive(connection: Any, *, lock_key: int = MIGRATION_LOCK_KEY):
    """One transaction holding the schema lock (``lock_key`` on PostgreSQL); committed on success."""
    if connection.in_transaction():
        connection.commit()  # end the autobegun read transaction of the version check
    if connection.dialect.name == "sqlite":
        # the runner's SQLite connections are in driver autocommit mode: transactions are explicit
        connection.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            connection.exec_driver_sql("ROLLBACK")
            connection.rollback()
            raise
        connection.exec_driver_sql("COMMIT")
        connection.commit()
    else:
        with connection.begin():
            connection.execute(select(func.pg_advisory_xact_lock(lock_key)))
            yield


def _check_known(revision: str | None, lineage: Lineage) -> None:
    if revision is not None and revision not in lineage.revisions:
        raise MigrationError(
            f"the {lineage.name} schema is at revision {revision!r}, which this memlab does not know "
            f"(its head is {lineage.head!r}); upgrade memlab"
        )


def upgrade_connection(connection: Any, *, revision: str = "head", display_url: str | None = None, lineage: Lineage = CACHE) -> str:
    """Bring the database behind a SQLAlchemy (sync) ``connection`` to ``revision`` of ``lineage``.

    Idempotent and safe to run from many processes at once. Logs at INFO what it
    changed. Returns the revision the database is at afterwards.
    """
    revisions = lineage.revisions
    target = lineage.head if revision == "head" else revision
    if target not in revisions:
        raise MigrationError(f"unknown {lineage.name} schema revision {revision!r}; known: {', '.join(revisions)}")
    where = display_url or connection.dialect.name
    before = current_revision(connection, lineage=lineage)
    _check_known(before, lineage)
    if before is not None and revisions.index(before) >= revisions.index(target):
        if connection.in_transaction():
            connection.commit()
        return before
    with exclusive(connection, lock_key=lineage.lock_key):
        before = current_revision(connection, lineage=lineage)  # another process may have done it meanwhile
        _check_known(before, lineage)
        if before is not None and revisions.index(before) >= revisions.index(target):
            return before
        from alembic import command

        config = alembic_config(connection, lineage=lineage)
        present = [name for name in lineage.tables if inspect(connection).has_table(name)]
        if before is None and not present and target == lineage.head:
            lineage.schema().create_all(connection)
            command.stamp(config, lineage.head)
            logger.info("created the memlab %s schema at revision %s in %s", lineage.name, lineage.head, where)
            return lineage.head
        if before is None and present:
            if len(present) != len(lineage.tables):
                raise MigrationError(
                    f"{where} has only some of the {lineage.name} tables ({', '.join(present)}) and no "
                    f"{lineage.version_table}; drop them or restore the missing ones"
                )
            before = lineage.adopt(connection)
            command.stamp(config, before)
            logger.info("adopted an unversioned memlab %s schema in %s as revision %s", lineage.name, where, before)
            if revisions.index(before) >= revisions.index(target):
                return before
        command.upgrade(config, target)
        logger.info("upgraded the memlab %s schema in %s from %s to %s", lineage.name, where, before or "an empty database", target)
        return target


async def run_migrations(url: str | None = None, *, revision: str = "head") -> str:
    """Bring the cache database at ``url`` to ``revision`` (default head); returns it.

    ``url`` as for :class:`memlab.cache.SQLCache` (``sqlite:///path``,
    ``postgresql[+asyncpg]://...``); None: the SQL cache the environment configures
    (``CACHE_BACKEND``, ``CACHE_DB_URL``, ``MEMLAB_DATA_ROOT``, ``DB_*``). Removes
    the duplicate session-context rows written before the upsert fix and creates
    the unique index the upsert needs.
    """
    from memlab._sqlrun import PostgresRunner, SQLiteRunner

    if url is None:
        from memlab.config import StackConfig, sql_cache_url

        url = sql_cache_url(StackConfig.from_env())

    dialect, parsed = resolve_url(url)
    display = parsed.render_as_string(hide_password=True)
    runner: SQLiteRunner | PostgresRunner
    try:
        if dialect == "sqlite":
            if not parsed.database or parsed.database == ":memory:":
                raise MigrationError(f"run_migrations needs a SQLite file path, got {display!r}")
            runner = SQLiteRunner(Path(parsed.database), {})
        else:
            runner = PostgresRunner(parsed, {}, pool_size=1)
        await runner.open()
    except MemlabError:
        raise
    except Exception as exc:
        raise MigrationError(f"cannot open {display} to migrate it: {type(exc).__name__}: {exc}") from exc
    try:
        return await runner.run_ddl(lambda conn: upgrade_connection(conn, revision=revision, display_url=display))
    except MemlabError:
        raise
    except Exception as exc:
        raise MigrationError(f"migrating the cache schema in {display} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        await runner.close()


def run_alembic_env(lineage: Lineage, *, url_variable: str) -> None:
    """The body of a lineage's ``env.py``: run the migrations Alembic asks for.

    * From memlab (:func:`upgrade_connection`): the caller passes an open connection in
      ``config.attributes["connection"]``, already inside the transaction that holds
      the schema lock; migrations run in it.
    * From the ``alembic`` command: the URL comes from ``-x url=...``, the ini's
      ``sqlalchemy.url`` or the ``url_variable`` environment variable; this connects
      (asyncpg / aiosqlite), takes the lineage's lock and runs the requested command.
    """
    import asyncio
    import os

    from alembic import context

    config = context.config

    def configure(**kwargs: Any) -> None:
        context.configure(target_metadata=lineage.schema(), version_table=lineage.version_table, **kwargs)

    def url() -> Any:
        given = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url") or os.environ.get(url_variable)
        if not given:
            raise SystemExit(f"memlab {lineage.name} migrations: give the database as -x url=..., sqlalchemy.url in the ini, or {url_variable}")
        return resolve_url(given)[1]

    def run_on(connection: Any) -> None:
        configure(connection=connection)
        with context.begin_transaction():  # a no-op inside the caller's transaction
            context.run_migrations()

    async def run_cli() -> None:
        from memlab._sqlrun import PostgresRunner, SQLiteRunner

        dialect, parsed = resolve_url(url())
        runner: SQLiteRunner | PostgresRunner
        if dialect == "sqlite":
            if not parsed.database:
                raise SystemExit(f"memlab {lineage.name} migrations: the SQLite URL names no database file (use sqlite:///path)")
            runner = SQLiteRunner(Path(parsed.database), {})
        else:
            runner = PostgresRunner(parsed, {}, pool_size=1)
        await runner.open()

        def locked(connection: Any) -> None:
            with exclusive(connection, lock_key=lineage.lock_key):
                run_on(connection)

        try:
            await runner.run_ddl(locked)
        finally:
            await runner.close()

    if context.is_offline_mode():
        configure(url=url(), literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
    elif config.attributes.get("connection") is not None:
        run_on(config.attributes["connection"])
    else:
        asyncio.run(run_cli())
