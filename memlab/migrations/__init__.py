"""Schema migrations of the SQL session cache (Alembic, shipped inside the package).

Revisions (``versions/``):

* ``0001_initial`` - the cache tables as first released: ``cache_session_context``
  has **no** unique index on ``(user_id, session_id, entry_id)``, so session-context
  writes appended duplicates.
* ``0002_context_upsert_index`` - merges those duplicates (see that file for
  which row survives) and creates the unique index ``ux_cache_session_context_entry``
  that the context upsert needs.

The version is kept in its own table, ``memlab_cache_alembic_version``, so a
database shared with an application's own Alembic history is left alone.

Entry points:

* ``await run_migrations(url)`` - bring the database at ``url`` to head; returns
  the head revision.
* :meth:`memlab.cache.SQLCache.open` does the same on every open (a cheap version
  check when already current), so nobody runs against a missing index.
* ``alembic upgrade head`` with an ini holding ``script_location = memlab:migrations``
  and ``sqlalchemy.url`` (or ``-x url=...``, or ``CACHE_DB_URL``).

How a database is brought to head (:func:`upgrade_connection`), under a lock
(PostgreSQL: ``pg_advisory_xact_lock``; SQLite: ``BEGIN IMMEDIATE``) so two
processes opening the same fresh database do not race:

* no cache tables: ``create_all`` from the current schema, then stamp head;
* cache tables but no version table (created before migrations existed): stamp
  the revision the schema matches (head if the unique index is there, else
  ``0001_initial``), then upgrade;
* an older revision: ``alembic upgrade``.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import func, inspect, select, text

from memlab._sqlrun import advisory_key, resolve_url
from memlab.exceptions import MemlabError, MigrationError

__all__ = ["HEAD", "REVISIONS", "VERSION_TABLE", "MigrationError", "alembic_config", "run_migrations", "upgrade_connection"]

logger = logging.getLogger("memlab.migrations")

#: every revision, oldest first; the last is the head
REVISIONS = ("0001_initial", "0002_context_upsert_index")
HEAD = REVISIONS[-1]
VERSION_TABLE = "memlab_cache_alembic_version"
MIGRATIONS_DIR = Path(__file__).resolve().parent
#: ``pg_advisory_xact_lock`` key serialising schema changes across processes
MIGRATION_LOCK_KEY = advisory_key("memlab.cache.migrations")

_CACHE_TABLES = ("cache_qa_entries", "cache_session_context", "cache_session_state")
_CONTEXT_INDEX = "ux_cache_session_context_entry"


def alembic_config(connection: Any = None):
    """An Alembic ``Config`` for the shipped scripts, built in code (no ini file)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def current_revision(connection: Any) -> str | None:
    """The stamped revision, or None when the version table is missing or empty."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    rows = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    return rows[0] if len(rows) == 1 else None


@contextmanager
def exclusive(connection: Any):
    """One transaction holding the schema lock; committed on success."""
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
            connection.execute(select(func.pg_advisory_xact_lock(MIGRATION_LOCK_KEY)))
            yield


def _context_has_unique_index(connection: Any) -> bool:
    inspector = inspect(connection)
    wanted = ["user_id", "session_id", "entry_id"]
    indexes = inspector.get_indexes("cache_session_context")
    if any(ix.get("unique") and list(ix["column_names"]) == wanted for ix in indexes):
        return True
    return any(list(uc["column_names"]) == wanted for uc in inspector.get_unique_constraints("cache_session_context"))


def _check_known(revision: str | None) -> None:
    if revision is not None and revision not in REVISIONS:
        raise MigrationError(
            f"the cache schema is at revision {revision!r}, which this memlab does not know "
            f"(its head is {HEAD!r}); upgrade memlab"
        )


def upgrade_connection(connection: Any, *, revision: str = "head", display_url: str | None = None) -> str:
    """Bring the database behind a SQLAlchemy (sync) ``connection`` to ``revision``.

    Idempotent and safe to run from many processes at once. Logs at INFO what it
    changed. Returns the revision the database is at afterwards.
    """
    target = HEAD if revision == "head" else revision
    if target not in REVISIONS:
        raise MigrationError(f"unknown cache schema revision {revision!r}; known: {', '.join(REVISIONS)}")
    where = display_url or connection.dialect.name
    before = current_revision(connection)
    _check_known(before)
    if before is not None and REVISIONS.index(before) >= REVISIONS.index(target):
        if connection.in_transaction():
            connection.commit()
        return before
    with exclusive(connection):
        before = current_revision(connection)  # another process may have done it meanwhile
        _check_known(before)
        if before is not None and REVISIONS.index(before) >= REVISIONS.index(target):
            return before
        from alembic import command

        config = alembic_config(connection)
        present = [name for name in _CACHE_TABLES if inspect(connection).has_table(name)]
        if before is None and not present and target == HEAD:
            from memlab.cache import SQL_SCHEMA as metadata

            metadata.create_all(connection)
            command.stamp(config, HEAD)
            logger.info("created the memlab cache schema at revision %s in %s", HEAD, where)
            return HEAD
        if before is None and present:
            if len(present) != len(_CACHE_TABLES):
                raise MigrationError(
                    f"{where} has only some of the cache tables ({', '.join(present)}) and no "
                    f"{VERSION_TABLE}; drop them or restore the missing ones"
                )
            before = HEAD if _context_has_unique_index(connection) else REVISIONS[0]
            command.stamp(config, before)
            logger.info("adopted an unversioned memlab cache schema in %s as revision %s", where, before)
            if REVISIONS.index(before) >= REVISIONS.index(target):
                return before
        command.upgrade(config, target)
        logger.info("upgraded the memlab cache schema in %s from %s to %s", where, before or "an empty database", target)
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
