"""Alembic environment of the memlab cache schema; configured in code, no ini needed.

* From memlab (:func:`memlab.migrations.upgrade_connection`): the caller passes an
  open connection in ``config.attributes["connection"]``, already inside the
  transaction that holds the schema lock; migrations run in it.
* From the ``alembic`` command: the URL comes from ``-x url=...``, the ini's
  ``sqlalchemy.url`` or ``CACHE_DB_URL``; this file connects (asyncpg /
  aiosqlite), takes the same lock and runs the requested command.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from alembic import context

from memlab._sqlrun import resolve_url
from memlab.cache import SQL_SCHEMA as metadata
from memlab.migrations import VERSION_TABLE, exclusive

config = context.config


def _configure(**kwargs) -> None:
    context.configure(target_metadata=metadata, version_table=VERSION_TABLE, **kwargs)


def _url():
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url") or os.environ.get("CACHE_DB_URL")
    if not url:
        raise SystemExit("memlab migrations: give the database as -x url=..., sqlalchemy.url in the ini, or CACHE_DB_URL")
    return resolve_url(url)[1]


def _run_on(connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():  # a no-op inside the caller's transaction
        context.run_migrations()


async def _run_cli() -> None:
    from memlab._sqlrun import PostgresRunner, SQLiteRunner

    dialect, url = resolve_url(_url())
    runner: SQLiteRunner | PostgresRunner
    if dialect == "sqlite":
        if not url.database:
            raise SystemExit("memlab migrations: the SQLite URL names no database file (use sqlite:///path)")
        runner = SQLiteRunner(Path(url.database), {})
    else:
        runner = PostgresRunner(url, {}, pool_size=1)
    await runner.open()

    def locked(connection) -> None:
        with exclusive(connection):
            _run_on(connection)

    try:
        await runner.run_ddl(locked)
    finally:
        await runner.close()


if context.is_offline_mode():
    _configure(url=_url(), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
elif config.attributes.get("connection") is not None:
    _run_on(config.attributes["connection"])
else:
    asyncio.run(_run_cli())
