"""Tables of the SQL session cache (SQLite and PostgreSQL share them).

Expiry is kept once per (user, session, kind) in ``cache_session_state``, not
per row, so sliding a session's TTL writes one row however long the session
is. ``epoch`` changes (to a fresh random value) whenever a kind changes other
than by appending; incremental readers compare it to detect that.

This module is the schema at the newest migration (``memlab.migrations.HEAD``):
a fresh database is created from it and stamped. Any change here needs a new
revision in ``memlab/migrations/versions/`` (tests/test_migrations.py checks
that both routes give the same schema).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, Index, Integer, MetaData, String, Table, Text, UniqueConstraint

metadata = MetaData()

_SEQ = BigInteger().with_variant(Integer, "sqlite")

qa_entries = Table(
    "cache_qa_entries",
    metadata,
    Column("seq", _SEQ, primary_key=True, autoincrement=True),
    Column("user_id", String(255), nullable=False),
    Column("session_id", String(255), nullable=False),
    Column("qa_id", String(255), nullable=False),
    Column("payload", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    UniqueConstraint("user_id", "session_id", "qa_id", name="uq_cache_qa_entries_qa"),
    Index("ix_cache_qa_entries_session_seq", "user_id", "session_id", "seq"),
    sqlite_autoincrement=True,
)

session_context = Table(
    "cache_session_context",
    metadata,
    Column("seq", _SEQ, primary_key=True, autoincrement=True),
    Column("user_id", String(255), nullable=False),
    Column("session_id", String(255), nullable=False),
    Column("entry_id", String(255), nullable=False),
    Column("payload", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ux_cache_session_context_entry", "user_id", "session_id", "entry_id", unique=True),
    sqlite_autoincrement=True,
)

session_state = Table(
    "cache_session_state",
    metadata,
    Column("user_id", String(255), primary_key=True),
    Column("session_id", String(255), primary_key=True),
    Column("kind", String(16), primary_key=True),
    Column("expires_at", Float, nullable=True),
    Column("epoch", BigInteger, nullable=False),
    Index("ix_cache_session_state_expiry", "expires_at"),
)

