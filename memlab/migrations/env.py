"""Alembic environment of the memlab cache schema; configured in code, no ini needed.

See :func:`memlab.migrations.run_alembic_env`: from memlab the migrations run in the
caller's locked connection; from the ``alembic`` command the URL comes from
``-x url=...``, the ini's ``sqlalchemy.url`` or ``CACHE_DB_URL``.
"""

from memlab.migrations import CACHE, run_alembic_env

run_alembic_env(CACHE, url_variable="CACHE_DB_URL")
