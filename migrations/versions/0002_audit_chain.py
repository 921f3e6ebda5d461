"""audit hash chain

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02

audit_log gains seq, prev_hash, row_hash (NOT NULL) and missing_filled (NULL for rows written
before this migration: not recorded), a unique (tenant_id, seq) index, and the table
audit_chain_heads. Rows already there are chained here, per tenant in id order, with the same
functions the service uses (app.services.audit_chain, format v1), and each tenant gets its head:
after this migration every row is covered by `neurules-admin verify-audit`. The append-only
triggers are lifted only inside this migration's transaction (PostgreSQL) or around it (SQLite,
whose table is rebuilt to make the columns NOT NULL) and are back when it ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import context, op

from app.db import refused
from app.services.audit_chain import START, Link, link_rows

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PAGE_ROWS = 5000
CHAIN_COLUMNS = ("seq", "prev_hash", "row_hash")
SQLITE_TRIGGERS = [
    "CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log "
    "BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END",
    "CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log "
    "BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END",
]

audit_log = sa.table(
    "audit_log",
    sa.column("id", sa.BigInteger()),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("tenant_id", sa.String()),
    sa.column("api_key_id", sa.String()),
    sa.column("model_version_id", sa.String()),
    sa.column("input_digest", sa.String()),
    sa.column("output", sa.JSON()),
    sa.column("rule_id", sa.Integer()),
    sa.column("missing_filled", sa.Boolean()),
    sa.column("seq", sa.BigInteger()),
    sa.column("prev_hash", sa.String()),
    sa.column("row_hash", sa.String()),
)
heads = sa.table(
    "audit_chain_heads",
    sa.column("tenant_id", sa.String()),
    sa.column("seq", sa.BigInteger()),
    sa.column("row_hash", sa.String()),
    sa.column("updated_at", sa.DateTime(timezone=True)),
)


def _is_sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def upgrade() -> None:
    """Apply."""
    sqlite = _is_sqlite()
    if sqlite:  # the table is rebuilt below, which would drop them anyway
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_update")
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_delete")
    else:
        op.execute("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_change")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("seq", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("prev_hash", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("row_hash", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("missing_filled", sa.Boolean(), nullable=True))
    op.create_table(
        "audit_chain_heads",
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("row_hash", sa.String(length=64), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_audit_chain_heads")),
    )
    _chain_existing_rows()
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        for name in CHAIN_COLUMNS:
            batch_op.alter_column(name, existing_type=_type_of(name), nullable=False)
        batch_op.create_index("ux_audit_log_tenant_seq", ["tenant_id", "seq"], unique=True)
    if sqlite:
        for stmt in SQLITE_TRIGGERS:
            op.execute(stmt)
    else:
        op.execute("ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_change")


def _type_of(name: str) -> sa.types.TypeEngine[Any]:
    return sa.BigInteger() if name == "seq" else sa.String(length=64)


def _chain_existing_rows() -> None:
    """Link every existing row, per tenant in id order, in pages; then write each tenant's head."""
    if context.is_offline_mode():
        # SQL written for later (`alembic upgrade --sql`) cannot read rows: it is for an empty audit_log, and run
        # on one holding rows it stops at the NOT NULL step below instead of leaving rows unchained.
        return
    conn = op.get_bind()
    tails: dict[str, Link] = {}
    after = 0
    while True:
        q = sa.select(audit_log).where(audit_log.c.id > after).order_by(audit_log.c.id).limit(PAGE_ROWS)
        page = [dict(m) for m in conn.execute(q).mappings()]
        if not page:
            break
        for row in page:
            tails[row["tenant_id"]] = link_rows([row], tails.get(row["tenant_id"], START))
        conn.execute(
            audit_log.update()
            .where(audit_log.c.id == sa.bindparam("row_id"))
            .values(seq=sa.bindparam("s"), prev_hash=sa.bindparam("p"), row_hash=sa.bindparam("h")),
            [{"row_id": r["id"], "s": r["seq"], "p": r["prev_hash"], "h": r["row_hash"]} for r in page],
        )
        after = page[-1]["id"]
    now = datetime.now(UTC)
    if tails:
        conn.execute(
            heads.insert(),
            [
                {"tenant_id": t, "seq": link.seq, "row_hash": link.row_hash, "updated_at": now}
                for t, link in tails.items()
            ],
        )


def _refuse_dropping_a_chain() -> None:
    """RuntimeError when audit_log has rows: going below 0002 would drop their links, heads and `missing_filled`,
    and upgrading again would re-hash every row, so a head recorded outside the database would stop matching."""
    if context.is_offline_mode():
        return
    n = op.get_bind().execute(sa.text("SELECT count(*) FROM audit_log")).scalar_one()
    if n:
        raise refused(
            f"audit_log holds {n} rows: a downgrade below 0002 would drop their hash chain and missing_filled, "
            "and upgrading again would re-hash every row; stay at 0002 or later (nothing was changed)"
        )


def downgrade() -> None:
    """Revert (the chain columns and heads are dropped); refused while audit_log holds rows."""
    _refuse_dropping_a_chain()
    sqlite = _is_sqlite()
    if sqlite:
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_update")
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_delete")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index("ux_audit_log_tenant_seq")
        for name in (*CHAIN_COLUMNS, "missing_filled"):
            batch_op.drop_column(name)
    op.drop_table("audit_chain_heads")
    if sqlite:
        for stmt in SQLITE_TRIGGERS:
            op.execute(stmt)
