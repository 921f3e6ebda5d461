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
from alembic import context, op

from app.db import refused

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply."""
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE registry_events ADD COLUMN content_sha256 VARCHAR(64)")  # in place, no rebuild
    else:
        op.add_column("registry_events", sa.Column("content_sha256", sa.String(length=64), nullable=True))


def downgrade() -> None:
    """Revert, only while no event carries a seal: dropping seals would leave those events' hashes unverifiable
    (the chain would read as tampered with), so a database with sealed versions stays at 0009."""
    n = 0
    if not context.is_offline_mode():  # SQL written for later cannot count rows
        sealed = op.get_bind().execute(sa.text("SELECT COUNT(*) FROM registry_events WHERE content_sha256 IS NOT NULL"))
        n = sealed.scalar_one()
    if n:
        raise refused(
            f"{n} registry event(s) carry a version seal: going below 0009 would break their hash chain; "
            "keep this schema (older releases serve on it) instead"
        )
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE registry_events DROP COLUMN content_sha256")
    else:
        op.drop_column("registry_events", "content_sha256")
