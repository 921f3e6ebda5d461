"""Registry event schemas."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.services.reviews import split_ids

if TYPE_CHECKING:
    from app.tables import RegistryEvent


class RegistryEventPublic(BaseModel):
    """One change of a named model: an alias set, moved or deleted, a version created or reviewed (or, once, the name
    of a model made before migration 0010 bound into its chain by `neurules-admin bind-model-names`)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "at": "2026-11-25T10:00:00Z",
                    "action": "alias_set",
                    "alias": "production",
                    "from_version": 2,
                    "to_version": 3,
                    "api_key_id": "key_0a1b2c3d4e5f60718293a4b5",
                    "job_id": None,
                    "content_sha256": None,
                    "details_sha256": None,
                    "model_name": "credit-risk",
                    "decision": None,
                    "note": None,
                    "evaluation_ids": None,
                    "seq": 7,
                    "row_hash": "9f2c...",
                }
            ]
        }
    )

    at: datetime
    action: Literal[
        "alias_set", "alias_deleted", "version_created", "name_bound", "version_reviewed", "training_file_deleted"
    ]
    alias: str | None = Field(description="the alias (alias events)")
    from_version: int | None = Field(description="version the alias pointed at before (null: it was new)")
    to_version: int | None = Field(description="version the alias points at now, or the version created or reviewed")
    api_key_id: str | None = Field(description="the API key that made the change (null: a training job did)")
    job_id: str | None = Field(description="the training job that created the version")
    content_sha256: str | None = Field(
        description="version_created: SHA-256 of the version's rule list as sealed in the chain (docs/audit.md); "
        "null for alias events and for versions made before the seal was recorded"
    )
    details_sha256: str | None = Field(
        description="version_created: SHA-256 of the version's metrics, input schema and provenance as sealed in the "
        "chain (docs/audit.md); null for other events and for versions made before migration 0010"
    )
    model_name: str | None = Field(
        description="the model's name, inside the event's hash (null for events recorded before migration 0010)"
    )
    decision: Literal["approve", "reject"] | None = Field(
        None, description="version_reviewed: the reviewer's decision (null for other events)"
    )
    note: str | None = Field(
        None,
        description="version_reviewed: the reviewer's note; training_file_deleted: which file (id, name, rows, "
        "SHA-256) was deleted",
    )
    evaluation_ids: list[str] | None = Field(
        None, description="version_reviewed: the version's succeeded evaluations the review rests on"
    )
    seq: int = Field(description="the event's place in the model's event chain (docs/audit.md), from 1")
    row_hash: str = Field(description="the event's hash in that chain: the newest event's is the chain's head")

    @classmethod
    def from_row(cls, row: RegistryEvent) -> RegistryEventPublic:
        """The response for an event row."""
        return cls(
            at=row.at,
            action=row.action,
            alias=row.alias,
            from_version=row.from_version,
            to_version=row.to_version,
            api_key_id=row.api_key_id,
            job_id=row.job_id,
            content_sha256=row.content_sha256,
            details_sha256=row.details_sha256,
            model_name=row.model_name,
            decision=row.decision,
            note=row.note,
            evaluation_ids=split_ids(row.evaluation_ids) if row.action == "version_reviewed" else None,
            seq=row.seq,
            row_hash=row.row_hash,
        )


class RegistryEventList(BaseModel):
    """A page of a named model's events, newest first."""

    items: list[RegistryEventPublic]
    total: int
    limit: int
    offset: int
