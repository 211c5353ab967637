"""Feedback weights of graph elements: ``element_feedback_weights`` (element id -> weight in [0, 1]).

Rated session turns move the weight of the nodes and edges they used (:mod:`memlab.flows.feedback`);
retrieval blends it into a triplet's distance when ``feedback_influence`` is above 0.

Revision ID: m0006_feedback_weights
Revises: m0005_unpriced_split
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0006_feedback_weights"
down_revision = "m0005_unpriced_split"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "element_feedback_weights",
        sa.Column("element_id", sa.String(255), primary_key=True),
        sa.Column("weight", sa.Float, nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("element_feedback_weights")
