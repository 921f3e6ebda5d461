"""registry names and version details in the chain

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29

Registry events gain `model_name` (every new event carries its model's name) and `details_sha256` (a
`version_created` event's seal of the version's metrics, input schema and provenance), both inside the event's
hash when set (app.services.registry_chain), so a model renamed in the database (two models' names swapped:
`heart@production` resolving to the other model) or a version's scores or provenance changed no longer verify.
Events already recorded keep their hashes (the body holds the new columns only when they are set). Nothing is
written to the chains here: a model made before this migration is bound by its next event, or by
`neurules-admin bind-model-names` once no older release runs (an older release cannot list a `name_bound` event).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

from app.db import refused

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NEW_COLUMNS = (("details_sha256", 64), ("model_name", 100))


def upgrade() -> None:
    """Apply."""
    for name, length in NEW_COLUMNS:
        if op.get_bind().dialect.name == "sqlite":
            op.execute(f"ALTER TABLE registry_events ADD COLUMN {name} VARCHAR({length})")  # in place, no rebuild
        else:
            op.add_column("registry_events", sa.Column(name, sa.String(length=length), nullable=True))


def downgrade() -> None:
    """Revert, only while no event carries a name or a details seal: dropping them would leave those events'
    hashes unverifiable (the chain would read as tampered with), so a database with such events stays at 0010."""
    n = 0
    if not context.is_offline_mode():  # SQL written for later cannot count rows
        bound = op.get_bind().execute(
            sa.text("SELECT COUNT(*) FROM registry_events WHERE model_name IS NOT NULL OR details_sha256 IS NOT NULL")
        )
        n = bound.scalar_one()
    if n:
        raise refused(
            f"{n} registry event(s) carry a model name or a details seal: going below 0010 would break their hash "
            "chain; keep this schema (older releases serve on it) instead"
        )
    for name, _ in reversed(NEW_COLUMNS):
        if op.get_bind().dialect.name == "sqlite":
            op.execute(f"ALTER TABLE registry_events DROP COLUMN {name}")
        else:
            op.drop_column("registry_events", name)
