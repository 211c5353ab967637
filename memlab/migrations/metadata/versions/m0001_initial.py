"""memlab's metadata tables as created before migrations existed.

Users, datasets, dataset permissions, documents (``data``, with their text) and
``pipeline_runs``.

Revision ID: m0001_initial
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("parent_user_id", sa.String(36), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("is_default", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
    )
    # at most one default user, even when two processes race to create it
    op.create_index(
        "ux_users_default", "users", ["is_default"], unique=True, sqlite_where=sa.text("is_default = 1"), postgresql_where=sa.text("is_default")
    )
    op.create_table(
        "datasets",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("owner_id", sa.String(36), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
    )
    op.create_index("ux_datasets_owner_name", "datasets", ["owner_id", "name"], unique=True)
    op.create_table(
        "dataset_permissions",
        sa.Column("dataset_id", sa.String(36), sa.ForeignKey("datasets.id"), primary_key=True),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("permission", sa.String(16), primary_key=True),
    )
    op.create_table(
        "data",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("dataset_id", sa.String(36), sa.ForeignKey("datasets.id"), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("source", sa.Text, nullable=True),
        sa.Column("extension", sa.String(16), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.Integer, nullable=False),
        sa.Column("tags", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
    )
    op.create_index("ux_data_dataset_hash", "data", ["dataset_id", "content_hash"], unique=True)
    op.create_table(
        "pipeline_runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("dataset_id", sa.String(36), nullable=False),
        sa.Column("pipeline_name", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error_class", sa.String(255), nullable=True),
        sa.Column("error_message", sa.Text, nullable=True),
        sa.Column("data_count", sa.Integer, nullable=False),
        sa.Column("started_at", sa.String(40), nullable=False),
        sa.Column("finished_at", sa.String(40), nullable=True),
    )
    op.create_index("ix_pipeline_runs_dataset", "pipeline_runs", ["dataset_id", "started_at"])


def downgrade() -> None:
    for table in ("pipeline_runs", "data", "dataset_permissions", "datasets", "users"):
        op.drop_table(table)
