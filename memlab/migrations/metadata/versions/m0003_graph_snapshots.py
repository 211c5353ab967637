"""Permanent memory in the metadata database: versioned graph + vector snapshots per dataset.

* ``graph_snapshots``: the committed version of each dataset and its token (new on every save);
* ``graph_snapshot_files``: the files of each version (``graph.json``, ``<collection>.faiss``,
  ``<collection>.ids.json``, ``meta.json``), as the file store writes them.

Used when ``MEMLAB_DB_URL`` names a PostgreSQL database; empty otherwise.

Revision ID: m0003_graph_snapshots
Revises: m0002_sessions_usage
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0003_graph_snapshots"
down_revision = "m0002_sessions_usage"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "graph_snapshots",
        sa.Column("dataset_id", sa.String(36), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("token", sa.String(36), nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
    )
    op.create_table(
        "graph_snapshot_files",
        sa.Column("dataset_id", sa.String(36), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("graph_snapshot_files")
    op.drop_table("graph_snapshots")
