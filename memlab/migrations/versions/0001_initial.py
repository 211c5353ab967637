"""The SQL cache tables as first released.

``cache_session_context`` has no unique index on (user_id, session_id, entry_id):
before the upsert fix every session-context write appended a row, so an entry
written twice is stored twice.

Revision ID: 0001_initial
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def _seq() -> sa.Column:
    # BIGSERIAL on PostgreSQL; INTEGER PRIMARY KEY AUTOINCREMENT on SQLite
    return sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True)


def upgrade() -> None:
    op.create_table(
        "cache_qa_entries",
        _seq(),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("qa_id", sa.String(255), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("user_id", "session_id", "qa_id", name="uq_cache_qa_entries_qa"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_cache_qa_entries_session_seq", "cache_qa_entries", ["user_id", "session_id", "seq"])
    op.create_table(
        "cache_session_context",
        _seq(),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("entry_id", sa.String(255), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "cache_session_state",
        sa.Column("user_id", sa.String(255), primary_key=True),
        sa.Column("session_id", sa.String(255), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("expires_at", sa.Float, nullable=True),
        sa.Column("epoch", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_cache_session_state_expiry", "cache_session_state", ["expires_at"])


def downgrade() -> None:
    op.drop_table("cache_session_state")
    op.drop_table("cache_session_context")
    op.drop_index("ix_cache_qa_entries_session_seq", table_name="cache_qa_entries")
    op.drop_table("cache_qa_entries")
