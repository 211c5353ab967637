"""Throw-away PostgreSQL databases: for tests (and benchmarks) that need a database of their own."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from memlab.testing.suppliers import server_url

__all__ = ["postgres_database", "throwaway_database"]


@asynccontextmanager
async def throwaway_database(url: str, prefix: str = "memlab_test") -> AsyncIterator[str]:
    """Create an empty database named ``<prefix>_<random>`` on the server of ``url``; yield its URL; drop it on exit.

    ``url``: a SQLAlchemy ``postgresql[+asyncpg]://`` URL; the yielded URL keeps its driver
    and credentials. The drop forces other connections off the database.
    """
    import asyncpg
    from sqlalchemy.engine import make_url

    base = make_url(url)
    admin_dsn = base.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(admin_dsn, timeout=30)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        admin = await asyncpg.connect(admin_dsn, timeout=30)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@asynccontextmanager
async def postgres_database(prefix: str = "memlab_test") -> AsyncIterator[str]:
    """A :func:`throwaway_database` on ``MEMLAB_TEST_POSTGRES_URL``'s server.

    Skips the calling test when the variable is unset (fails it under ``CI=true``).
    """
    async with throwaway_database(server_url("MEMLAB_TEST_POSTGRES_URL"), prefix) as url:
        yield url
