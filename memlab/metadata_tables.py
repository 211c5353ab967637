"""The tables of memlab's metadata database (``memlab.db``), as SQLAlchemy Core ``Table`` objects.

:mod:`memlab.relational` queries them; the metadata migration lineage
(:data:`memlab.migrations.METADATA`) creates a fresh database from :data:`metadata`
and its revisions must build the same schema (``tests/test_migrations.py``).
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, Float, ForeignKey, Index, Integer, LargeBinary, MetaData, String, Table, Text

__all__ = [
    "api_keys",
    "data",
    "dataset_permissions",
    "datasets",
    "graph_snapshot_files",
    "graph_snapshots",
    "metadata",
    "pipeline_runs",
    "session_model_usage",
    "session_records",
    "users",
]

metadata = MetaData()

users = Table(
    "users",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("parent_user_id", String(36), ForeignKey("users.id"), nullable=True),
    Column("is_default", Boolean, nullable=False, default=False),
    Column("created_at", String(40), nullable=False),
)
# at most one default user, even when two processes race to create it
Index(
    "ux_users_default",
    users.c.is_default,
    unique=True,
    sqlite_where=users.c.is_default.is_(True),
    postgresql_where=users.c.is_default.is_(True),
)

datasets = Table(
    "datasets",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("owner_id", String(36), ForeignKey("users.id"), nullable=False),
    Column("created_at", String(40), nullable=False),
    Index("ux_datasets_owner_name", "owner_id", "name", unique=True),
)

dataset_permissions = Table(
    "dataset_permissions",
    metadata,
    Column("dataset_id", String(36), ForeignKey("datasets.id"), primary_key=True),
    Column("user_id", String(36), ForeignKey("users.id"), primary_key=True),
    Column("permission", String(16), primary_key=True),
)

data = Table(
    "data",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("dataset_id", String(36), ForeignKey("datasets.id"), nullable=False),
    Column("name", String(255), nullable=False),
    Column("source", Text, nullable=True),
    Column("extension", String(16), nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("size_bytes", Integer, nullable=False),
    Column("tags", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("created_at", String(40), nullable=False),
    Index("ux_data_dataset_hash", "dataset_id", "content_hash", unique=True),
)

pipeline_runs = Table(
    "pipeline_runs",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("dataset_id", String(36), nullable=False),
    Column("pipeline_name", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("error_class", String(255), nullable=True),
    Column("error_message", Text, nullable=True),
    Column("data_count", Integer, nullable=False),
    Column("started_at", String(40), nullable=False),
    Column("finished_at", String(40), nullable=True),
    Index("ix_pipeline_runs_dataset", "dataset_id", "started_at"),
)

session_records = Table(
    "session_records",
    metadata,
    Column("session_id", String(255), primary_key=True),
    Column("user_id", String(36), primary_key=True),
    Column("dataset_id", String(36), nullable=True),
    Column("agent_id", String(36), nullable=True),
    Column("status", String(16), nullable=False, default="running"),
    Column("started_at", String(40), nullable=False),
    Column("last_activity_at", String(40), nullable=False),
    Column("ended_at", String(40), nullable=True),
    Column("tokens_in", Integer, nullable=False, default=0),
    Column("tokens_out", Integer, nullable=False, default=0),
    Column("cost_usd", Float, nullable=False, default=0.0),
    Column("embedding_tokens", Integer, nullable=False, default=0),
    Column("embedding_cost_usd", Float, nullable=False, default=0.0),
    Column("error_count", Integer, nullable=False, default=0),
    Column("last_model", Text, nullable=True),
    Column("unpriced_tokens_in", Integer, nullable=False, default=0),
    Column("unpriced_tokens_out", Integer, nullable=False, default=0),
    Column("unpriced_embedding_tokens", Integer, nullable=False, default=0, server_default="0"),
    Index("ix_session_records_dataset", "dataset_id"),
    Index("ix_session_records_user_activity", "user_id", "last_activity_at"),
)

# every dataset a session's turns read (one row per session, user, dataset): the delete cleaner's
# candidates beyond the session's attributed dataset (memlab.provenance)
session_datasets = Table(
    "session_datasets",
    metadata,
    Column("session_id", String(255), primary_key=True),
    Column("user_id", String(36), primary_key=True),
    Column("dataset_id", String(36), primary_key=True),
    Index("ix_session_datasets_dataset", "dataset_id"),
)

session_model_usage = Table(
    "session_model_usage",
    metadata,
    Column("session_id", String(255), primary_key=True),
    Column("user_id", String(36), primary_key=True),
    Column("model", Text, primary_key=True),
    Column("kind", String(16), primary_key=True),
    Column("calls", Integer, nullable=False, default=0),
    Column("tokens_in", Integer, nullable=False, default=0),
    Column("tokens_out", Integer, nullable=False, default=0),
    Column("cost_usd", Float, nullable=True),  # the priced calls' cost (NULL only on rows older than m0005 that were unpriced)
    Column("usage_source", String(16), nullable=False),
    Column("updated_at", String(40), nullable=False),
    Column("unpriced_tokens_in", Integer, nullable=False, default=0, server_default="0"),
    Column("unpriced_tokens_out", Integer, nullable=False, default=0, server_default="0"),
)

# the feedback weight of each graph element rated turns used (memlab.flows.feedback)
element_feedback_weights = Table(
    "element_feedback_weights",
    metadata,
    Column("element_id", String(255), primary_key=True),
    Column("weight", Float, nullable=False),
    Column("updated_at", String(40), nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("user_id", String(36), ForeignKey("users.id"), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("revoked_at", String(40), nullable=True),
    Index("ix_api_keys_user", "user_id"),
)

# permanent memory shared through the metadata database (MEMLAB_DB_URL on PostgreSQL; see memlab.graph.PostgresSnapshots)
graph_snapshots = Table(
    "graph_snapshots",
    metadata,
    Column("dataset_id", String(36), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("token", String(36), nullable=False),
    Column("updated_at", String(40), nullable=False),
)

graph_snapshot_files = Table(
    "graph_snapshot_files",
    metadata,
    Column("dataset_id", String(36), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("name", String(255), primary_key=True),
    Column("data", LargeBinary, nullable=False),
)
