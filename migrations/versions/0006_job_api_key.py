"""job api key

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27

Each job keeps the API key that submitted it, so that a trained version's `version_created` event names
the key behind it (as an import's does), not only the job. Jobs from before stay NULL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply."""
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("api_key_id", sa.String(length=40), nullable=True))


def downgrade() -> None:
    """Revert."""
    if op.get_bind().dialect.name == "sqlite":
        # Not a batch rebuild: it drops `jobs`, and with foreign keys on that deletes every job's progress points
        # (ON DELETE CASCADE). SQLite 3.35+ drops a plain column in place.
        op.execute("ALTER TABLE jobs DROP COLUMN api_key_id")
    else:
        op.drop_column("jobs", "api_key_id")
