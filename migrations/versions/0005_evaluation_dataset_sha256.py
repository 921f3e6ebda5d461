"""evaluation dataset sha256

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26

Each evaluation keeps the SHA-256 of the file it scored, so whether it was the version's training file
stays known after the dataset is deleted (evaluations outlive their datasets). Rows from before stay NULL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply."""
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("dataset_sha256", sa.String(length=64), nullable=True))


def downgrade() -> None:
    """Revert."""
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.drop_column("dataset_sha256")
