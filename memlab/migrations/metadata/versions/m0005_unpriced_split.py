"""Unpriced tokens counted apart on every usage row, so a partly priced total is never a silent $0 nor a lost cost.

``session_model_usage`` gets ``unpriced_tokens_in`` / ``unpriced_tokens_out`` and keeps the
priced calls' cost in ``cost_usd`` (before: NULL once any call was unpriced, which dropped
the priced part); ``session_records`` gets ``unpriced_embedding_tokens``. Existing rows:
a NULL-cost model row becomes wholly unpriced (cost 0, every token unpriced: its priced
part was never stored), and each record's unpriced embedding tokens are summed from its
embedding rows.

Revision ID: m0005_unpriced_split
Revises: m0004_session_datasets
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0005_unpriced_split"
down_revision = "m0004_session_datasets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("session_model_usage") as table:
        table.add_column(sa.Column("unpriced_tokens_in", sa.Integer, nullable=False, server_default="0"))
        table.add_column(sa.Column("unpriced_tokens_out", sa.Integer, nullable=False, server_default="0"))
    with op.batch_alter_table("session_records") as table:
        table.add_column(sa.Column("unpriced_embedding_tokens", sa.Integer, nullable=False, server_default="0"))
    op.execute(
        "UPDATE session_model_usage SET unpriced_tokens_in = tokens_in, unpriced_tokens_out = tokens_out, cost_usd = 0 "
        "WHERE cost_usd IS NULL"
    )
    op.execute(
        "UPDATE session_records SET unpriced_embedding_tokens = (SELECT COALESCE(SUM(m.unpriced_tokens_in), 0) "
        "FROM session_model_usage m WHERE m.session_id = session_records.session_id AND m.user_id = session_records.user_id "
        "AND m.kind = 'embedding')"
    )


def downgrade() -> None:
    op.execute("UPDATE session_model_usage SET cost_usd = NULL WHERE unpriced_tokens_in + unpriced_tokens_out > 0")
    with op.batch_alter_table("session_records") as table:
        table.drop_column("unpriced_embedding_tokens")
    with op.batch_alter_table("session_model_usage") as table:
        table.drop_column("unpriced_tokens_out")
        table.drop_column("unpriced_tokens_in")
