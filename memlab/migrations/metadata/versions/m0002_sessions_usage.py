"""Session lifecycle and usage records, and API keys.

* ``session_records``: one row per (session, user): the dataset the session is
  attributed to, the stored status (``running`` / ``completed`` / ``failed``), times,
  token and cost counters (priced, unpriced and embedding), errors, the last model;
* ``session_model_usage``: one row per (session, user, model, kind): calls, tokens, the
  cost (NULL when the model is unpriced), where the token figures came from;
* ``api_keys``: SHA-256 hashes of the HTTP API's per-user keys.

Revision ID: m0002_sessions_usage
Revises: m0001_initial
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0002_sessions_usage"
down_revision = "m0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "session_records",
        sa.Column("session_id", sa.String(255), primary_key=True),
        sa.Column("user_id", sa.String(36), primary_key=True),
        sa.Column("dataset_id", sa.String(36), nullable=True),
        sa.Column("agent_id", sa.String(36), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", sa.String(40), nullable=False),
        sa.Column("last_activity_at", sa.String(40), nullable=False),
        sa.Column("ended_at", sa.String(40), nullable=True),
        sa.Column("tokens_in", sa.Integer, nullable=False),
        sa.Column("tokens_out", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=False),
        sa.Column("embedding_tokens", sa.Integer, nullable=False),
        sa.Column("embedding_cost_usd", sa.Float, nullable=False),
        sa.Column("error_count", sa.Integer, nullable=False),
        sa.Column("last_model", sa.Text, nullable=True),
        sa.Column("unpriced_tokens_in", sa.Integer, nullable=False),
        sa.Column("unpriced_tokens_out", sa.Integer, nullable=False),
    )
    op.create_index("ix_session_records_dataset", "session_records", ["dataset_id"])
    op.create_index("ix_session_records_user_activity", "session_records", ["user_id", "last_activity_at"])
    op.create_table(
        "session_model_usage",
        sa.Column("session_id", sa.String(255), primary_key=True),
        sa.Column("user_id", sa.String(36), primary_key=True),
        sa.Column("model", sa.Text, primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("calls", sa.Integer, nullable=False),
        sa.Column("tokens_in", sa.Integer, nullable=False),
        sa.Column("tokens_out", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=True),
        sa.Column("usage_source", sa.String(16), nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("revoked_at", sa.String(40), nullable=True),
    )
    op.create_index("ix_api_keys_user", "api_keys", ["user_id"])


def downgrade() -> None:
    for table in ("api_keys", "session_model_usage", "session_records"):
        op.drop_table(table)
