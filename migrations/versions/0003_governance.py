"""governance: evaluations, job progress points, registry events

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26

Evaluations of model versions on labelled datasets (immutable results, with state and progress for
background runs), every progress point a training worker writes, and the registry's events (alias
set / moved / deleted, version created), written in the same transaction as the change.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Apply."""
    op.create_table(
        "registry_events",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("registered_model_id", sa.String(length=40), nullable=False),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("alias", sa.String(length=64), nullable=True),
        sa.Column("from_version", sa.Integer(), nullable=True),
        sa.Column("to_version", sa.Integer(), nullable=True),
        sa.Column("api_key_id", sa.String(length=40), nullable=True),
        sa.Column("job_id", sa.String(length=40), nullable=True),
        sa.ForeignKeyConstraint(
            ["registered_model_id"],
            ["registered_models.id"],
            name=op.f("fk_registry_events_registered_model_id_registered_models"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_registry_events_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_registry_events")),
    )
    op.create_index("ix_registry_events_model", "registry_events", ["registered_model_id", "id"])

    op.create_table(
        "evaluations",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("model_version_id", sa.String(length=40), nullable=False),
        sa.Column("dataset_id", sa.String(length=40), nullable=False),
        sa.Column("target", sa.String(length=300), nullable=False),
        sa.Column("slice_by", sa.String(length=300), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("n_rows_in_file", sa.Integer(), nullable=True),
        sa.Column("n_rows", sa.Integer(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=True),
        sa.Column("heartbeat_at", TIMESTAMP, nullable=True),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["model_version_id"],
            ["model_versions.id"],
            name=op.f("fk_evaluations_model_version_id_model_versions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_evaluations_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evaluations")),
    )
    op.create_index("ix_evaluations_state_heartbeat", "evaluations", ["state", "heartbeat_at"])
    op.create_index(
        "ix_evaluations_tenant_version_created", "evaluations", ["tenant_id", "model_version_id", "created_at"]
    )

    op.create_table(
        "job_progress_points",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("loss", sa.Float(), nullable=True),
        sa.Column("val_score", sa.Float(), nullable=True),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_progress_points_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_progress_points")),
    )
    op.create_index("ix_job_progress_points_job", "job_progress_points", ["job_id", "id"])


def downgrade() -> None:
    """Revert."""
    op.drop_index("ix_job_progress_points_job", table_name="job_progress_points")
    op.drop_table("job_progress_points")
    op.drop_index("ix_evaluations_tenant_version_created", table_name="evaluations")
    op.drop_index("ix_evaluations_state_heartbeat", table_name="evaluations")
    op.drop_table("evaluations")
    op.drop_index("ix_registry_events_model", table_name="registry_events")
    op.drop_table("registry_events")
