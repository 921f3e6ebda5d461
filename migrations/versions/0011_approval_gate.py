"""approval gate: a tenant's approval policy, reviews in the registry chain

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01

Tenants gain `require_approval` (false for every tenant that exists: nothing changes until the operator sets it
with `neurules-admin set-policy`) and `approval_policy_changed_at` (when that was last done). Registry events gain
the review of a version (`version_reviewed`): its `decision` (approve / reject), the reviewer's `note` and the
`evaluation_ids` it rests on, inside the event's hash when set (app.services.registry_chain), so events already
recorded keep their hashes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

from app.db import refused

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EVENT_COLUMNS = (("decision", "VARCHAR(16)", sa.String(length=16)), ("note", "TEXT", sa.Text()))
EVENT_COLUMNS += (("evaluation_ids", "TEXT", sa.Text()),)


def upgrade() -> None:
    """Apply (columns added in place on SQLite: no rebuild of a parent table)."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        op.execute("ALTER TABLE tenants ADD COLUMN require_approval BOOLEAN DEFAULT 0 NOT NULL")
        op.execute("ALTER TABLE tenants ADD COLUMN approval_policy_changed_at DATETIME")
    else:
        op.add_column("tenants", sa.Column("require_approval", sa.Boolean(), nullable=False, server_default=sa.false()))
        op.add_column("tenants", sa.Column("approval_policy_changed_at", sa.DateTime(timezone=True), nullable=True))
    for name, sql_type, column_type in EVENT_COLUMNS:
        if sqlite:
            op.execute(f"ALTER TABLE registry_events ADD COLUMN {name} {sql_type}")
        else:
            op.add_column("registry_events", sa.Column(name, column_type, nullable=True))


def downgrade() -> None:
    """Revert, only while no review is recorded (dropping its columns would leave the review events' hashes
    unverifiable) and no tenant requires approval (going below 0011 would silently lift the gate)."""
    reviews = gated = 0
    if not context.is_offline_mode():  # SQL written for later cannot count rows
        bind = op.get_bind()
        reviews = bind.execute(sa.text("SELECT COUNT(*) FROM registry_events WHERE decision IS NOT NULL")).scalar_one()
        gated = bind.execute(sa.text("SELECT COUNT(*) FROM tenants WHERE require_approval")).scalar_one()
    if reviews:
        raise refused(
            f"{reviews} registry event(s) record a review: going below 0011 would break their hash chain; keep this "
            "schema (older releases serve on it) instead"
        )
    if gated:
        raise refused(
            f"{gated} tenant(s) require approval before an alias moves: going below 0011 would lift that gate; "
            "run `neurules-admin set-policy <tenant> --require-approval off` first"
        )
    sqlite = op.get_bind().dialect.name == "sqlite"
    for name, _, _ in reversed(EVENT_COLUMNS):
        if sqlite:
            op.execute(f"ALTER TABLE registry_events DROP COLUMN {name}")
        else:
            op.drop_column("registry_events", name)
    for name in ("approval_policy_changed_at", "require_approval"):
        if sqlite:
            op.execute(f"ALTER TABLE tenants DROP COLUMN {name}")
        else:
            op.drop_column("tenants", name)
