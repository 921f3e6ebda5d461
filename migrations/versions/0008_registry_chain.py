"""registry event chain

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28

registry_events gain seq, prev_hash and row_hash (NOT NULL) and a unique (registered_model_id, seq) index;
registered_models gain the head of their chain (events_seq, events_hash). Events already there are chained
here, per model in id order, with the functions the service uses (app.services.registry_chain, format v1), and
each model gets its head: after this migration `neurules-admin verify-audit` covers every event. A version or an
alias no event names (made before events were recorded, migration 0003) gets a `version_created` / `alias_set`
event at the end of its model's chain, with no key (the version's job, if any), dated now: the verification
compares each model's versions and aliases with its events.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import context, op

from app.services.audit_chain import GENESIS, START, Link
from app.services.registry_chain import link_event

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHAIN_COLUMNS = ("seq", "prev_hash", "row_hash")
events = sa.table(
    "registry_events",
    sa.column("id", sa.BigInteger()),
    sa.column("tenant_id", sa.String()),
    sa.column("registered_model_id", sa.String()),
    sa.column("at", sa.DateTime(timezone=True)),
    sa.column("action", sa.String()),
    sa.column("alias", sa.String()),
    sa.column("from_version", sa.Integer()),
    sa.column("to_version", sa.Integer()),
    sa.column("api_key_id", sa.String()),
    sa.column("job_id", sa.String()),
    sa.column("seq", sa.Integer()),
    sa.column("prev_hash", sa.String()),
    sa.column("row_hash", sa.String()),
)
models = sa.table(
    "registered_models",
    sa.column("id", sa.String()),
    sa.column("tenant_id", sa.String()),
    sa.column("events_seq", sa.Integer()),
    sa.column("events_hash", sa.String()),
)


def upgrade() -> None:
    """Apply."""
    # plain ADD COLUMN with a default: registered_models is a parent table, which a rebuild would drop (cascades)
    op.add_column("registered_models", sa.Column("events_seq", sa.Integer(), nullable=False, server_default="0"))
    op.add_column(
        "registered_models", sa.Column("events_hash", sa.String(length=64), nullable=False, server_default=GENESIS)
    )
    with op.batch_alter_table("registry_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("seq", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("prev_hash", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("row_hash", sa.String(length=64), nullable=True))
    _chain_existing_events()
    with op.batch_alter_table("registry_events", schema=None) as batch_op:  # a child table: rebuilt on SQLite
        batch_op.alter_column("seq", existing_type=sa.Integer(), nullable=False)
        batch_op.alter_column("prev_hash", existing_type=sa.String(length=64), nullable=False)
        batch_op.alter_column("row_hash", existing_type=sa.String(length=64), nullable=False)
        batch_op.create_index("ux_registry_events_model_seq", ["registered_model_id", "seq"], unique=True)


def _chain_existing_events() -> None:
    """Link every existing event, per model in id order; then write each model's head."""
    if context.is_offline_mode():  # SQL written for later cannot read rows: it is for an empty registry_events
        return
    conn = op.get_bind()
    heads: dict[str, Link] = {}
    rows = [dict(m) for m in conn.execute(sa.select(events).order_by(events.c.id)).mappings()]
    for row in rows:
        heads[row["registered_model_id"]] = link_event(row, heads.get(row["registered_model_id"], START))
    baselines = _baseline_events(conn, rows, heads)
    if baselines:
        conn.execute(events.insert(), baselines)
    if rows:
        conn.execute(
            events.update()
            .where(events.c.id == sa.bindparam("event_id"))
            .values(seq=sa.bindparam("s"), prev_hash=sa.bindparam("p"), row_hash=sa.bindparam("h")),
            [{"event_id": r["id"], "s": r["seq"], "p": r["prev_hash"], "h": r["row_hash"]} for r in rows],
        )
    if heads:
        conn.execute(
            models.update()
            .where(models.c.id == sa.bindparam("model_id"))
            .values(events_seq=sa.bindparam("s"), events_hash=sa.bindparam("h")),
            [{"model_id": m, "s": head.seq, "h": head.row_hash} for m, head in heads.items()],
        )


Row = dict[str, object]


def _baseline_events(conn: sa.Connection, rows: list[Row], heads: dict[str, Link]) -> list[Row]:
    """A `version_created` event for each version and an `alias_set` event for each alias that no event ever named
    (made before events were recorded), linked after their model's head, in that order."""
    created = {(r["registered_model_id"], r["to_version"]) for r in rows if r["action"] == "version_created"}
    named = {(r["registered_model_id"], r["alias"]) for r in rows if r["alias"] is not None}
    versions = sa.table(
        "model_versions", sa.column("id"), sa.column("registered_model_id"), sa.column("version"), sa.column("job_id")
    )
    aliases = sa.table("model_aliases", sa.column("registered_model_id"), sa.column("alias"), sa.column("version_id"))
    made = (
        sa.select(versions.c.registered_model_id, versions.c.version, versions.c.job_id, models.c.tenant_id)
        .join(models, models.c.id == versions.c.registered_model_id)
        .order_by(versions.c.registered_model_id, versions.c.version)
    )
    pointed = (
        sa.select(aliases.c.registered_model_id, aliases.c.alias, versions.c.version, models.c.tenant_id)
        .join(versions, versions.c.id == aliases.c.version_id)
        .join(models, models.c.id == aliases.c.registered_model_id)
        .order_by(aliases.c.registered_model_id, aliases.c.alias)
    )
    now = datetime.now(UTC)
    out: list[Row] = []

    def add(model_id: str, tenant_id: str, action: str, alias: str | None, version: int, job: str | None) -> None:
        row: Row = {
            "tenant_id": tenant_id,
            "registered_model_id": model_id,
            "at": now,
            "action": action,
            "alias": alias,
            "from_version": None,
            "to_version": version,
            "api_key_id": None,
            "job_id": job,
        }
        heads[model_id] = link_event(row, heads.get(model_id, START))
        out.append(row)

    for model_id, version, job_id, tenant_id in conn.execute(made).all():
        if (model_id, version) not in created:
            add(model_id, tenant_id, "version_created", None, version, job_id)
    for model_id, alias, version, tenant_id in conn.execute(pointed).all():
        if (model_id, alias) not in named:
            add(model_id, tenant_id, "alias_set", alias, version, None)
    return out


def downgrade() -> None:
    """Revert (the chain's columns and heads go; the events stay)."""
    with op.batch_alter_table("registry_events", schema=None) as batch_op:
        batch_op.drop_index("ux_registry_events_model_seq")
        for name in CHAIN_COLUMNS:
            batch_op.drop_column(name)
    if op.get_bind().dialect.name == "sqlite":  # in place: no rebuild of a parent table
        op.execute("ALTER TABLE registered_models DROP COLUMN events_hash")
        op.execute("ALTER TABLE registered_models DROP COLUMN events_seq")
    else:
        op.drop_column("registered_models", "events_hash")
        op.drop_column("registered_models", "events_seq")
