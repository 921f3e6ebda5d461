"""key scope

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28

Each API key has a scope (`app.services.key_scopes`): `full`, what every key could do before (the keys that exist
get it), or `predict`, decisions only.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply."""
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("scope", sa.String(length=20), nullable=False, server_default="full"))


def downgrade() -> None:
    """Revert (a `predict` key becomes a full one: downgrade only while none is handed out)."""
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE api_keys DROP COLUMN scope")  # in place, as 0006: no rebuild of a parent table
    else:
        op.drop_column("api_keys", "scope")
