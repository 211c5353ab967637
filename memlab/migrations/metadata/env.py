"""Alembic environment of memlab's metadata database (``memlab.db``); configured in code, no ini needed.

See :func:`memlab.migrations.run_alembic_env`: from memlab the migrations run in the
caller's locked connection; from the ``alembic`` command the URL comes from
``-x url=...``, the ini's ``sqlalchemy.url`` or ``MEMLAB_DB_URL``.
"""

from memlab.migrations import METADATA, run_alembic_env

run_alembic_env(METADATA, url_variable="MEMLAB_DB_URL")
