"""ORM tables. Alembic migrations under `migrations/` are the only way this schema changes."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.services.job_states import JobState

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


NO_EVENT_HASH = "0" * 64  # a registered model's event chain before its first event (= audit_chain.GENESIS)


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def new_id(prefix: str) -> str:
    """A random, prefixed, URL-safe identifier such as `ds_3f2a...`."""
    return f"{prefix}_{secrets.token_hex(12)}"


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored as UTC and always read back timezone-aware (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Normalise to UTC before storing."""
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Attach UTC to naive values read back."""
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class JobStateType(TypeDecorator[JobState]):
    """A job state stored as its string and read back as `JobState`."""

    impl = String(16)
    cache_ok = True

    def process_bind_param(self, value: JobState | str | None, dialect: Dialect) -> str | None:
        """Store the state's value (a plain string that is not a state is refused)."""
        return None if value is None else JobState(value).value

    def process_result_value(self, value: str | None, dialect: Dialect) -> JobState | None:
        """Read the string back as a state."""
        return None if value is None else JobState(value)


class Base(DeclarativeBase):
    """Declarative base with a stable constraint naming convention."""

    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime(), dict[str, Any]: JSON, list[Any]: JSON}


class Tenant(Base):
    """A customer account; every resource belongs to exactly one."""

    __tablename__ = "tenants"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # the operator's policy (`neurules-admin set-policy`, migration 0011): an alias may point only at a version whose
    # latest review approved it (`app.services.reviews`); when that policy was last set (NULL: never)
    require_approval: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    approval_policy_changed_at: Mapped[datetime | None] = mapped_column(default=None)


class ApiKey(Base):
    """An API key of a tenant, stored as a SHA-256 hash; `prefix` locates it."""

    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    prefix: Mapped[str] = mapped_column(String(32), unique=True)
    key_hash: Mapped[str] = mapped_column(String(64))
    label: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
    scope: Mapped[str] = mapped_column(String(20), default="full", server_default="full")  # `key_scopes`


class Blob(Base):
    """Bytes behind the storage interface (dataset CSVs); readable by every worker."""

    __tablename__ = "blobs"
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Dataset(Base):
    """An uploaded, validated and profiled CSV."""

    __tablename__ = "datasets"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    filename: Mapped[str] = mapped_column(String(300))
    sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    n_rows: Mapped[int] = mapped_column(Integer)
    n_columns: Mapped[int] = mapped_column(Integer)
    columns: Mapped[list[Any]] = mapped_column(JSON)
    blob_key: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (Index("ix_datasets_tenant_created", "tenant_id", "created_at"),)


class RegisteredModel(Base):
    """A named model of a tenant; its versions are immutable, its aliases movable."""

    __tablename__ = "registered_models"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # the head of the model's registry event chain (`registry_chain`): its last event's seq and hash
    events_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    events_hash: Mapped[str] = mapped_column(String(64), default=NO_EVENT_HASH, server_default=NO_EVENT_HASH)

    __table_args__ = (UniqueConstraint("tenant_id", "name", name="uq_registered_models_tenant_name"),)


