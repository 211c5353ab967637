"""Merge duplicate session-context rows, then add the unique index the upsert needs.

Which row survives, per (user_id, session_id, entry_id): the **first** row (lowest
``seq``) keeps its place and takes the **newest** row's payload (highest ``seq``);
the later rows are deleted. That is exactly the state the upsert would have
produced had the index existed from the start: the upsert is "last writer wins"
for the payload and keeps an entry at its first-insert position (the cache
contract orders context entries by first insert), and ``created_at`` stays that
of the first insert. Keeping the newest row whole instead would keep the right
payload but move the entry to the end of the session's guidance list.

Revision ID: 0002_context_upsert_index
Revises: 0001_initial
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import context, op

revision = "0002_context_upsert_index"
down_revision = "0001_initial"
branch_labels = None
depends_on = None

logger = logging.getLogger("memlab.migrations")

_TABLE = "cache_session_context"
_KEY = ["user_id", "session_id", "entry_id"]
_HELPER_INDEX = "ix_cache_session_context_dedupe"  # makes the correlated lookups below indexed

_COPY_NEWEST_PAYLOAD = f"""
UPDATE {_TABLE} SET payload = (
    SELECT newest.payload FROM {_TABLE} AS newest
    WHERE newest.user_id = {_TABLE}.user_id
      AND newest.session_id = {_TABLE}.session_id
      AND newest.entry_id = {_TABLE}.entry_id
    ORDER BY newest.seq DESC
    LIMIT 1
)
WHERE seq IN (
    SELECT MIN(seq) FROM {_TABLE} GROUP BY user_id, session_id, entry_id HAVING COUNT(*) > 1
)
"""

_DELETE_LATER_COPIES = f"""
DELETE FROM {_TABLE}
WHERE seq NOT IN (SELECT MIN(seq) FROM {_TABLE} GROUP BY user_id, session_id, entry_id)
"""


def upgrade() -> None:
    op.create_index(_HELPER_INDEX, _TABLE, [*_KEY, "seq"])
    op.execute(sa.text(_COPY_NEWEST_PAYLOAD))
    if context.is_offline_mode():
        op.execute(sa.text(_DELETE_LATER_COPIES))
    else:
        removed = op.get_bind().execute(sa.text(_DELETE_LATER_COPIES)).rowcount
        logger.info("removed %d duplicate session-context row(s) written before the upsert fix", removed)
    op.drop_index(_HELPER_INDEX, table_name=_TABLE)
    op.create_index("ux_cache_session_context_entry", _TABLE, _KEY, unique=True)


def downgrade() -> None:
    # the merged duplicates are not restored
    op.drop_index("ux_cache_session_context_entry", table_name=_TABLE)
