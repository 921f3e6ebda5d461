"""registry names and version details in the chain

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29

Registry events gain `model_name` (every new event carries its model's name) and `details_sha256` (a
`version_created` event's seal of the version's metrics, input schema and provenance), both inside the event's
hash when set, so a model renamed in the database (two models' names swapped: `heart@production` resolving to the
other model) or a version's scores or provenance changed no longer verify. Each model there is gets a `name_bound`
event at the end of its chain, with its name, no key, dated now (app.services.registry_chain, the functions the
service uses), so the names of models made before this migration are bound too. Events already recorded keep
their hashes (the body holds the new columns only when they are set).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import context, op

from app.services.audit_chain import Link
from app.services.registry_chain import link_event

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NEW_COLUMNS = (("details_sha256", 64), ("model_name", 100))
events = sa.table(
    "registry_events",
    sa.column("tenant_id", sa.String()),
    sa.column("registered_model_id", sa.String()),
    sa.column("at", sa.DateTime(timezone=True)),
    sa.column("action", sa.String()),
    sa.column("alias", sa.String()),
    sa.column("from_version", sa.Integer()),
    sa.column("to_version", sa.Integer()),
    sa.column("api_key_id", sa.String()),
    sa.column("job_id", sa.String()),
    sa.column("content_sha256", sa.String()),
    sa.column("details_sha256", sa.String()),
    sa.column("model_name", sa.String()),
    sa.column("seq", sa.Integer()),
    sa.column("prev_hash", sa.String()),
    sa.column("row_hash", sa.String()),
)
models = sa.table(
    "registered_models",
    sa.column("id", sa.String()),
    sa.column("tenant_id", sa.String()),
    sa.column("name", sa.String()),
    sa.column("events_seq", sa.Integer()),
    sa.column("events_hash", sa.String()),
)


def upgrade() -> None:
    """Apply."""
    for name, length in NEW_COLUMNS:
        if op.get_bind().dialect.name == "sqlite":
            op.execute(f"ALTER TABLE registry_events ADD COLUMN {name} VARCHAR({length})")  # in place, no rebuild
        else:
            op.add_column("registry_events", sa.Column(name, sa.String(length=length), nullable=True))
    _bind_names()


def _bind_names() -> None:
    """A `name_bound` event with its name at the end of each model's chain; each model's head moved to it."""
    if context.is_offline_mode():  # SQL written for later cannot read rows: it is for an empty registry
        return
    conn = op.get_bind()
    now = datetime.now(UTC)
    rows, heads = [], {}
    for m in conn.execute(sa.select(models).order_by(models.c.id)).mappings():
        row: dict[str, object] = {
            "tenant_id": m["tenant_id"],
            "registered_model_id": m["id"],
            "at": now,
            "action": "name_bound",
            "alias": None,
            "from_version": None,
            "to_version": None,
            "api_key_id": None,
            "job_id": None,
            "content_sha256": None,
            "details_sha256": None,
            "model_name": m["name"],
        }
        heads[m["id"]] = link_event(row, Link(m["events_seq"], m["events_hash"]))
        rows.append(row)
    if not rows:
        return
    conn.execute(events.insert(), rows)
    conn.execute(
        models.update()
        .where(models.c.id == sa.bindparam("model_id"))
        .values(events_seq=sa.bindparam("s"), events_hash=sa.bindparam("h")),
        [{"model_id": m, "s": head.seq, "h": head.row_hash} for m, head in heads.items()],
    )


def downgrade() -> None:
    """Revert, only while no event carries a name or a details seal: dropping them would leave those events'
    hashes unverifiable (the chain would read as tampered with), so a database with such events stays at 0010."""
    bound = op.get_bind().execute(
        sa.text("SELECT COUNT(*) FROM registry_events WHERE model_name IS NOT NULL OR details_sha256 IS NOT NULL")
    )
    n = bound.scalar_one()
    if n:
        raise RuntimeError(
            f"{n} registry event(s) carry a model name or a details seal: going below 0010 would break their hash "
            "chain; keep this schema (older releases serve on it) instead"
        )
    for name, _ in reversed(NEW_COLUMNS):
        if op.get_bind().dialect.name == "sqlite":
            op.execute(f"ALTER TABLE registry_events DROP COLUMN {name}")
        else:
            op.drop_column("registry_events", name)