class ModelVersion(Base):
    """One immutable trained (or imported) rule list with metrics, schema and provenance."""

    __tablename__ = "model_versions"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    registered_model_id: Mapped[str] = mapped_column(ForeignKey("registered_models.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    rule_list: Mapped[dict[str, Any]] = mapped_column(JSON)
    text: Mapped[str] = mapped_column(Text)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    input_schema: Mapped[list[Any]] = mapped_column(JSON)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSON)
    job_id: Mapped[str | None] = mapped_column(String(40), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (UniqueConstraint("registered_model_id", "version", name="uq_model_versions_model_version"),)


class ModelAlias(Base):
    """A movable pointer `name@alias` -> version."""

    __tablename__ = "model_aliases"
    registered_model_id: Mapped[str] = mapped_column(
        ForeignKey("registered_models.id", ondelete="CASCADE"), primary_key=True
    )
    alias: Mapped[str] = mapped_column(String(64), primary_key=True)
    version_id: Mapped[str] = mapped_column(ForeignKey("model_versions.id", ondelete="CASCADE"))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class Job(Base):
    """A training job; this row is the source of truth for its state and progress."""

    __tablename__ = "jobs"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"), index=True)
    dataset_sha256: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(300))
    model_name: Mapped[str] = mapped_column(String(100))
    parameters: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[JobState] = mapped_column(JobStateType(), default=JobState.QUEUED)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    n_epochs: Mapped[int] = mapped_column(Integer, default=0)
    loss: Mapped[float | None] = mapped_column(Float, default=None)
    val_score: Mapped[float | None] = mapped_column(Float, default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(200), default=None)
    device: Mapped[str | None] = mapped_column(String(32), default=None)
    model_version_id: Mapped[str | None] = mapped_column(
        ForeignKey("model_versions.id", ondelete="SET NULL"), default=None
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    heartbeat_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    # the API key that submitted the job (NULL: a job from before migration 0006)
    api_key_id: Mapped[str | None] = mapped_column(String(40), default=None)

    __table_args__ = (
        Index("ix_jobs_tenant_state", "tenant_id", "state"),
        Index("ix_jobs_state_heartbeat", "state", "heartbeat_at"),
    )


class AuditRecord(Base):
    """Append-only record of one prediction decision (UPDATE/DELETE refused by triggers).

    Each tenant's rows form a hash chain (docs/audit.md): `seq` counts the tenant's rows from 1,
    `prev_hash` is the previous row's `row_hash` and `row_hash` is the SHA-256 of the row's canonical
    content (`app.services.audit_chain`).
    """

    __tablename__ = "audit_log"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    tenant_id: Mapped[str] = mapped_column(String(40))
    api_key_id: Mapped[str] = mapped_column(String(40))
    model_version_id: Mapped[str] = mapped_column(String(40))
    input_digest: Mapped[str] = mapped_column(String(64))
    output: Mapped[dict[str, Any]] = mapped_column(JSON)
    rule_id: Mapped[int] = mapped_column(Integer)
    seq: Mapped[int] = mapped_column(BigInteger)
    prev_hash: Mapped[str] = mapped_column(String(64))
    row_hash: Mapped[str] = mapped_column(String(64))
    # NULL: not recorded (a row written before migration 0002)
    missing_filled: Mapped[bool | None] = mapped_column(Boolean, default=None)

    __table_args__ = (
        Index("ix_audit_log_tenant_created", "tenant_id", "created_at"),
        Index("ux_audit_log_tenant_seq", "tenant_id", "seq", unique=True),
    )


class AuditChainHead(Base):
    """The last link of a tenant's audit chain, updated in the transaction that appends rows.

    Locked FOR UPDATE by each batch that appends to the tenant's chain (so several server processes
    extend it one after another), and what a truncated tail is detected against.
    """

    __tablename__ = "audit_chain_heads"
    tenant_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    row_hash: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class JobProgressPoint(Base):
    """One progress point a worker wrote for a job (the training history; appended, never changed)."""

    __tablename__ = "job_progress_points"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer)
    epoch: Mapped[int] = mapped_column(Integer)
    loss: Mapped[float | None] = mapped_column(Float, default=None)
    val_score: Mapped[float | None] = mapped_column(Float, default=None)
    at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (Index("ix_job_progress_points_job", "job_id", "id"),)


class Evaluation(Base):
    """A model version scored on a labelled dataset; immutable once succeeded or failed."""

    __tablename__ = "evaluations"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    model_version_id: Mapped[str] = mapped_column(ForeignKey("model_versions.id", ondelete="CASCADE"))
    dataset_id: Mapped[str] = mapped_column(String(40))  # no foreign key: the result outlives its dataset
    # the scored file's SHA-256 (NULL: an evaluation from before migration 0005): outlives the dataset too
    dataset_sha256: Mapped[str | None] = mapped_column(String(64), default=None)
    target: Mapped[str] = mapped_column(String(300))
    slice_by: Mapped[str | None] = mapped_column(String(300), default=None)
    state: Mapped[JobState] = mapped_column(JobStateType(), default=JobState.QUEUED)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    error_code: Mapped[str | None] = mapped_column(String(64), default=None)
    n_rows_in_file: Mapped[int | None] = mapped_column(Integer, default=None)
    n_rows: Mapped[int | None] = mapped_column(Integer, default=None)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(200), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    heartbeat_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)

    __table_args__ = (
        Index("ix_evaluations_tenant_version_created", "tenant_id", "model_version_id", "created_at"),
        Index("ix_evaluations_state_heartbeat", "state", "heartbeat_at"),
    )


class RegistryEvent(Base):
    """A change of the registry (alias set / moved / deleted, version created or reviewed), written with the change."""

    __tablename__ = "registry_events"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    registered_model_id: Mapped[str] = mapped_column(ForeignKey("registered_models.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(default=utcnow)
    action: Mapped[str] = mapped_column(String(32))
    alias: Mapped[str | None] = mapped_column(String(64), default=None)
    from_version: Mapped[int | None] = mapped_column(Integer, default=None)
    to_version: Mapped[int | None] = mapped_column(Integer, default=None)
    api_key_id: Mapped[str | None] = mapped_column(String(40), default=None)
    job_id: Mapped[str | None] = mapped_column(String(40), default=None)
    # version_created: SHA-256 of the version's rule list and text (`registry_chain.version_sha256`), so the
    # chain seals what the version decides with; NULL for other events and for versions made before migration 0009
    content_sha256: Mapped[str | None] = mapped_column(String(64), default=None)
    # version_created: SHA-256 of the version's metrics, input schema and provenance (`registry_chain.details_sha256`);
    # NULL for other events and for versions made before migration 0010
    details_sha256: Mapped[str | None] = mapped_column(String(64), default=None)
    # the model's name when the event was recorded (every event since migration 0010; `bind_names` records a
    # `name_bound` event for a model made before), so a name changed in the database no longer matches the chain
    model_name: Mapped[str | None] = mapped_column(String(100), default=None)
    # version_reviewed (migration 0011): the decision (`approve` / `reject`), the reviewer's note and the ids of the
    # succeeded evaluations of the version it rests on (comma-separated, newest first); NULL for other events
    decision: Mapped[str | None] = mapped_column(String(16), default=None)
    note: Mapped[str | None] = mapped_column(Text, default=None)
    evaluation_ids: Mapped[str | None] = mapped_column(Text, default=None)
    # the model's event chain (`registry_chain`): this event's place, the previous event's hash, its own
    seq: Mapped[int] = mapped_column(Integer)
    prev_hash: Mapped[str] = mapped_column(String(64))
    row_hash: Mapped[str] = mapped_column(String(64))

    __table_args__ = (
        Index("ix_registry_events_model", "registered_model_id", "id"),
        Index("ux_registry_events_model_seq", "registered_model_id", "seq", unique=True),
    )


class WorkerHeartbeat(Base):
    """A live training worker: written every few seconds by each worker, deleted when it stops cleanly."""

    __tablename__ = "worker_heartbeats"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)  # Celery hostname / pid
    queue: Mapped[str] = mapped_column(String(200))
    hostname: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    seen_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (Index("ix_worker_heartbeats_queue_seen", "queue", "seen_at"),)
