"""Every dataset a session's turns read: ``session_datasets`` (session, user, dataset).

A session is attributed to one dataset in ``session_records``; a turn that searched
another dataset (or several) is recorded here too, so a delete in any dataset a
session read finds that session (:mod:`memlab.provenance`). Existing attributed
sessions are copied in.

Revision ID: m0004_session_datasets
Revises: m0003_graph_snapshots
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0004_session_datasets"
down_revision = "m0003_graph_snapshots"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "session_datasets",
        sa.Column("session_id", sa.String(255), primary_key=True),
        sa.Column("user_id", sa.String(36), primary_key=True),
        sa.Column("dataset_id", sa.String(36), primary_key=True),
    )
    op.create_index("ix_session_datasets_dataset", "session_datasets", ["dataset_id"])
    op.execute(
        "INSERT INTO session_datasets (session_id, user_id, dataset_id) "
        "SELECT session_id, user_id, dataset_id FROM session_records WHERE dataset_id IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_index("ix_session_datasets_dataset", table_name="session_datasets")
    op.drop_table("session_datasets")
