"""worker heartbeats

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26

One row per live training worker, refreshed every few seconds, so /readyz can count live workers
whatever the broker (see app/services/workers.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply."""
    op.create_table(
        "worker_heartbeats",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("queue", sa.String(length=200), nullable=False),
        sa.Column("hostname", sa.String(length=200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_worker_heartbeats")),
    )
    with op.batch_alter_table("worker_heartbeats", schema=None) as batch_op:
        batch_op.create_index("ix_worker_heartbeats_queue_seen", ["queue", "seen_at"], unique=False)


def downgrade() -> None:
    """Revert."""
    with op.batch_alter_table("worker_heartbeats", schema=None) as batch_op:
        batch_op.drop_index("ix_worker_heartbeats_queue_seen")
    op.drop_table("worker_heartbeats")
