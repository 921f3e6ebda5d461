"""version seal

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28

A `version_created` registry event carries the SHA-256 of the version's rule list (`content_sha256`), inside the
event's hash, so a stored rule list changed afterwards no longer matches its chain (`verify-audit`:
version_content_mismatch). Events already recorded keep no seal (their hash is unchanged: the body holds the
column only when it is set) and are not checked for a seal.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply."""
    if op.get_bind().dialect.name == "sqlite":
        # in place: a batch rebuild would drop the table's append-only triggers
        op.execute("ALTER TABLE registry_events ADD COLUMN content_sha256 VARCHAR(64)")
    else:
        op.add_column("registry_events", sa.Column("content_sha256", sa.String(length=64), nullable=True))


def downgrade() -> None:
    """Revert (the seals recorded meanwhile are dropped, and with them those events' hashes no longer verify)."""
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE registry_events DROP COLUMN content_sha256")
    else:
        op.drop_column("registry_events", "content_sha256")
