"""Review and approval schemas: a person's decision on a version, and the version's approval state."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.services.reviews import NOTE_MAX_CHARS

if TYPE_CHECKING:
    from app.services.reviews import Approval, Review


class ReviewCreate(BaseModel):
    """Approve or reject a version (by another API key than the one that created it)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "decision": "approve",
                    "note": "read all 7 rules; holdout F1 0.81 on ds_... (never trained on); compared with v2",
                }
            ]
        },
    )

    decision: Literal["approve", "reject"] = Field(
        description="`approve` (needs a succeeded evaluation of the version) or `reject`; the latest review wins"
    )
    note: str = Field(
        min_length=1,
        max_length=NOTE_MAX_CHARS,
        description=f"what the reviewer checked: required, not blank, at most {NOTE_MAX_CHARS} characters",
    )


class ReviewPublic(BaseModel):
    """A recorded review: a `version_reviewed` event of the model's hash-chained registry events."""

    name: str
    version: int
    version_id: str
    decision: Literal["approve", "reject"]
    note: str
    api_key_id: str | None = Field(description="the reviewing API key")
    evaluation_ids: list[str] = Field(
        description="the version's succeeded evaluations when it was reviewed (newest first): what it rests on"
    )
    at: datetime
    seq: int = Field(description="the review's place in the model's event chain")
    row_hash: str = Field(description="the review event's hash in that chain")

    @classmethod
    def from_review(cls, r: Review) -> ReviewPublic:
        """The response for a recorded review."""
        return cls(
            name=r.name,
            version=r.version,
            version_id=r.version_id,
            decision=r.decision,
            note=r.note,
            api_key_id=r.api_key_id,
            evaluation_ids=r.evaluation_ids,
            at=r.at,
            seq=r.seq,
            row_hash=r.row_hash,
        )


class ApprovalPublic(BaseModel):
    """A version's approval state: its latest review (`pending`: none yet)."""

    state: Literal["approved", "rejected", "pending"]
    required: bool = Field(
        description="whether the tenant's operator requires an approval before an alias may point at a version"
    )
    api_key_id: str | None = Field(None, description="the key of the latest review")
    at: datetime | None = None
    note: str | None = None
    evaluation_ids: list[str] = Field(default_factory=list, description="the evaluations the latest review rests on")
    seq: int | None = Field(None, description="the latest review's place in the model's event chain")

    @classmethod
    def from_approval(cls, a: Approval) -> ApprovalPublic:
        """The response for an approval state."""
        return cls(
            state=a.state,
            required=a.required,
            api_key_id=a.api_key_id,
            at=a.at,
            note=a.note,
            evaluation_ids=a.evaluation_ids,
            seq=a.seq,
        )
